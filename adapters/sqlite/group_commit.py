"""Group commit on ``memory.db`` (one writer connection): callers queue their work; whoever
holds the writer lock runs every queued piece of work in ONE IMMEDIATE transaction, commits, and
only then wakes the callers. Nothing is acknowledged before its commit. A caller whose work fails
is dropped from the batch and the others run again; busy/locked databases are retried with
tenacity around the whole transaction (3 attempts), then every waiting caller gets
:class:`StorageBusy`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import apsw

from fermix_memory.adapters.sql.event_store import SqlEventStore
from fermix_memory.adapters.sql.head import Head
from fermix_memory.adapters.sqlite.connection import BUSY_TIMEOUT_MS
from fermix_memory.adapters.sqlite.wal_checkpoints import WalCheckpoints
from fermix_memory.application.errors import ReadOnlyStore, StorageBusy, StorageError
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.application.write_at_once import WriterBusy, asked_at_once
from fermix_memory.domain.log_chain import GENESIS_HASH

if TYPE_CHECKING:  # the transaction (codec, projections) is imported by the first write, not by a read
    from tenacity import RetryError

    from fermix_memory.adapters.sqlite.transaction import Known, SqliteTransaction

log = logging.getLogger("fermix_memory.storage")

T = TypeVar("T")
# The transaction class, once the first write imported it (a read-only open never does).
_transaction: type[SqliteTransaction] | None = None
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


class GroupCommit(SqlEventStore):
    """The writes of the SQLite store: group commit on its one writer connection, and exclusive
    use of that connection (an erasure's scrub). :meth:`_start_group_commit` sets it up."""

    path: Path
    chains: int
    durability: str
    _writer: apsw.Connection
    _checkpoints: WalCheckpoints | None

    def _start_group_commit(self) -> None:
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
        self._closed = False
        # Writes asked to commit at once (ADR-0110) that did, and that were sent to wait instead.
        self.at_once_written = 0
        self.at_once_refused = 0

    # --- writes ---------------------------------------------------------------------------------

    def write(self, work: Callable[[Any], T], *, upkeep: bool = False) -> T:
        """Run ``work`` in a write transaction, committed before this returns (group commit).
        ``upkeep``: background work (an index merge) that shares a batch like any write but is
        not counted among the writers the next batch waits a moment for: a lone host thread
        whose write shared a batch with upkeep does not then wait for a writer who is not there.
        A host's write this thread asked to commit at once (``application.write_at_once``) is
        led at once, alone, or refused with nothing done (ADR-0110)."""
        if self.readonly:
            raise ReadOnlyStore(f"{self.path} was opened read-only; nothing was written")
        if not upkeep and asked_at_once():
            return self._write_at_once(work)
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
                self._stop_leading()
        return self._answer(pending)  # type: ignore[no-any-return]

    def _stop_leading(self) -> None:
        with self._lock:
            self._leading = False
            if self._waiting:
                self._turn.notify_all()

    def _answer(self, pending: _Pending) -> Any:
        """What ``pending``'s caller gets, once it reacted to its own events: each caller does,
        whoever led the batch (a write that returns has its prompt files written)."""
        if pending.recorded:
            self._react(pending.recorded)
        if pending.error is not None:
            raise pending.error
        return pending.result

    @property
    def writes_at_once(self) -> bool:
        """Whether a write asked to commit at once may (ADR-0110): a writer, commits that sync nothing."""
        return not self.readonly and self.durability == "normal"

    def _write_at_once(self, work: Callable[[Any], T]) -> T:
        """``write``, asked to commit at once (``write_at_once``): ``work`` alone in a batch led now,
        with no wait for the write lock and no checkpoint on this thread; else :class:`WriterBusy`,
        nothing done: another writer ahead or just before (their batch was shared), a commit that
        would sync, a database locked by another connection."""
        checkpoints = self._checkpoints
        if not self.writes_at_once or (checkpoints is not None and checkpoints.due):
            self.at_once_refused += 1
            raise WriterBusy("a commit here syncs to disk")
        pending = _Pending(work)
        with self._lock:
            if self._leading or self._queue or self._expected > 1 or self._closed:
                self.at_once_refused += 1
                raise WriterBusy("another writer is ahead")
            self._leading = True
            self._joined = 0
        conn = self._writer
        try:
            conn.set_busy_timeout(0)
            if checkpoints is not None:
                checkpoints.at_once = True
            try:
                self._commit_batch([pending], retry=False)
            finally:
                conn.set_busy_timeout(BUSY_TIMEOUT_MS)
                if checkpoints is not None:
                    checkpoints.at_once = False
        finally:
            self._stop_leading()
        if isinstance(pending.error, WriterBusy):
            self.at_once_refused += 1
        elif pending.error is None:
            self.at_once_written += 1
        return self._answer(pending)  # type: ignore[no-any-return]

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

    def _commit_batch(self, batch: list[_Pending], retry: bool = True) -> list[RecordedEvent]:
        """Run and commit ``batch``; a busy database is tried again (``retry``) or each caller
        gets :class:`WriterBusy`, nothing done."""
        recorded: list[RecordedEvent] = []
        committed = False
        try:
            try:
                recorded = self._run_batch(batch)
                committed = True
            except (apsw.BusyError, apsw.LockedError) as exc:
                if not retry:
                    for p in batch:
                        p.result, p.error = None, WriterBusy(f"{self.name} is locked: {exc}")
                    return []
                from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential
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
        except _retry_error() as exc:  # an except clause's class is looked up only when something was raised
            cause = exc.last_attempt.exception()
            log.warning("write to %s failed after %d attempts: %s", self.path, WRITE_ATTEMPTS, cause)
            error = StorageBusy(f"{self.name} stayed locked through {WRITE_ATTEMPTS} attempts: {cause}")
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
                self._tell_listeners(recorded)
            for p in batch:
                if not committed:
                    p.recorded = []
                p.done = True
        return recorded

    def _run_batch(self, batch: list[_Pending]) -> list[RecordedEvent]:
        """Run the batch in one transaction. A caller whose work fails is dropped from the batch,
        everything is rolled back and the others run again (work must be re-runnable anyway,
        for busy retries): no savepoints, which cost an FTS segment flush each."""
        global _transaction
        transaction = _transaction
        if transaction is None:  # imported by the first write (ADR-0063), then kept
            from fermix_memory.adapters.sqlite.transaction import SqliteTransaction
            transaction = _transaction = SqliteTransaction
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
                tx = transaction(cur, self.chains, known=known)
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
                roll_back(conn)
            except BaseException:
                roll_back(conn)
                raise
            caller, error = failed
            caller.result, caller.error = None, _translate(error)
            remaining.remove(caller)
        return []

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
            self._stop_leading()


def _retry_error() -> type[RetryError]:
    """tenacity's error of attempts run out: imported when first needed, not by a read-only open
    (ADR-0063), nor at each write."""
    from tenacity import RetryError

    return RetryError


def roll_back(conn: apsw.Connection) -> None:
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
