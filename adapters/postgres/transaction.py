"""One write transaction on the PostgreSQL store: the same appends, chain, projections and
state loaders as on SQLite (the SQL is shared, run through :class:`SqlCursor`); only the
driver's errors differ."""

from __future__ import annotations

from typing import Any, cast

from psycopg import errors as pg_errors

from fermix_memory.adapters.postgres.connection import SqlCursor
from fermix_memory.adapters.sqlite.transaction import INSERT_EVENT, SqliteTransaction
from fermix_memory.application.errors import ConcurrencyConflict


class PostgresTransaction(SqliteTransaction):
    """The :class:`WriteTransaction` handed to use cases inside one write on PostgreSQL."""

    def __init__(self, cursor: SqlCursor) -> None:
        super().__init__(cast(Any, cursor))

    def _insert_event(self, row: tuple[Any, ...]) -> None:
        try:
            self.cursor.execute(INSERT_EVENT, row)
        except pg_errors.UniqueViolation as exc:
            if "events_stream_version_key" not in str(exc):
                raise  # not the version: a failed write (StorageError), never a conflict to retry
            raise ConcurrencyConflict(f"stream {row[1]!r} already has version {row[2]}: nothing was appended") from None
