"""``WHERE`` clauses every read builds: a memory filter's scopes, and optional column equalities."""

from __future__ import annotations

from typing import Any

from fermix_memory.domain.scopes import MemoryFilter


def where_sql(*optional: tuple[str, str, str | None], extra: tuple[str, ...] = ()) -> tuple[str, list[Any]]:
    """``WHERE`` for the ``(alias, column, value)`` filters whose value is given (empty if none)."""
    clauses = [f"{alias}{column} = ?" for alias, column, value in optional if value is not None]
    params: list[Any] = [value for _, _, value in optional if value is not None]
    clauses.extend(extra)
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params


def scope_sql(where: MemoryFilter, alias: str = "") -> tuple[str, list[Any]]:
    """The condition (and its parameters) of the memory rows ``where`` reads: its agent's and
    owner's rows of any of its scopes (of a scope type, or of one scope)."""
    p = f"{alias}." if alias else ""
    clauses, params = [], [where.agent_id, where.owner_id]
    for stype, sid in where.scopes:
        if sid is None:
            clauses.append(f"{p}scope_type = ?")
            params.append(stype.value)
        else:
            clauses.append(f"({p}scope_type = ? AND {p}scope_id = ?)")
            params.extend((stype.value, sid))
    sql = f"{p}agent_id = ? AND {p}owner_id = ? AND ({' OR '.join(clauses) or 'FALSE'})"
    return sql, params
