"""The PostgreSQL event store: the hash-chained append-only log and its projections in one
transaction, on a server many host processes share (ADR-0029).

Each write runs in its own transaction on a pooled connection. The log has N chains (ADR-0031):
a write holds the row lock of each chain it touches (see :mod:`.transaction`), so writes of
different owners and conversations commit side by side. Serialisation failures and deadlocks
are retried with tenacity (3 attempts, then :class:`StorageBusy`); a lost connection is a
:class:`StorageError` (a write whose COMMIT was under way may or may not have committed; the
next call reconnects through the pool).
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from tenacity import RetryError, Retrying, retry_if_exception, wait_random_exponential

from fermix_memory.adapters.postgres.change_feed import CHANNEL, STOP, ChangeFeed, Span, notify_sql, payload
from fermix_memory.adapters.postgres.connection import (
    SqlCursor,
    check_url,
    connect,
    connection_failure,
    described,
    is_retryable,
    require_driver,
    shown,
    translated,
    translated_errors,
)
from fermix_memory.adapters.postgres.schema import adopt_chains, check_schema, migrate, missing_triggers
from fermix_memory.adapters.postgres.transaction import PostgresTransaction, Reorder
from fermix_memory.adapters.sqlite.copy_mark import clear_copy_mark, set_copy_mark
from fermix_memory.adapters.sqlite.head import Head, HeadFile
from fermix_memory.adapters.sqlite.transaction import (
    LOG_ROWS,
    append_logged_rows,
    chain_count,
    last_position,
    logged_from_row,
    read_chain_heads,
    recorded_from_row,
    write_chain_heads,
)
from fermix_memory.application.errors import ReadOnlyStore, StorageBusy, StorageError
from fermix_memory.application.ports import RecordedEvent
from fermix_memory.application.settings_storage import DEFAULT_CHAINS
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.log_chain import LoggedEvent, head_of

log = logging.getLogger("fermix_memory.storage")

T = TypeVar("T")
WRITE_ATTEMPTS = 3
RECENT = 10_000  # positions remembered as delivered (one heard again after that is handed over again: harmless)
REORDERS = 8  # a write that met its chains out of order runs again with all of them taken in order
ANNOUNCE_SQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)"
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
    """Serialisation failures: WRITE_ATTEMPTS attempts in all (the first was made before the
    loop); a lost connection: RECONNECT_S seconds."""
    if isinstance(state.outcome.exception(), _Unsent):
        return bool(state.seconds_since_start >= RECONNECT_S)
    return bool(state.attempt_number >= WRITE_ATTEMPTS - 1)

CommitListener = Callable[[list[RecordedEvent]], None]


class PostgresEventStore:
    """Implements the ``EventStore`` port on one PostgreSQL database."""

    def __init__(self, url: str, *, pool_max: int = POOL_MAX, source: str = "the storage URL",
                 readonly: bool = False, chains: int | None = None, head_file: Path | None = None) -> None:
        """``readonly``: the schema only checked, every session read-only on the server
        (``default_transaction_read_only``), and every write refused with ReadOnlyStore.
        ``chains``: how many chains the log has; kept by a log holding events (ADR-0031).
        ``head_file``: where this host keeps the last log head it saw (ADR-0011); checked here."""
        require_driver()
        from psycopg_pool import ConnectionPool

        self.url = check_url(url, source)
        self.readonly = readonly
        with connect(self.url) as conn:  # a clear line for a wrong URL, a refused connection, no database
            if readonly:
                check_schema(conn, self.url)
            else:
                migrate(conn, self.url, chains)
            with translated_errors("checking the event log's triggers"):
                self.missing_triggers = missing_triggers(conn)
                self.chains = chain_count(SqlCursor(conn))
        if chains is not None and chains != self.chains:
            # A home moved here from SQLite keeps its one chain; only a chain count someone chose is news.
            log.log(logging.INFO if chains == DEFAULT_CHAINS else logging.WARNING,
                    "%s has %d chain(s) and keeps them (configured: %d): a log holding events keeps its chains",
                    shown(self.url), self.chains, chains)
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
        self._recent: collections.OrderedDict[int, None] = collections.OrderedDict()  # positions delivered lately
        self._epoch = 0  # several chains: counts the change feed's starts (events may have been missed)
        # Each chain's last position the listeners were given (from the open on: the open's repair
        # covers what came before).
        self._chain_known = [int(p) for _, p in self.rows("SELECT chain, position FROM chain_heads ORDER BY chain")]
        self._unknown = itertools.count(-1, -1)
        self._head_file: HeadFile | None = None
        if head_file is not None:
            self._head_file = HeadFile(head_file, readonly=readonly, current=self.head,
                                       database=described(self.url), reader=self.reader)
            try:
                self._head_file.check_at_open(cast(Any, self.reader()))
            except BaseException:
                self._pool.close()
                raise
        self._feed = None if readonly else ChangeFeed(self.url, self._token, self._listening, self._foreign,
                                                      self._catch_up)

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
        if self._head_file is not None and not self._closed:
            self._head_file.flush()  # while the store can still read the head
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

    def write(self, work: Callable[[Any], T], *, every_chain: bool = False) -> T:
        """Run ``work`` in one transaction (see the port). ``every_chain``: hold every chain's lock
        from the start, so no other write commits meanwhile (an erasure)."""
        if self.readonly:
            raise ReadOnlyStore(f"{shown(self.url)} was opened read-only; nothing was written")
        lock_first = frozenset(range(self.chains)) if every_chain else frozenset()
        for _ in range(REORDERS):
            try:
                result, recorded = self._retrying(functools.partial(self._write_once, work, lock_first),
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

    def _retrying(self, once: Callable[[], T], doing: str) -> T:
        """``once()``, again when the server undid it to let another go first (a few times) or when
        its connection was lost before anything was applied (for a bounded time, on new
        connections: the pool reconnects when the server is back)."""
        try:
            return once()  # the first attempt without building a retry loop: most calls need none
        except Exception as exc:
            if not _retried(exc):
                raise
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

    def _write_once(self, work: Callable[[Any], T], lock_first: frozenset[int]) -> tuple[T, list[RecordedEvent]]:
        committing = False
        with self.connection("writing to the PostgreSQL store") as conn:
            try:
                with conn.transaction():
                    tx = PostgresTransaction(SqlCursor(conn), self.chains, lock_first)
                    result = work(tx)
                    if tx.recorded:
                        tx.finish()
                        positions = [r.position for r in tx.recorded]
                        note = payload(self._token, min(positions), max(positions),
                                       sorted(tx.touched) if self.chains > 1 else ())
                        if self.chains == 1:  # delivered in commit order, and only if this commits
                            conn.execute(notify_sql(), (note,))
                    committing = True  # what fails from here on may or may not have committed
                if tx.recorded and self.chains > 1:
                    self._announce(conn, note)
            except Exception as exc:
                if isinstance(exc, Reorder) or is_retryable(exc):
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

    def _announce(self, conn: Any, note: str) -> None:
        """Tell the other processes about a committed write of a log of several chains, in a
        transaction of its own that does not wait for its flush: a NOTIFY inside the write would
        hold the server's one notification lock through the write's own flush, and so make every
        write of every chain wait for the one before it (ADR-0031). A notification lost (this
        process dies right after the commit, the connection drops) is made up for by the
        listeners' check of the chains' heads (:meth:`_catch_up`)."""
        try:
            conn.execute(ANNOUNCE_SQL, (CHANNEL, note))
        except Exception as exc:
            log.warning("could not announce a committed write to the other processes (their check of the"
                        " chains' heads will find it): %s", " ".join(str(exc).split()))

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
                    cursor = SqlCursor(conn)
                    heads = [(int(p), str(h)) for p, h in cursor.execute(
                        "SELECT position, hash FROM chain_heads ORDER BY chain FOR UPDATE").fetchall()]
                    if copy_of is not None:
                        set_copy_mark(cursor, copy_of)
                    start = last_position(cursor)
                    end = append_logged_rows(cast(Any, cursor), start, heads, events)
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

    def _committed(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:
            self._delivered(recorded)
        if self._head_file is not None:
            self._head_file.advanced(None, len(recorded))
        self._deliver(recorded)

    def _listening(self, conn: Any) -> None:
        """The feed (re)started listening: the writes it did not hear of (made while it was not
        listening, or whose notification a lost connection took with it) reach the listeners now,
        as notifications would have brought them."""
        with self._lock:
            self._epoch += 1
        self._catch_up(conn)

    def _chain_of(self, stream: str) -> int:
        return chain_for(stream, self.chains)

    def _seen_in(self, chain: int, position: int) -> None:
        if chain < len(self._chain_known):
            self._chain_known[chain] = max(self._chain_known[chain], position)

    def _delivered(self, recorded: Sequence[RecordedEvent]) -> None:
        """Note events handed to the listeners (caller holds the lock): each chain's last position,
        for the check of the heads, and the recent positions, so no event is handed over twice."""
        for r in recorded:
            self._seen_in(self._chain_of(r.stream), r.position)
            self._recent[r.position] = None
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    def _foreign(self, spans: list[Span]) -> None:
        """Other processes committed the writes ``spans`` (first and last positions and, on a log of
        several chains, whose other writes may hold positions in between, their chains): one read
        gives their events to the listeners (a cache drops exactly what they change), then the
        position checks see them."""
        first, last = min(s[0] for s in spans), max(s[1] for s in spans)
        wanted = _Spans(spans)
        recorded = [recorded_from_row(row) for row in self.rows(
            "SELECT position, stream, version, kind, schema, payload FROM events"
            " WHERE payload IS NOT NULL AND position BETWEEN ? AND ? ORDER BY position", (first, last),
            doing="reading other processes' writes")
            if wanted.holds(int(row[0]), functools.partial(self._chain_of, str(row[1])))]
        self._heard(recorded)

    def _heard(self, recorded: list[RecordedEvent]) -> None:
        """Hand the listeners what they were not given yet (a notification and the check of the
        heads may both bring an event; two writers' notifications may come in either order)."""
        with self._lock:
            unheard = [r for r in recorded if r.position not in self._recent]
            self._delivered(unheard)
        if unheard:
            self._deliver(unheard)

    def _catch_up(self, conn: Any) -> None:
        """On the feed's connection, when listening (re)starts and every ``WAIT_S`` after: a chain
        whose head moved past what this store heard of lost its notifications (made while the feed
        was not listening, or its writer died right after committing): read and deliver what it
        missed, in batches, so no cache or prompt file keeps it from the host for long."""
        for chain, position in conn.execute("SELECT chain, position FROM chain_heads").fetchall():
            chain, position = int(chain), int(position)
            with self._lock:
                after = self._chain_known[chain] if chain < len(self._chain_known) else position
            if position <= after:
                continue
            log.info("chain %d moved to %d without a notification heard: catching up", chain, position)
            for start in range(after, position, READ_BATCH):
                end = min(start + READ_BATCH, position)
                missed = [recorded_from_row(row) for row in conn.execute(
                    "SELECT position, stream, version, kind, schema, payload FROM events WHERE position > %s"
                    " AND position <= %s AND payload IS NOT NULL ORDER BY position", (start, end)).fetchall()
                    if self._chain_of(str(row[1])) == chain]
                self._heard(missed)
            with self._lock:
                self._seen_in(chain, position)

    @property
    def listening(self) -> bool:
        """Whether the change feed listens now (False: starting, reconnecting, read-only, closed)."""
        return self._feed is not None and self._feed.listening

    def cache_position(self) -> int:
        """The log's last position for the caches' freshness checks: known in memory while the change
        feed listens (own commits and foreign ones as notified), else asked of the server.

        Several chains: positions leave gaps and commit out of order, so the caches follow the
        feed instead: this is the feed's start count while it listens (every commit, own or
        foreign, reaches the listeners), and a value never given before while it does not."""
        feed = self._feed
        listening = feed is not None and feed.listening
        if self.chains > 1:
            return self._epoch if listening else next(self._unknown)
        if not listening:
            return self.last_position()
        return self.known_position()

    def known_position(self) -> int:
        """The last position this store knows of: its own commits and those the feed brought."""
        with self._lock:
            return max(self._chain_known, default=0)

    def cache_follows(self, seen: int, recorded: Sequence[RecordedEvent]) -> tuple[bool, int]:
        """Whether committed events follow on from what a cache saw (see :meth:`cache_position`)."""
        if self.chains == 1:
            return recorded[0].position == seen + 1, recorded[-1].position
        now = self.cache_position()
        return now == seen, now

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

    def _deliver(self, recorded: list[RecordedEvent]) -> None:
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

    def unfinished_copy(self) -> str | None:
        """The home a copy into this database that was cut off copies (see the port), else ``None``."""
        rows = self.rows("SELECT source FROM unfinished_copy WHERE id = 1", doing="reading the event log")
        return str(rows[0][0]) if rows else None

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        # A range on the UNIQUE(stream, version) index (``stream`` compares byte-wise: COLLATE "C").
        rows = self.rows("SELECT stream, max(position) FROM events WHERE stream >= ? AND stream < ? GROUP BY stream",
                         (stream_prefix, stream_prefix + "\U0010ffff"))
        return {str(r[0]): int(r[1]) for r in rows}

    def head(self) -> Head:
        """The log's anchor (ADR-0011): its last (position, hash), or the checkpoint over its
        chains' heads, read in one statement."""
        return head_of(read_chain_heads(self.reader()))

    def last_position(self) -> int:
        return last_position(self.reader())

    def settle(self, timeout: float | None = None) -> bool:
        """Nothing of the store's own runs in the background here: the server checkpoints."""
        return True

    def home_anchor(self) -> Head | None:
        """The last head this host recorded outside the database (``None``: none)."""
        return self._head_file.anchor() if self._head_file is not None else None

    def problems_at_open(self) -> list[str]:
        """What opening found wrong (verify reports these)."""
        problems = [self._head_file.problem] if self._head_file is not None and self._head_file.problem else []
        if self.missing_triggers:
            problems.append(f"the append-only triggers {', '.join(self.missing_triggers)} are missing from the"
                            " events table: the log could be changed")
        return problems


class _Spans:
    """Which positions a batch of notifications names: a position is in when a span covers it and,
    for a span of a log of several chains, the event's chain is one of the span's."""

    def __init__(self, spans: list[Span]) -> None:
        self._single: dict[int, list[frozenset[int]]] = {}  # the usual one-event write, looked up at once
        self._wide: list[Span] = []
        for first, last, chains in spans:
            if first == last:
                self._single.setdefault(first, []).append(chains)
            else:
                self._wide.append((first, last, chains))

    def holds(self, position: int, chain: Callable[[], int]) -> bool:
        for chains in self._single.get(position, ()):
            if not chains or chain() in chains:
                return True
        return any(first <= position <= last and (not chains or chain() in chains)
                   for first, last, chains in self._wide)


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
