"""The PostgreSQL event store: the hash-chained append-only log and its projections in one
transaction, on a server many host processes share (ADR-0029).

Each write runs in its own transaction on a pooled connection. The log has one chain, so
appends are serialised by a transaction-scoped advisory lock taken first in every write: the
head (last position and hash) is then read and extended with nothing else in between.
Serialisation failures and deadlocks are retried with tenacity (3 attempts, then
:class:`StorageBusy`); a lost connection is a :class:`StorageError` (a write whose COMMIT was
under way may or may not have committed; the next call reconnects through the pool).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from tenacity import RetryError, Retrying, retry_if_exception, wait_random_exponential

from fermix_memory.adapters.postgres.change_feed import STOP, ChangeFeed, Heard, notify_sql, payload
from fermix_memory.adapters.postgres.connection import (
    SqlCursor,
    check_url,
    connect,
    connection_failure,
    is_retryable,
    require_driver,
    shown,
    translated,
    translated_errors,
)
from fermix_memory.adapters.postgres.schema import check_schema, migrate, missing_triggers
from fermix_memory.adapters.postgres.transaction import PostgresTransaction
from fermix_memory.adapters.sqlite.head import Head
from fermix_memory.adapters.sqlite.transaction import LOG_ROWS, append_logged_rows, logged_from_row, recorded_from_row
from fermix_memory.application.errors import ReadOnlyStore, StorageBusy, StorageError
from fermix_memory.application.ports import RecordedEvent
from fermix_memory.domain.log_chain import GENESIS_HASH, LoggedEvent

log = logging.getLogger("fermix_memory.storage")

T = TypeVar("T")
WRITE_ATTEMPTS = 3
LOG_LOCK = 0x46524D58_0002  # "FRMX", 2: the advisory lock that serialises appends to the one chain
READ_BATCH = 1000
POOL_MAX = 16
POOL_TIMEOUT_S = 10.0
RECONNECT_S = 15.0  # how long a write or read lost with its connection is tried again on new ones


class _Unsent(Exception):
    """The connection was lost before COMMIT was sent (or during a read): nothing was applied,
    so the work may run again on another connection."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _retried(exc: BaseException) -> bool:
    return isinstance(exc, _Unsent) or is_retryable(exc)


def _stop(state: Any) -> bool:
    """Serialisation failures: WRITE_ATTEMPTS attempts; a lost connection: RECONNECT_S seconds."""
    if isinstance(state.outcome.exception(), _Unsent):
        return bool(state.seconds_since_start >= RECONNECT_S)
    return bool(state.attempt_number >= WRITE_ATTEMPTS)

CommitListener = Callable[[list[RecordedEvent]], None]


class PostgresEventStore:
    """Implements the ``EventStore`` port on one PostgreSQL database."""

    def __init__(self, url: str, *, pool_max: int = POOL_MAX, source: str = "the storage URL",
                 readonly: bool = False) -> None:
        """``readonly``: the schema only checked, every session read-only on the server
        (``default_transaction_read_only``), and every write refused with ReadOnlyStore."""
        require_driver()
        from psycopg_pool import ConnectionPool

        self.url = check_url(url, source)
        self.readonly = readonly
        with connect(self.url) as conn:  # a clear line for a wrong URL, a refused connection, no database
            if readonly:
                check_schema(conn, self.url)
            else:
                migrate(conn, self.url)
            with translated_errors("checking the event log's triggers"):
                self.missing_triggers = missing_triggers(conn)
        if self.missing_triggers:
            log.warning("the append-only triggers %s of %s are missing (verify reports it)",
                        ", ".join(self.missing_triggers), shown(self.url))
        self._pool = ConnectionPool(self.url, min_size=1, max_size=pool_max, open=False, timeout=POOL_TIMEOUT_S,
                                    kwargs={"autocommit": True, **({"options": "-c default_transaction_read_only=on"}
                                                                   if readonly else {})}, name="fermix")
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT_S)
        except Exception as exc:
            self._pool.close()
            raise connection_failure(self.url, exc) from None
        self._listeners: list[CommitListener] = []
        self._reactions: list[CommitListener] = []
        self._closed = False
        self._lock = threading.Lock()
        # The change feed (ADR-0029): what other processes commit reaches this store's listeners.
        self._token = uuid.uuid4().hex
        self._known = self.last_position()  # the last position this store knows of: its own commits and foreign ones
        self._heard = Heard(self._known)  # what its listeners were given (before the open: the open's repair)
        self._feed = None if readonly else ChangeFeed(self.url, self._token, self._listening, self._foreign)

    # --- connections --------------------------------------------------------------------------

    @contextmanager
    def connection(self, doing: str) -> Iterator[Any]:
        """A pooled connection (autocommit: every block that writes opens its own transaction)."""
        if self._closed:
            raise StorageError("the memory store is closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except Exception as exc:
            error = translated(exc, doing)
            if error is exc and type(exc).__name__ == "PoolTimeout":
                error = StorageBusy(f"{doing}: no connection to the PostgreSQL server within {POOL_TIMEOUT_S:g} s")
            if error is exc:
                raise
            raise error from exc

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener`` with the events of every commit made through this store, right after it."""
        self._listeners.append(listener)

    def add_after_commit(self, reaction: CommitListener) -> None:
        """Call ``reaction`` with the events of every commit made through this store, after the
        listeners; its failures are logged, never raised into the write that already committed."""
        self._reactions.append(reaction)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._feed is not None:
            self._feed.stop(self._wake_feed)
        self._pool.close()

    def _wake_feed(self) -> None:
        with self._pool.connection(timeout=1) as conn:
            conn.execute(notify_sql(), (f"{self._token} {STOP}",))

    # --- writes ---------------------------------------------------------------------------------

    def write(self, work: Callable[[Any], T]) -> T:
        if self.readonly:
            raise ReadOnlyStore(f"{shown(self.url)} was opened read-only; nothing was written")
        result, recorded = self._retrying(lambda: self._write_once(work), "writing to the PostgreSQL store")
        if recorded:
            self._committed(recorded)
        return result

    def _retrying(self, once: Callable[[], T], doing: str) -> T:
        """``once()``, again when the server undid it to let another go first (a few times) or when
        its connection was lost before anything was applied (for a bounded time, on new
        connections: the pool reconnects when the server is back)."""
        try:
            for attempt in Retrying(retry=retry_if_exception(_retried), stop=_stop, reraise=False,
                                    wait=wait_random_exponential(multiplier=0.05, max=1)):
                with attempt:
                    return once()
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            if isinstance(cause, _Unsent):
                raise StorageError(f"{doing}: the PostgreSQL server could not be reached for {RECONNECT_S:g} s;"
                                   f" nothing was applied: {' '.join(str(cause).split())}") from None
            raise StorageBusy(f"{doing}: the write was undone by the server {WRITE_ATTEMPTS} times: {cause}") from None
        raise AssertionError("unreachable")  # pragma: no cover  # Retrying returns or raises

    def _lost(self, conn: Any, exc: BaseException) -> _Unsent:
        """``exc`` lost ``conn``: the pool's other idle connections are checked (a server restart
        breaks them all) and the work is tried again."""
        try:
            self._pool.check()
        except Exception:
            log.debug("checking the pool's connections failed", exc_info=True)
        return _Unsent(exc)

    def _write_once(self, work: Callable[[Any], T]) -> tuple[T, list[RecordedEvent]]:
        committing = False
        with self.connection("writing to the PostgreSQL store") as conn:
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
                    tx = PostgresTransaction(SqlCursor(conn))
                    result = work(tx)
                    if tx.recorded:  # delivered to the other processes only if this commits
                        conn.execute(notify_sql(), (payload(self._token, tx.recorded[0].position,
                                                            tx.recorded[-1].position),))
                    committing = True  # what fails from here on may or may not have committed
            except Exception as exc:
                if is_retryable(exc):
                    raise
                if conn.broken and not committing:
                    raise self._lost(conn, exc) from exc
                if conn.broken:
                    raise StorageError("writing to the PostgreSQL store: the connection was lost while committing;"
                                       " the write may or may not have committed (read it back to know):"
                                       f" {' '.join(str(exc).split())}") from exc
                error = translated(exc, "writing to the PostgreSQL store")
                if error is exc:
                    raise
                raise error from exc
        return result, tx.recorded

    def append_logged(self, events: Sequence[LoggedEvent]) -> Head:
        """Append rows of another log as they are, projections included (see the port), in one
        transaction under the log's lock; no commit listener is called."""
        if self.readonly:
            raise ReadOnlyStore(f"{shown(self.url)} was opened read-only; nothing was written")
        with self.connection("appending events of another log") as conn:
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
                    cursor = SqlCursor(conn)
                    rows = cursor.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"
                                          ).fetchall()
                    start = (int(rows[0][0]), str(rows[0][1])) if rows else (0, GENESIS_HASH)
                    head = Head(*append_logged_rows(cast(Any, cursor), *start, events))
                    if head.position > start[0]:
                        conn.execute(notify_sql(), (payload(self._token, start[0] + 1, head.position),))
            except Exception as exc:
                error = translated(exc, "appending events of another log")
                if error is exc:
                    raise
                raise error from exc
        return head

    def _committed(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:
            self._known = max(self._known, recorded[-1].position)
        self._deliver(recorded)

    def _listening(self, conn: Any) -> None:
        """The feed (re)started listening: the writes it did not hear of (made while it was not
        listening, or whose notification a lost connection took with it) reach the listeners now,
        as notifications would have brought them."""
        rows = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchall()
        head = int(rows[0][0])
        with self._lock:
            gaps = self._heard.missing(self._heard.through + 1, head)
        for first, last in gaps:
            for start in range(first, last + 1, READ_BATCH):
                self._foreign(start, min(start + READ_BATCH - 1, last))
        with self._lock:
            self._known = max(self._known, head)

    def _foreign(self, first: int, last: int) -> None:
        """Another process committed positions ``first..last``: give the listeners those they were
        not given yet (a cache drops exactly what they change), then let the position checks see
        them."""
        with self._lock:
            gaps = self._heard.missing(first, last)
        for lo, hi in gaps:
            recorded = [recorded_from_row(row) for row in self.rows(
                "SELECT position, stream, version, kind, schema, payload FROM events"
                " WHERE payload IS NOT NULL AND position BETWEEN ? AND ? ORDER BY position", (lo, hi),
                doing="reading another process's write")]
            if recorded:
                self._deliver(recorded)
        with self._lock:
            self._heard.add(first, last)
            self._known = max(self._known, last)

    @property
    def listening(self) -> bool:
        """Whether the change feed listens now (False: starting, reconnecting, read-only, closed)."""
        return self._feed is not None and self._feed.listening

    def cache_position(self) -> int:
        """The log's last position for the caches' freshness checks: known in memory while the change
        feed listens (own commits and foreign ones as notified), else asked of the server."""
        feed = self._feed
        if feed is None or not feed.listening:
            return self.last_position()
        return self._known

    def _deliver(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:  # one write's positions (or a part of one), this store's own or another's
            self._heard.add(recorded[0].position, recorded[-1].position)
        for listener in self._listeners:
            try:
                listener(recorded)
            except Exception:
                log.exception("commit listener %r failed", listener)
        for reaction in self._reactions:
            try:
                reaction(recorded)
            except Exception:
                log.exception("after-commit reaction %r failed; it is repaired on the next start", reaction)

    # --- reads ----------------------------------------------------------------------------------

    def rows(self, sql: str, params: Any = (), *, doing: str = "reading the PostgreSQL store") -> list[tuple[Any, ...]]:
        """Rows of one read (SQLite's placeholders), on a pooled connection (on another when the
        connection is lost: a read may run twice)."""
        return self._retrying(lambda: self._read_once(sql, params, doing), doing)

    def _read_once(self, sql: str, params: Any, doing: str) -> list[tuple[Any, ...]]:
        with self.connection(doing) as conn:
            try:
                return SqlCursor(conn).execute(sql, params).fetchall()
            except Exception as exc:
                if conn.broken:
                    raise self._lost(conn, exc) from exc
                raise

    def reader(self) -> PooledReader:
        """What the shared read-side queries read through (``reader().execute(sql, params).fetchall()``)."""
        return PooledReader(self)

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        """Events after ``after`` in log order (only ``stream``'s when given); redacted ones skipped.
        Read in batches, each on a connection of its own for a moment."""
        where = "payload IS NOT NULL AND position > ?" + (" AND stream = ?" if stream is not None else "")
        while True:
            params = (after, stream) if stream is not None else (after,)
            batch = self.rows(f"SELECT position, stream, version, kind, schema, payload FROM events WHERE {where}"
                              f" ORDER BY position LIMIT {READ_BATCH}", params, doing="reading the event log")
            for row in batch:
                yield recorded_from_row(row)
            if len(batch) < READ_BATCH:
                return
            after = int(batch[-1][0])

    def read_log(self, after: int = 0) -> Iterator[LoggedEvent]:
        """Every event after ``after`` as stored, redacted ones included, in batches (the log is
        append-only, so the batches join up; a redaction made meanwhile may show in later ones)."""
        while True:
            batch = self.rows(f"{LOG_ROWS} LIMIT {READ_BATCH}", (after,), doing="reading the event log")
            for row in batch:
                yield logged_from_row(row)
            if len(batch) < READ_BATCH:
                return
            after = int(batch[-1][0])

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        # A range on the UNIQUE(stream, version) index (``stream`` compares byte-wise: COLLATE "C").
        rows = self.rows("SELECT stream, max(position) FROM events WHERE stream >= ? AND stream < ? GROUP BY stream",
                         (stream_prefix, stream_prefix + "\U0010ffff"))
        return {str(r[0]): int(r[1]) for r in rows}

    def head(self) -> Head:
        """The log's last (position, hash): an anchor to keep elsewhere (ADR-0011)."""
        rows = self.rows("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1",
                         doing="reading the event log")
        return Head(int(rows[0][0]), str(rows[0][1])) if rows else Head(0, GENESIS_HASH)

    def last_position(self) -> int:
        return self.head().position

    def problems_at_open(self) -> list[str]:
        """What opening found wrong (verify reports these)."""
        if not self.missing_triggers:
            return []
        return [f"the append-only triggers {', '.join(self.missing_triggers)} are missing from the events table:"
                " the log could be changed"]


class _Rows(list[tuple[Any, ...]]):
    def fetchall(self) -> list[tuple[Any, ...]]:
        return self


class PooledReader:
    """A read "connection" for the shared query classes: each ``execute`` runs on a pooled
    connection for a moment and returns its rows (driver errors translated)."""

    def __init__(self, store: PostgresEventStore) -> None:
        self._store = store

    def execute(self, sql: str, params: Any = ()) -> _Rows:
        return _Rows(self._store.rows(sql, params))
