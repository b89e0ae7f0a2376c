"""A memory's tables read directly, whichever store it lives in: the home's SQLite file (read
only), or the PostgreSQL database that ``FERMIX_DATABASE_URL`` names (as ``every_store`` sets it),
through the same adapters a memory opens there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from fermix_memory.adapters.sql.job_queries import SqlJobQueries
from fermix_memory.application.jobs import JobQueries
from fermix_memory.application.settings_storage import DATABASE_URL_ENV
from fermix_memory.entrypoints.storage import Storage, open_postgres


class StoreReads:
    """The job queries and plain ``SELECT``s (``?`` placeholders) of one home's store."""

    def __init__(self, home: Path, storage: Storage | None) -> None:
        self._home = home
        self._storage = storage
        self.jobs: JobQueries = storage.jobs if storage is not None else SqlJobQueries(self._sqlite)

    def _sqlite(self) -> apsw.Connection:
        return apsw.Connection(str(self._home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)

    def select(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        if self._storage is not None:
            return [tuple(row) for row in self._storage.store.rows(sql, params)]
        conn = self._sqlite()
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()


@contextmanager
def store_reads(home: Path) -> Iterator[StoreReads]:
    url = os.environ.get(DATABASE_URL_ENV)
    storage = open_postgres(url, readonly=True) if url else None
    try:
        yield StoreReads(home, storage)
    finally:
        if storage is not None:
            storage.store.close()
