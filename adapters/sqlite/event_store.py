"""The apsw event store: hash-chained append-only log + projections in one transaction.

Writes use group commit: callers queue their work; whoever holds the writer lock runs every
queued piece of work in ONE IMMEDIATE transaction (each in its own savepoint, so one caller's
error does not undo another's), commits, and only then wakes the callers. Nothing is
acknowledged before its commit. Busy/locked databases are retried with tenacity around the
whole transaction (3 attempts), then every waiting caller gets :class:`StorageBusy`.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

import apsw
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from fermix_memory.adapters.sqlite import history_rank
from fermix_memory.adapters.sqlite.connection import (
    enable_wal,
    int_value,
    open_connection,
    text_value,
    translated_errors,
)
from fermix_memory.adapters.sqlite.copy_mark import clear_copy_mark, read_copy_mark, set_copy_mark
from fermix_memory.adapters.sqlite.head import Head, HeadFile, read_head
from fermix_memory.adapters.sqlite.schema import check_schema, migrate, restore_triggers
from fermix_memory.adapters.sqlite.transaction import (
    LOG_ROWS,
    Known,
    SqliteTransaction,
    append_logged_rows,
    chain_count,
    last_position,
    logged_from_row,
    read_chain_heads,
    read_log,
    set_chain_count,
    write_chain_heads,
)
from fermix_memory.adapters.sqlite.wal_checkpoints import WalCheckpoints
from fermix_memory.application.errors import (
    ReadOnlyStore,
    StorageBusy,
    StorageError,
)
from fermix_memory.application.ports import RecordedEvent
from fermix_memory.domain.log_chain import GENESIS_HASH, LoggedEvent, chain_hash, head_of, payload_digest

# Re-exported: the audit checks the chain with the same functions.
__all__ = ["GENESIS_HASH", "SqliteEventStore", "chain_hash", "payload_digest"]

log = logging.getLogger("fermix_memory.storage")

T = TypeVar("T")
WRITE_ATTEMPTS = 3
GATHER_S = 0.001


class _Pending:
    __slots__ = ("done", "error", "joins", "recorded", "result", "work")

    def __init__(self, work: Callable[[Any], Any], joins: bool = True) -> None:
        self.work = work
        self.joins = joins  # a host's write, which the next batch waits a moment for (not upkeep)
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.recorded: list[RecordedEvent] = []  # this caller's own events, once committed


CommitListener = Callable[[list[RecordedEvent]], None]


class SqliteEventStore:
    """Implements the ``EventStore`` port on one ``memory.db`` file."""

    def __init__(self, path: Path, *, durability: str = "normal", head_file: Path | None = None,
                 readonly: bool = False) -> None:
        """``head_file``: where this home keeps its last-seen log head (ADR-0011); checked here.
        ``readonly``: no writer at all, the schema only checked; every write raises ReadOnlyStore."""
        self.path = Path(path)
        self.durability = durability
        self.readonly = readonly
        self._writer = open_connection(self.path, durability=durability, readonly=readonly)
        # The writer's WAL is checkpointed off the committing thread (ADR-0046).
        self._checkpoints: WalCheckpoints | None = None
        try:
            with translated_errors("migrating memory.db"):
                if readonly:
                    check_schema(self._writer, str(self.path))
                    self.restored_triggers: list[str] = []
                else:
                    migrate(self._writer, str(self.path))
                    enable_wal(self._writer)
                    self._checkpoints = WalCheckpoints(lambda: open_connection(self.path, durability=durability))
                    self._checkpoints.install(self._writer)
                    # Append-only triggers someone dropped are put back; verify reports it.
                    self.restored_triggers = restore_triggers(self._writer)
                self.chains = chain_count(self._writer)
                self._head_file = HeadFile(head_file, readonly=readonly, database=str(self.path),
                                           reader=self.reader) if head_file is not None else None
                if self._head_file is not None:
                    self._head_file.check_at_open(self._writer)
        except BaseException:
            self._writer.close()
            raise
        if self.restored_triggers:
            log.warning("the append-only triggers %s of %s were missing; re-created (verify reports it)",
                        ", ".join(self.restored_triggers), self.path)
        # One lock under both conditions; taken directly (``with self._lock``), not through a
        # condition's own ``__enter__``, on the path every write takes.
        self._lock = lock = threading.Lock()
        self._turn = threading.Condition(lock)  # followers wait here for their commit
        self._arrived = threading.Condition(lock)  # a gathering leader waits here for followers
        self._waiting = 0  # threads waiting on ``_turn``: a lone writer wakes nobody
        self._leading = False
        self._gathering = False
        self._expected = 1
        self._gathers = 0
        self._head = Head(0, GENESIS_HASH)
        self._known: Known | None = None  # what the writer knows after its last commit (see _run_batch)
        self._queue: list[_Pending] = []
        self._joined = 0  # host writes in the queue (upkeep left out), kept as they queue
        self._listeners: list[CommitListener] = []
        self._reactions: list[CommitListener] = []
        self._closed = False
        self._local = threading.local()
        # Weak: a reader dies with its thread (thread-local), so short-lived host threads don't pile
        # up open connections; the ones still alive are closed by close().
        self._readers: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()
        self._readers_lock = threading.Lock()

    # --- connections --------------------------------------------------------------------------

    def reader(self) -> apsw.Connection:
        """This thread's read connection (WAL readers never block the writer)."""
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StorageError("the memory store is closed")
            conn = open_connection(self.path, durability=self.durability, readonly=self.readonly)
            with translated_errors("opening a reader of memory.db"):
                history_rank.register(conn)  # history search ranks with it
            self._local.conn = conn
            with self._readers_lock:
                self._readers.add(conn)
        return conn

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener`` with the events of every commit, right after the commit and before
        any caller of that commit is answered. Listeners must not write (caches only)."""
        self._listeners.append(listener)

    def add_after_commit(self, reaction: CommitListener) -> None:
        """Call ``reaction`` with the events of every commit, outside the write lock, in the
        thread that led the commit, before that thread's call returns. Reactions may write
        (e.g. record a prompt-file revision); their failures are logged, never raised into the
        write that already committed."""
        self._reactions.append(reaction)

    def settle(self, timeout: float | None = None) -> bool:
        """The host pauses: the log is checkpointed now rather than after a quiet moment (ADR-0046)."""
        return self._checkpoints.settle(timeout) if self._checkpoints is not None else True

    def close(self) -> None:
        with self._lock:
            while self._leading:  # let the batch in flight commit first
                self._wait_turn()
            self._closed = True
            if self._head_file is not None:
                self._head_file.flush()
            with self._readers_lock:
                for conn in list(self._readers):
                    conn.close()
                self._readers.clear()
            if self._checkpoints is not None:
                self._checkpoints.close()
            self._writer.close()

    # --- writes ---------------------------------------------------------------------------------

    def write(self, work: Callable[[Any], T], *, upkeep: bool = False) -> T:
        """Run ``work`` in a write transaction, committed before this returns (group commit).
        ``upkeep``: background work (an index merge) that shares a batch like any write but is
        not counted among the writers the next batch waits a moment for: a lone host thread
        whose write shared a batch with upkeep does not then wait for a writer who is not there."""
        if self.readonly:
            raise ReadOnlyStore(f"{self.path} was opened read-only; nothing was written")
        pending = _Pending(work, joins=not upkeep)
        batch: list[_Pending] = []
        with self._lock:
            self._queue.append(pending)
            self._joined += pending.joins
            if self._gathering and self._joined >= self._expected:
                self._arrived.notify()
            # Wait until a leader has committed our work, or lead the next batch ourselves.
            while not pending.done and self._leading:
                self._wait_turn()
            if not pending.done:
                self._leading = True
                if self._expected > 1:
                    # The last batch was shared: let the other writers, who are preparing their next
                    # message right now, queue up behind us (group commit), for at most a moment.
                    self._gathering = True
                    self._gathers += 1
                    self._arrived.wait_for(lambda: self._joined >= self._expected, GATHER_S)
                    self._gathering = False
                batch, self._queue = self._queue, []
                self._expected, self._joined = self._joined, 0
        if batch:
            try:
                if self._closed:
                    for p in batch:
                        p.result, p.error, p.done = None, StorageError("the memory store is closed"), True
                else:
                    self._commit_batch(batch)
            finally:
                with self._lock:
                    self._leading = False
                    if self._waiting:
                        self._turn.notify_all()
        # Each caller reacts to its own events before it is answered, whoever led the batch: a
        # write that returns has its prompt files written.
        if pending.recorded:
            self._react(pending.recorded)
        if pending.error is not None:
            raise pending.error
        return pending.result  # type: ignore[no-any-return]

    @property
    def gathers(self) -> int:
        """How many batches waited a moment for more writers to join them (since opening)."""
        return self._gathers

    def queued_writes(self) -> int:
        """How many writes wait for the writer right now (upkeep included)."""
        with self._lock:
            return len(self._queue)

    def _wait_turn(self) -> None:
        """Wait on ``_turn`` (the lock held), counted: whoever ends a batch wakes waiters only."""
        self._waiting += 1
        try:
            self._turn.wait()
        finally:
            self._waiting -= 1

    def _react(self, recorded: list[RecordedEvent]) -> None:
        for reaction in self._reactions:
            try:
                reaction(recorded)
            except Exception:
                log.exception("after-commit reaction %r failed; it is repaired on the next start", reaction)

    def _commit_batch(self, batch: list[_Pending]) -> list[RecordedEvent]:
        recorded: list[RecordedEvent] = []
        committed = False
        try:
            try:
                recorded = self._run_batch(batch)
                committed = True
            except (apsw.BusyError, apsw.LockedError):
                # Rare: built only when needed (a retry object per write costs more than the write).
                for attempt in Retrying(
                    retry=retry_if_exception_type((apsw.BusyError, apsw.LockedError)),
                    stop=stop_after_attempt(WRITE_ATTEMPTS - 1),
                    wait=wait_random_exponential(multiplier=0.05, max=1),
                    reraise=False,
                ):
                    with attempt:
                        recorded = self._run_batch(batch)
                committed = True
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            log.warning("write to %s failed after %d attempts: %s", self.path, WRITE_ATTEMPTS, cause)
            error = StorageBusy(f"memory.db stayed locked through {WRITE_ATTEMPTS} attempts: {cause}")
            for p in batch:
                p.result, p.error = None, error
        except apsw.Error as exc:
            log.error("write to %s failed: %s", self.path, exc)
            for p in batch:
                p.result, p.error = None, StorageError(f"write failed, nothing was applied: {exc}")
        except BaseException as exc:
            for p in batch:
                p.result, p.error = None, exc
        finally:
            if committed and recorded:
                # Before any caller is answered: a caller that returns finds the caches current.
                if self._head_file is not None:
                    self._head_file.advanced(self._head, len(recorded))
                for listener in self._listeners:
                    try:
                        listener(recorded)
                    except Exception:
                        log.exception("commit listener %r failed", listener)
            for p in batch:
                if not committed:
                    p.recorded = []
                p.done = True
        return recorded

    def _run_batch(self, batch: list[_Pending]) -> list[RecordedEvent]:
        """Run the batch in one transaction. A caller whose work fails is dropped from the batch,
        everything is rolled back and the others run again (work must be re-runnable anyway,
        for busy retries): no savepoints, which cost an FTS segment flush each."""
        conn = self._writer
        cur = conn.cursor()
        remaining = list(batch)
        while remaining:
            cur.execute("BEGIN IMMEDIATE")
            # What the last commit left known (head, stream versions) holds while nothing else
            # wrote the database since: no other process, nor this one outside these transactions.
            known, self._known = self._known, None
            if known is not None and known.data_version != conn.data_version():
                known = None
            failed: tuple[_Pending, Exception] | None = None
            try:
                tx = SqliteTransaction(cur, self.chains, known=known)
                for p in batch:
                    p.recorded = []  # what an attempt rolled back is nobody's
                for p in remaining:
                    start = len(tx.recorded)
                    try:
                        p.result, p.error = p.work(tx), None
                        p.recorded = tx.recorded[start:]
                    except (apsw.BusyError, apsw.LockedError):
                        raise
                    except Exception as exc:  # this caller's failure only
                        failed = (p, exc)
                        break
                if failed is None:
                    tx.finish()
                    head = tx.log_head() if tx.recorded else self._head
                    cur.execute("COMMIT")
                    self._head = head
                    self._known = tx.known(conn.data_version())
                    return tx.recorded
                _roll_back(conn)
            except BaseException:
                _roll_back(conn)
                raise
            caller, error = failed
            caller.result, caller.error = None, _translate(error)
            remaining.remove(caller)
        return []

    def append_logged(self, events: Sequence[LoggedEvent], *, copy_of: str | None = None,
                      copied: bool = False) -> Head:
        """Append rows of another log as they are, projections included, and mark or unmark an
        unfinished copy in the same transaction (see the port)."""
        with self.exclusive("appended to") as conn, translated_errors("appending events of another log"):
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                if copy_of is not None:
                    set_copy_mark(cur, copy_of)
                heads = read_chain_heads(cur)
                append_logged_rows(cur, last_position(cur), heads, events)
                if copied:
                    clear_copy_mark(cur)
                if len(heads) > 1:
                    write_chain_heads(cur, heads, range(len(heads)))
                head = head_of(heads)
                cur.execute("COMMIT")
            except BaseException:
                _roll_back(conn)
                raise
        self._head = head
        if self._head_file is not None and events:
            self._head_file.advanced(head, len(events))
        return head

    def adopt_chains(self, chains: int) -> None:
        """An empty log takes the number of chains of the log it is about to receive (see the port)."""
        with self.exclusive("given chains") as conn, translated_errors("setting the log's chains"):
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                set_chain_count(cur, chains)
                cur.execute("COMMIT")
            except BaseException:
                _roll_back(conn)
                raise
        self.chains = chains

    # --- exclusive use (erasure) ----------------------------------------------------------------

    @contextmanager
    def exclusive(self, what: str) -> Iterator[apsw.Connection]:
        """The writer connection outside any transaction, with every other writer of this store
        held back until the block ends (for whole-file work such as a scrub)."""
        if self.readonly:
            raise ReadOnlyStore(f"{self.path} was opened read-only; it cannot be {what}")
        with self._lock:
            while self._leading:
                self._wait_turn()
            if self._closed:
                raise StorageError("the memory store is closed")
            self._leading = True
        try:
            # Whole-file work: no background checkpoint alongside.
            with self._checkpoints.held() if self._checkpoints is not None else nullcontext():
                yield self._writer
        finally:
            with self._lock:
                self._leading = False
                if self._waiting:
                    self._turn.notify_all()

    # --- reads ----------------------------------------------------------------------------------

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        """Events after ``after`` in log order (only ``stream``'s when given); redacted ones skipped."""
        with translated_errors("reading the event log"):
            yield from read_log(self.reader().cursor(), after, stream)

    def read_log(self, after: int = 0) -> Iterator[LoggedEvent]:
        """Every event after ``after`` as stored, redacted ones included (one read snapshot)."""
        with translated_errors("reading the event log"):
            for row in self.reader().cursor().execute(LOG_ROWS, (after,)):
                yield logged_from_row(row)

    def unfinished_copy(self) -> str | None:
        """The home a copy into this log that was cut off copies (see the port), else ``None``."""
        with translated_errors("reading the event log"):
            return read_copy_mark(self.reader().cursor())

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        # A range on the UNIQUE(stream, version) index: every stream starting with the prefix.
        rows = self.reader().execute(
            "SELECT stream, max(position) FROM events WHERE stream >= ? AND stream < ? GROUP BY stream",
            (stream_prefix, stream_prefix + "\U0010ffff"),
        ).fetchall()
        return {text_value(r[0]): int_value(r[1]) for r in rows}

    def head(self) -> Head:
        """The log's last (position, hash): an anchor to keep elsewhere (ADR-0011)."""
        with translated_errors("reading the event log"):
            return read_head(self.reader())

    def home_anchor(self) -> Head | None:
        """The last head this home recorded outside the database (``None``: none)."""
        return self._head_file.anchor() if self._head_file is not None else None

    def problems_at_open(self) -> list[str]:
        """What opening found wrong and mended or kept as evidence (verify reports these)."""
        problems = []
        if self._head_file is not None and self._head_file.problem:
            problems.append(self._head_file.problem)
        if self.restored_triggers:
            problems.append(f"the append-only triggers {', '.join(self.restored_triggers)} were missing when"
                            " memory.db was opened (re-created): the log could be changed meanwhile")
        return problems

    def last_position(self) -> int:
        row = self.reader().execute("SELECT max(position) FROM events").fetchall()
        return int(row[0][0] or 0)


def _roll_back(conn: apsw.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already done so itself (it does on a
    full disk or an I/O error); the error being handled, not this one, is what gets reported."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except apsw.Error as exc:
        log.warning("rollback on %s failed: %s", conn.filename, exc)


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, apsw.Error):
        return StorageError(f"write failed, nothing of it was applied: {exc}")
    return exc
