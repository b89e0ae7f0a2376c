"""PostgreSQL's vectors (ADR-0043): the schema's triggers queue every message as it is written
(schema 4; positions of several chains may commit out of order, so no mark could follow them),
and its planner needs no fixed join order: the core's index as it is."""

from __future__ import annotations

from fermix_memory.adapters.sql.vectors import SqlVectorIndex, unvectored_sql

UNVECTORED_SQL = f"SELECT {unvectored_sql()}"


class PostgresVectorIndex(SqlVectorIndex):
    """The vector index of a PostgreSQL database."""
