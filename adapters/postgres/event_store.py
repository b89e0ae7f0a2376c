"""The PostgreSQL event store: the hash-chained append-only log and its projections in one
transaction, on a server many host processes share (ADR-0029).

Each write runs in its own transaction, on the store's write connection or a pooled one, in libpq's
pipeline mode (ADR-0064, ADR-0099): what returns nothing travels with the next read or the COMMIT.
The log has N chains (ADR-0031):
a write holds the row lock of each chain it touches (see :mod:`.transaction`), so writes of
different owners and conversations commit side by side. Serialisation failures and deadlocks
are retried with tenacity (3 attempts, then :class:`StorageBusy`); a lost connection is a
:class:`StorageError` (a write whose COMMIT was under way may or may not have committed; the
next call reconnects through the pool).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from fermix_memory.adapters.postgres.change_feed import CHANNEL, EAGER_KINDS, STOP, ChangeFeed, notify_sql, payload
from fermix_memory.adapters.postgres.connection import (
    PgCursor,
    check_url,
    connect,
    connection_failure,
    described,
    is_retryable,
    require_driver,
    session_lost,
    shown,
    translated,
    translated_errors,
)
from fermix_memory.adapters.postgres.delivery import READ_BATCH, FeedDelivery
from fermix_memory.adapters.postgres.read_connection import ReadConnections
from fermix_memory.adapters.postgres.retries import Unsent, retrying
from fermix_memory.adapters.postgres.schema import adopt_chains, check_schema, migrate, missing_triggers
from fermix_memory.adapters.postgres.transaction import PostgresTransaction, Reorder, committed, undo
from fermix_memory.adapters.postgres.write_pipeline import WritePipeline
from fermix_memory.adapters.sql.copy_mark import clear_copy_mark, set_copy_mark
from fermix_memory.adapters.sql.event_log import (
    LOG_ROWS,
    append_logged_rows,
    chain_count,
    last_position,
    logged_from_row,
    recorded_from_row,
    write_chain_heads,
)
from fermix_memory.adapters.sql.event_store import READING
from fermix_memory.adapters.sql.head import Head, HeadFile
from fermix_memory.application.errors import ConcurrencyConflict, ReadOnlyStore, StorageBusy, StorageError
from fermix_memory.application.settings_storage import DEFAULT_CHAINS
from fermix_memory.application.stale_streams import rules_named
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.log_chain import LoggedEvent, head_of

log = logging.getLogger("fermix_memory.storage")

T = TypeVar("T")
REORDERS = 8  # a write that met its chains out of order runs again with all of them taken in order
ANNOUNCE_SQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)"
POOL_MAX = 16
POOL_TIMEOUT_S = 10.0


class PostgresEventStore(FeedDelivery):
    """Implements the ``EventStore`` port on one PostgreSQL database."""

    def __init__(self, url: str, *, pool_max: int = POOL_MAX, source: str = "the storage URL",
                 readonly: bool = False, chains: int | None = None, head_file: Path | None = None,
                 feed: bool = True) -> None:
        """``readonly``: the schema only checked, every session read-only on the server
        (``default_transaction_read_only``), and every write refused with ReadOnlyStore.
        ``feed``: listen to the other processes' writes (False: a host that never hears them, its
        caches asking the server; for measurements).
        ``chains``: how many chains the log has; kept by a log holding events (ADR-0031).
        ``head_file``: where this host keeps the last log head it saw (ADR-0011); checked here."""
        require_driver()
        from psycopg_pool import ConnectionPool

        super().__init__()
        self.url = check_url(url, source)
        self.name = described(self.url)
        self.readonly = readonly
        with connect(self.url) as conn:  # a clear line for a wrong URL, a refused connection, no database
            if readonly:
                check_schema(conn, self.url)
            else:
                migrate(conn, self.url, chains)
            with translated_errors("checking the event log's triggers"):
                self.missing_triggers = missing_triggers(conn)
                self.chains = chain_count(PgCursor(conn))
        if chains is not None and chains != self.chains:
            # A home moved here from SQLite keeps its one chain; only a chain count someone chose is news.
            log.log(logging.INFO if chains == DEFAULT_CHAINS else logging.WARNING,
                    "%s has %d chain(s) and keeps them (configured: %d): a log holding events keeps its chains",
                    shown(self.url), self.chains, chains)
        if self.missing_triggers:
            log.warning("the append-only triggers %s of %s are missing (verify reports it)",
                        ", ".join(self.missing_triggers), shown(self.url))
        session: dict[str, Any] = {"autocommit": True,
                                   **({"options": "-c default_transaction_read_only=on"} if readonly else {})}
        self._pool = ConnectionPool(self.url, min_size=1, max_size=pool_max, open=False, timeout=POOL_TIMEOUT_S,
                                    kwargs=session, name="fermix")
        # Reads, and writes, on a connection of the store's own while one caller holds it (ADR-0088, ADR-0099).
        self._reads, self._writes = (ReadConnections(self._pool, self.url if pool_max > 1 else None, session)
                                     for _ in range(2))
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT_S)
        except Exception as exc:
            self._pool.close()
            raise connection_failure(self.url, exc) from None
        self._closed = False
        # The change feed (ADR-0029): what other processes commit reaches this store's listeners.
        self._token = uuid.uuid4().hex
        self._feed: ChangeFeed | None = None
        self._start_delivery([int(p) for _, p in self.rows("SELECT chain, position FROM chain_heads ORDER BY chain")])
        self._head_file: HeadFile | None = None
        if head_file is not None:
            self._head_file = HeadFile(head_file, readonly=readonly, current=self.head,
                                       database=self.name, reader=self.reader)
            try:
                self._head_file.check_at_open(self.reader())
            except BaseException:
                self._close_connections()
                raise
        self._feed = None if readonly or not feed else ChangeFeed(self.url, self._token, self._listening, self._foreign,
                                                      self._catch_up)

    # --- connections --------------------------------------------------------------------------

    @contextmanager
    def connection(self, doing: str, *, retried: bool = False, writes: bool = False) -> Iterator[Any]:
        """A pooled connection (autocommit; ``writes``: the store's write connection if free).
        ``retried``: a failure the server undid to let another go first leaves as it is, for the
        caller's ``retrying`` to run the block again."""
        if self._closed:
            raise StorageError("the memory store is closed")
        try:
            with self._writes.held() if writes else self._pool.connection() as conn:
                yield conn
        except Exception as exc:
            if retried and is_retryable(exc):
                raise
            error = self._error(exc, doing)
            if error is exc:
                raise
            raise error from exc

    def _error(self, exc: Exception, doing: str) -> BaseException:
        """What a failure on a pooled connection raises: the store's typed error, or ``exc``."""
        error = translated(exc, doing)
        if error is exc and type(exc).__name__ == "PoolTimeout":
            error = StorageBusy(f"{doing}: no connection to the PostgreSQL server within {POOL_TIMEOUT_S:g} s")
        return error

    def close(self) -> None:
        if self._head_file is not None and not self._closed:
            self._head_file.flush()  # while the store can still read the head
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._feed is not None:
            self._feed.stop(self._wake_feed)
        self._close_connections()

    def _close_connections(self) -> None:
        for connections in (self._reads, self._writes, self._pool):
            connections.close()

    def _wake_feed(self) -> None:
        with self._pool.connection(timeout=1) as conn:
            conn.execute(notify_sql(), (f"{self._token} {STOP}",))

    # --- writes ---------------------------------------------------------------------------------

    def write(self, work: Callable[[Any], T], *, every_chain: bool = False) -> T:
        """Run ``work`` in one transaction (see the port). ``every_chain``: hold every chain's lock
        from the start, so no other write commits meanwhile (an erasure)."""
        if self.readonly:
            raise ReadOnlyStore(f"{shown(self.url)} was opened read-only; nothing was written")
        lock_first = frozenset(range(self.chains)) if every_chain else frozenset()
        for _ in range(REORDERS):
            try:
                result, recorded = retrying(functools.partial(self._write_once, work, lock_first),
                                                  "writing to the PostgreSQL store")
                break
            except Reorder as reorder:
                lock_first = reorder.chains
        else:
            raise StorageBusy(f"writing to the PostgreSQL store: other writes kept taking its chains"
                              f" {sorted(lock_first)} first ({REORDERS} attempts)")
        if recorded:
            self._committed(recorded)
        return result

    def _lost(self, conn: Any, exc: BaseException) -> Unsent:
        """``exc`` lost ``conn``: the pool's other idle connections are checked (a server restart
        breaks them all) and the work is tried again."""
        try:
            self._pool.check()
        except Exception:
            log.debug("checking the pool's connections failed", exc_info=True)
        return Unsent(exc)

    def _write_once(self, work: Callable[[Any], T], lock_first: frozenset[int]) -> tuple[T, list[RecordedEvent]]:
        committing = False
        done: Any = None  # the COMMIT's cursor, once it was sent (sending it may itself raise)
        with self.connection("writing to the PostgreSQL store", retried=True, writes=True) as conn:
            try:
                with WritePipeline.on(conn) as pipeline:
                    cursor = PgCursor(conn, pipeline)
                    cursor.execute("BEGIN")  # sent with the write's first read
                    tx = PostgresTransaction(cursor, self.chains, lock_first)
                    result = work(tx)
                    note = self._finish(tx, cursor)
                    committing = True  # what fails from here on may or may not have committed
                    done = cursor.cursor().execute("COMMIT")
                    if note is not None and self.chains > 1:
                        cursor.execute(ANNOUNCE_SQL.replace("%s", "?"), (CHANNEL, note))  # with the COMMIT
            except Exception as exc:
                if done is not None and not conn.broken and committed(done):
                    log.warning("could not announce a committed write to the other processes (their check of the"
                                " chains' heads will find it): %s", " ".join(str(exc).split()))
                    return result, tx.recorded
                undo(conn)
                failure = self._failure(conn, exc, committing)
                if failure is exc:
                    raise
                raise failure from exc
        return result, tx.recorded

    def _finish(self, tx: PostgresTransaction, cursor: PgCursor) -> str | None:
        """Before COMMIT: the new chain heads and the notification of a write that appended (sent
        inside it on a log of one chain; of several, right after the COMMIT in a transaction that
        does not wait for its flush, as a NOTIFY inside would hold the server's one notification
        lock through the flush, ADR-0031; a lost one is found by the check of the heads)."""
        if not tx.recorded:
            return None
        tx.finish()
        positions = [r.position for r in tx.recorded]
        note = payload(self._token, min(positions), max(positions), sorted(tx.touched) if self.chains > 1 else (),
                       eager=any(r.event.kind in EAGER_KINDS for r in tx.recorded),
                       streams={r.stream for r in tx.recorded} | rules_named(tx.recorded))
        if self.chains == 1:
            cursor.execute(notify_sql().replace("%s", "?"), (note,))
        return note

    def _failure(self, conn: Any, exc: Exception, committing: bool) -> BaseException:
        """What a failed write raises: ``exc`` itself to run it again (Reorder, a retryable
        conflict), a lost connection as :class:`Unsent` before COMMIT and as a StorageError after,
        a clash of stream versions (found as the statements were answered) as a conflict."""
        if isinstance(exc, Reorder) or is_retryable(exc):
            return exc
        if session_lost(conn, exc):
            conn.close()  # libpq may not have read the end yet: nobody takes this session again
            return self._lost(conn, exc) if not committing else StorageError(
                "writing to the PostgreSQL store: the connection was lost while committing; the write may or may"
                f" not have committed (read it back to know): {' '.join(str(exc).split())}")
        if PostgresTransaction._version_clash(exc):
            return ConcurrencyConflict("a stream already has one of the versions appended: nothing was appended")
        return translated(exc, "writing to the PostgreSQL store")

    def append_logged(self, events: Sequence[LoggedEvent], *, copy_of: str | None = None,
                      copied: bool = False) -> Head:
        """Append rows of another log as they are, projections included, and mark or unmark an
        unfinished copy (see the port), in one transaction under the log's lock; no commit
        listener is called."""
        if self.readonly:
            raise ReadOnlyStore(f"{shown(self.url)} was opened read-only; nothing was written")
        with self.connection("appending events of another log") as conn:
            try:
                with conn.transaction():
                    cursor = PgCursor(conn)
                    heads = [(int(p), str(h)) for p, h in cursor.execute(
                        "SELECT position, hash FROM chain_heads ORDER BY chain FOR UPDATE").fetchall()]
                    if copy_of is not None:
                        set_copy_mark(cursor, copy_of)
                    start = last_position(cursor)
                    end = append_logged_rows(cursor, start, heads, events)
                    if copied:
                        clear_copy_mark(cursor)
                    write_chain_heads(cursor, heads, range(len(heads)))
                    if len(heads) > 1:  # live appends take positions after the copied ones
                        cursor.execute("SELECT setval('events_position', greatest(?, (SELECT last_value"
                                       " FROM events_position)))", (max(end, 1),))
                    head = head_of(heads)
                    if end > start:
                        conn.execute(notify_sql(), (payload(self._token, start + 1, end, range(len(heads))
                                                            if len(heads) > 1 else ()),))
            except Exception as exc:
                error = translated(exc, "appending events of another log")
                if error is exc:
                    raise
                raise error from exc
        with self._lock:  # a copy is not handed to this store's listeners, now or when its feed listens again
            for chain, (position, _) in enumerate(heads):
                self._seen_in(chain, position)
        return head

    def adopt_chains(self, chains: int) -> None:
        """An empty log takes the number of chains of the log it is about to receive (see the port)."""
        if self.readonly:
            raise ReadOnlyStore(f"{shown(self.url)} was opened read-only; nothing was written")
        with self.connection("setting the log's chains") as conn:
            try:
                adopt_chains(conn, chains)
            except Exception as exc:
                error = translated(exc, "setting the log's chains")
                if error is exc:
                    raise
                raise error from exc
        self.chains = chains
        with self._lock:
            self._chain_known = [0] * chains

    # --- reads ----------------------------------------------------------------------------------

    def rows(self, sql: str, params: Any = (), *, doing: str = "reading the PostgreSQL store",
             prepare: bool | None = None) -> list[tuple[Any, ...]]:
        """Rows of one read (SQLite's placeholders), on the store's read connection or a pooled one
        (on another when the connection is lost: a read may run twice); ``prepare``: see :class:`PgCursor`."""
        return retrying(lambda: self._read_once(sql, params, doing, prepare), doing)

    def _read_once(self, sql: str, params: Any, doing: str, prepare: bool | None = None) -> list[tuple[Any, ...]]:
        """One read: on the store's own read connection when no other read holds it, else on a
        pooled one (``read_connection``); a recall is mostly this call."""
        if self._closed:
            raise StorageError("the memory store is closed")
        return self._reads.rows(sql, params, prepare, lambda conn, exc: self._lost(conn, exc)
                                if conn is not None and conn.broken else self._error(exc, doing))

    def _read(self, sql: str, params: Any = (), *, doing: str = READING) -> list[tuple[Any, ...]]:
        return self.rows(sql, params, doing=doing)

    def reader(self) -> PooledReader:
        """What the shared read-side queries read through (``reader().execute(sql, params).fetchall()``)."""
        return PooledReader(self)

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        """Events after ``after`` in log order (only ``stream``'s when given); redacted ones skipped.
        Read in batches, each on a connection of its own for a moment."""
        where = "payload IS NOT NULL AND position > ?" + (" AND stream = ?" if stream is not None else "")
        # A stream's versions follow its positions: ordered by version, one stream is a range of the
        # UNIQUE(stream, version) index instead of a walk of the whole log in position order.
        order = "version" if stream is not None else "position"
        while True:
            params = (after, stream) if stream is not None else (after,)
            batch = self.rows(f"SELECT position, stream, version, kind, schema, payload FROM events WHERE {where}"
                              f" ORDER BY {order} LIMIT {READ_BATCH}", params, doing="reading the event log")
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

    def settle(self, timeout: float | None = None) -> bool:
        """Nothing of the store's own runs in the background here: the server checkpoints."""
        return True

    def problems_at_open(self) -> list[str]:
        """What opening found wrong (verify reports these)."""
        problems = self._head_problems()
        if self.missing_triggers:
            problems.append(f"the append-only triggers {', '.join(self.missing_triggers)} are missing from the"
                            " events table: the log could be changed")
        return problems


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
