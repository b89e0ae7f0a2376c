"""The live memory rows of some scopes, read in pages (``SqlQueries.memories_under``) or by scope
(``SqlQueries.scopes_under``): the ``FROM ... WHERE`` both share, on every dialect."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fermix_memory.adapters.sql.scope_sql import enum_literal, where_sql
from fermix_memory.application.query_ports import NumberBound
from fermix_memory.domain.values import Category, ScopeType

# A dialect's SQL of one bound at one path of ``value`` (and its parameters), ``None`` for a path
# its JSON functions cannot name: that bound is then not applied (a pre-filter may keep more).
NumberSql = Callable[[tuple[str, ...], NumberBound], tuple[str, list[Any]] | None]

# ``LIKE`` escapes with ``!``: the same on SQLite and PostgreSQL (a backslash is not).
_LIKE_ESCAPED = str.maketrans({"!": "!!", "%": "!%", "_": "!_"})


def rows_under(agent_id: str, owner_id: str | None, scope_type: str, starts: Sequence[str],
               unshown_category: str | None, containing: Sequence[str] = (), numbers: Sequence[NumberBound] = (),
               number_sql: NumberSql | None = None) -> tuple[str, list[Any]]:
    """``FROM memories WHERE ...`` of the live rows of ``agent_id`` (``owner_id``'s when given) of
    ``scope_type`` whose scope id begins with one of ``starts``, and its parameters. Scope type and
    category written out (``enum_literal``: ``ValueError`` for any other); substr, not LIKE, for
    the scope (no wildcard to escape, case-sensitive). ``containing``: texts each row's value holds
    (``LIKE``, case-insensitive on SQLite for ASCII: a pre-filter, never the final word); ``numbers``:
    bounds of the values (ADR-0109) by the dialect's ``number_sql`` (none: not applied)."""
    extra = [f"scope_type = {enum_literal(ScopeType, scope_type)}", "archived_at IS NULL"]
    if unshown_category is not None:
        extra.append(f"category = {enum_literal(Category, unshown_category)}"
                     " AND promote_target IS NULL AND scope_type <> 'job'")
    where, params = where_sql(("", "agent_id", agent_id), ("", "owner_id", owner_id), extra=tuple(extra))
    begins = " OR ".join("substr(scope_id, 1, ?) = ?" for _ in starts) or "FALSE"
    for start in starts:
        params += [len(start), start]
    holds = "".join(" AND value LIKE ? ESCAPE '!'" for _ in containing)
    params += [f"%{text.translate(_LIKE_ESCAPED)}%" for text in containing]
    within, within_params = _within(numbers, number_sql)
    return f"FROM memories {where} AND ({begins}){holds}{within}", params + within_params


def _within(numbers: Sequence[NumberBound], number_sql: NumberSql | None) -> tuple[str, list[Any]]:
    """`` AND`` each bound that the dialect can write: held at one of its paths."""
    sql, params = "", list[Any]()
    if number_sql is None:
        return sql, params
    for bound in numbers:
        at = [w for w in (number_sql(path, bound) for path in bound.paths) if w is not None]
        if not at or len(at) < len(bound.paths):
            continue  # a path the dialect cannot name: the bound holds back nothing
        sql += " AND (" + " OR ".join(where for where, _ in at) + ")"
        params += [p for _, these in at for p in these]
    return sql, params
