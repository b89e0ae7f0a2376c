"""One write transaction on the PostgreSQL store: the same appends, chain, projections and
state loaders as on SQLite (the SQL is shared, run through :class:`SqlCursor`); only the
driver's errors differ."""

from __future__ import annotations

from typing import Any, cast

from psycopg import errors as pg_errors

from fermix_memory.adapters.postgres.connection import SqlCursor
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction


class PostgresTransaction(SqliteTransaction):
    """The :class:`WriteTransaction` handed to use cases inside one write on PostgreSQL."""

    def __init__(self, cursor: SqlCursor) -> None:
        super().__init__(cast(Any, cursor))

    @staticmethod
    def _version_clash(exc: Exception) -> bool:
        return isinstance(exc, pg_errors.UniqueViolation) and "events_stream_version_key" in str(exc)
