"""``WHERE`` clauses every read builds: a memory filter's scopes, and optional column equalities."""

from __future__ import annotations

import enum
from typing import Any

from fermix_memory.domain.scopes import MemoryFilter
from fermix_memory.domain.values import ScopeType


def enum_literal(kind: type[enum.StrEnum], value: object) -> str:
    """``value`` as an SQL string literal, once it is one of ``kind``'s values (else ``ValueError``,
    before any SQL is built): never host text. Columns a partial index filters on (``scope_type``,
    ``category``, ``promote_target``) are compared with literals, not bound values: SQLite prepares
    a statement again at each run whose bound value could decide a partial index's use (ADR-0069)."""
    literal = next((m.value for m in kind if isinstance(value, str) and m.value == value), None)
    if literal is None or not literal.replace("_", "").isalnum():  # an enum value: no quote to escape
        raise ValueError(f"{value!r} is no {kind.__name__} value to write into SQL")
    return f"'{literal}'"


def where_sql(*optional: tuple[str, str, str | None], extra: tuple[str, ...] = ()) -> tuple[str, list[Any]]:
    """``WHERE`` for the ``(alias, column, value)`` filters whose value is given (empty if none)."""
    clauses = [f"{alias}{column} = ?" for alias, column, value in optional if value is not None]
    params: list[Any] = [value for _, _, value in optional if value is not None]
    clauses.extend(extra)
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params


def scope_sql(where: MemoryFilter, alias: str = "") -> tuple[str, list[Any]]:
    """The condition (and its parameters) of the memory rows ``where`` reads: its agent's and
    owner's rows of any of its scopes (of a scope type, or of one scope). The scope types are
    written out (:func:`enum_literal`); the ids are bound."""
    p = f"{alias}." if alias else ""
    clauses, params = [], [where.agent_id, where.owner_id]
    for stype, sid in where.scopes:
        literal = enum_literal(ScopeType, stype)
        if sid is None:
            clauses.append(f"{p}scope_type = {literal}")
        else:
            clauses.append(f"({p}scope_type = {literal} AND {p}scope_id = ?)")
            params.append(sid)
    sql = f"{p}agent_id = ? AND {p}owner_id = ? AND ({' OR '.join(clauses) or 'FALSE'})"
    return sql, params
