"""Memory opened on an event store the test holds: the composition root takes the store, and the
test reaches the store's public methods (write, exclusive, the erasure port) without reading
anything private of the memory system."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fermix_memory import MemorySystem
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
