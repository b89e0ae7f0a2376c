"""Memory opened on an event store the test holds: the composition root takes the store, and the
test reaches the store's public methods (write, exclusive, the erasure port) without reading
anything private of the memory system."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite import connection, group_commit
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.entrypoints.bootstrap import bootstrap
from fermix_memory.entrypoints.home import open_store


@contextmanager
def memory_on_held_store(home: Path) -> Iterator[tuple[MemorySystem, SqliteEventStore]]:
    """``(memory, store)``: closing the memory closes the store too."""
    home.mkdir(parents=True, exist_ok=True)
    store = open_store(home)
    with MemorySystem(bootstrap(home, store=store)) as memory:
        yield memory, store


# How long a test's holder keeps a write lock at most: reached only when the code under test
# waited for the lock where it must not (the test then fails instead of hanging).
HOLD_AT_MOST_S = 30.0


class WriteLockHolder:
    """Another connection to ``db`` holding its write lock, on a thread of its own, from
    :meth:`start` until :attr:`release` is set or :data:`HOLD_AT_MOST_S` passed (:attr:`gave_up`)."""

    def __init__(self, db: Path) -> None:
        self.held, self.release = threading.Event(), threading.Event()
        self.gave_up = False
        self._thread = threading.Thread(target=self._hold, args=(db,))

    def start(self) -> None:
        self._thread.start()
        assert self.held.wait(HOLD_AT_MOST_S), "the write lock was not taken"

    def stop(self) -> None:
        self.release.set()
        self._thread.join()

    def _hold(self, db: Path) -> None:
        other = apsw.Connection(str(db))
        try:
            other.execute("BEGIN IMMEDIATE")
            self.held.set()
            self.gave_up = not self.release.wait(HOLD_AT_MOST_S)
            other.execute("ROLLBACK")
        finally:
            other.close()


def wait_for_locks_past_any_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writers opened from now on wait for a busy lock longer than a :class:`WriteLockHolder`
    holds it: code that waited for the lock where it must not would wait until the holder gave up,
    never until a busy timeout sent it elsewhere (the test sees ``gave_up``)."""
    for module in (connection, group_commit):
        monkeypatch.setattr(module, "BUSY_TIMEOUT_MS", int(2 * HOLD_AT_MOST_S * 1000))


@contextmanager
def write_lock_held(db: Path) -> Iterator[WriteLockHolder]:
    """``db``'s write lock held by another connection during the block (:class:`WriteLockHolder`)."""
    holder = WriteLockHolder(db)
    holder.start()
    try:
        yield holder
    finally:
        holder.stop()
