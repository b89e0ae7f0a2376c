"""The SQLite side of the ``Erasure`` port: the shared logical step (``sql.erasure``), then the
physical one, the scrub: it merges the full-text indexes, rewrites the file with
``secure_delete`` and empties the write-ahead log, with every other writer held back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from fermix_memory.adapters.sql.erasure import CANDIDATES, ErasingTransaction
from fermix_memory.adapters.sqlite.connection import translated_errors
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.schema import FTS_TABLES
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction
from fermix_memory.application.store_ports import ErasureTransaction, ScrubReport, WriteTransaction

T = TypeVar("T")


class SqliteErasingTransaction(ErasingTransaction):
    """Implements ``ErasureTransaction`` on the write transaction it accompanies (SQLite's SQL)."""

    def _candidates(self, kinds: list[str], needle: str) -> tuple[str, Any]:
        return (f"{CANDIDATES} AND (kind IN ({','.join('?' * len(kinds))}) OR instr(payload, ?) > 0)"
                " ORDER BY position", (*kinds, needle))

    def _redact(self, positions: Sequence[int]) -> None:
        self._cursor.executemany("UPDATE events SET payload = NULL WHERE position = ? AND payload IS NOT NULL",
                                 [(p,) for p in positions])


class SqliteErasure:
    """Implements the ``Erasure`` port on a :class:`SqliteEventStore`."""

    def __init__(self, store: SqliteEventStore) -> None:
        self.store = store

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def name(self) -> str:
        """How messages name this store."""
        return self.store.name

    def erase(self, work: Callable[[WriteTransaction, ErasureTransaction], T]) -> T:
        def both(tx: SqliteTransaction) -> T:
            return work(tx, SqliteErasingTransaction(tx))

        return self.store.write(both)

    def scrub(self) -> ScrubReport:
        """Merge the full-text indexes (dropping deleted entries), rewrite the file (``VACUUM``,
        with ``secure_delete``) and empty the WAL, with every other writer of this store held
        back meanwhile. ``wal_truncated`` is false when a reader elsewhere kept the WAL alive."""
        with self.store.exclusive("rewritten") as conn:
            before = self._file_bytes()
            with translated_errors(f"scrubbing {self.name}"):
                conn.execute("PRAGMA secure_delete = ON")
                try:
                    with conn:
                        for table in FTS_TABLES:
                            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                    conn.execute("VACUUM")
                finally:
                    conn.execute("PRAGMA secure_delete = OFF")
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0][0]
                if busy == 0:  # every erased byte is gone from the files: the erasure is finished
                    conn.execute("DELETE FROM scrub_pending")
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            remains = () if busy == 0 else (
                f"another process holds a read open on {self.path}, so its write-ahead log still has old pages;"
                " run forget again once it has closed",)
            return ScrubReport(wal_truncated=busy == 0, bytes_before=before, bytes_after=self._file_bytes(),
                               store=str(self.path), remains=remains)

    def scrub_pending(self) -> bool:
        """Whether an erasure committed but its scrub has not finished (killed, or a reader
        elsewhere kept the WAL): its bytes may still be in the files."""
        with translated_errors(f"reading {self.name}"):
            return bool(self.store.reader().execute("SELECT count(*) FROM scrub_pending").fetchall()[0][0])

    def _file_bytes(self) -> int:
        files = (self.path, self.path.with_name(self.path.name + "-wal"))
        return sum(f.stat().st_size for f in files if f.exists())
