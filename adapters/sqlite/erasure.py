"""The SQLite side of the ``Erasure`` port: the shared logical step (``sql.erasure``), then the
physical one, the scrub: it merges the full-text indexes, rewrites the file with
``secure_delete`` and empties the write-ahead log, with every other writer held back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import apsw

from fermix_memory.adapters.sql.erasure import CANDIDATES, ErasingTransaction
from fermix_memory.adapters.sqlite.connection import translated_errors, typed_error
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.group_commit import roll_back
from fermix_memory.adapters.sqlite.schema import FTS_TABLES
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction
from fermix_memory.application.store_ports import ErasureTransaction, ScrubReport, WriteTransaction

T = TypeVar("T")
log = logging.getLogger("fermix_memory.storage")

# How long a scrub waits, over several attempts, for another process's writes to the file (its
# upkeep's are short) before it leaves the rewrite pending rather than fail the erasure (ADR-0095).
SCRUB_WAIT_S = 15.0
BUSY = (apsw.BusyError, apsw.LockedError)


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
        back meanwhile. ``wal_truncated`` is false when a reader elsewhere kept the WAL alive.

        Another process writing to the file (its upkeep: marks, vectors, index merges) is waited
        for, attempt after attempt, for at most :data:`SCRUB_WAIT_S`; this store's own writers
        go on between attempts. Still written to then, the rewrite is left pending (ADR-0095):
        the report says so (not finished, nothing rewritten), and the next open of a memory on
        the file, a retention run, or forget again finishes it."""
        from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_random_exponential

        before = self._file_bytes()
        try:
            for attempt in Retrying(retry=retry_if_exception_type(BUSY), stop=stop_after_delay(SCRUB_WAIT_S),
                                    wait=wait_random_exponential(multiplier=0.05, max=1), before_sleep=_busy_noted):
                with attempt:
                    return self._scrub_once(before)
        except RetryError as exc:
            log.info("%s was not rewritten: %s; the rewrite is left pending", self.path, exc.last_attempt.exception())
        except apsw.Error as exc:
            raise typed_error(f"scrubbing {self.name}", exc) from exc
        return ScrubReport(wal_truncated=False, bytes_before=before, bytes_after=self._file_bytes(),
                           store=str(self.path), remains=(self._pending_note(),), rewrite_pending=True)

    def _scrub_once(self, before: int) -> ScrubReport:
        """One attempt, each step waiting for a busy file as long as the store's writes do, at most a
        third of the whole wait (a busy step changed nothing: each is its own transaction, and each
        is safe to run again)."""
        with self.store.exclusive("rewritten") as conn:
            usual = conn.execute("PRAGMA busy_timeout").fetchall()[0][0]
            assert isinstance(usual, int)
            conn.set_busy_timeout(min(usual, int(SCRUB_WAIT_S * 1000 / 3)))
            try:
                truncated = _rewrite(conn)
            finally:
                conn.set_busy_timeout(usual)
        remains = () if truncated else (
            f"another reader (a process, or another memory open on the same home) kept a read open on {self.path},"
            " so its write-ahead log still has old pages; run forget again once it has closed",)
        return ScrubReport(wal_truncated=truncated, bytes_before=before, bytes_after=self._file_bytes(),
                           store=str(self.path), remains=remains)

    def _pending_note(self) -> str:
        """What the report says of a rewrite left pending: since which erasure, and what ends it."""
        with translated_errors(f"reading {self.name}"):
            rows = self.store.reader().execute("SELECT since_position FROM scrub_pending").fetchall()
        since = f" (pending since the erasure at log position {rows[0][0]})" if rows else ""
        return (f"{self.path} was not rewritten yet: another writer (a process, or another memory open on the same"
                f" home) kept writing to it through"
                f" {SCRUB_WAIT_S:g} s of trying, so the erased bytes stay in its free pages and write-ahead log"
                f"{since}; the next open of a memory on it, a retention run, or forget again rewrites it")

    def scrub_pending(self) -> bool:
        """Whether an erasure committed but its scrub has not finished (killed, or a reader
        elsewhere kept the WAL): its bytes may still be in the files."""
        with translated_errors(f"reading {self.name}"):
            return bool(self.store.reader().execute("SELECT count(*) FROM scrub_pending").fetchall()[0][0])

    def _file_bytes(self) -> int:
        files = (self.path, self.path.with_name(self.path.name + "-wal"))
        return sum(f.stat().st_size for f in files if f.exists())


def _rewrite(conn: apsw.Connection) -> bool:
    """The scrub's steps on the writer outside any transaction; whether the write-ahead log was
    emptied (and the erasure then no longer noted as pending)."""
    conn.execute("PRAGMA secure_delete = ON")
    try:
        # IMMEDIATE: the write lock first, waited for. A deferred transaction would read the indexes
        # first, and a read that must become a write while another connection writes fails at
        # once (SQLite calls no busy handler there): the scrub failed on any upkeep write.
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table in FTS_TABLES:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise
        conn.execute("VACUUM")
    finally:
        conn.execute("PRAGMA secure_delete = OFF")
    truncated = _truncate_wal(conn)
    if truncated:  # every erased byte is gone from the files: the erasure is finished
        conn.execute("DELETE FROM scrub_pending")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return truncated


def _truncate_wal(conn: apsw.Connection) -> bool:
    """Empty the write-ahead log; whether it was. A checkpoint that meets another connection's
    (another memory's background checkpoints) is refused at once, without the busy handler: it
    is tried again for at most a third of :data:`SCRUB_WAIT_S`; a reader still in the log after
    that keeps it."""
    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_random_exponential

    retrying = Retrying(retry=retry_if_result(lambda truncated: not truncated), stop=stop_after_delay(SCRUB_WAIT_S / 3),
                        wait=wait_random_exponential(multiplier=0.02, max=0.5), retry_error_callback=lambda _: False)
    return bool(retrying(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0][0] == 0))


def _busy_noted(state: Any) -> None:
    """Before the scrub tries again: another process is writing to the file."""
    log.info("the file is busy with another process's write; the scrub tries again (attempt %d)",
             state.attempt_number)
