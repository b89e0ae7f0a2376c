"""The live memory rows of some scopes, read in pages (``SqlQueries.memories_under``) or by scope
(``SqlQueries.scopes_under``): the ``FROM ... WHERE`` both share, on every dialect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fermix_memory.adapters.sql.scope_sql import enum_literal, where_sql
from fermix_memory.domain.values import Category, ScopeType

# ``LIKE`` escapes with ``!``: the same on SQLite and PostgreSQL (a backslash is not).
_LIKE_ESCAPED = str.maketrans({"!": "!!", "%": "!%", "_": "!_"})


def rows_under(agent_id: str, owner_id: str | None, scope_type: str, starts: Sequence[str],
               unshown_category: str | None, containing: Sequence[str] = ()) -> tuple[str, list[Any]]:
    """``FROM memories WHERE ...`` of the live rows of ``agent_id`` (``owner_id``'s when given) of
    ``scope_type`` whose scope id begins with one of ``starts``, and its parameters. Scope type and
    category written out (``enum_literal``: ``ValueError`` for any other); substr, not LIKE, for
    the scope (no wildcard to escape, case-sensitive). ``containing``: texts each row's value holds
    (``LIKE``, case-insensitive on SQLite for ASCII: a pre-filter, never the final word)."""
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
    return f"FROM memories {where} AND ({begins}){holds}", params
