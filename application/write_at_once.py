"""A write that commits at once on the caller's own thread, or does nothing (ADR-0110).

An async caller's brief write (a turn's few messages) may run on the thread that awaits it, with
no hop to the lane, when the store can commit it without waiting for anything: no other writer
ahead of it, the database's write lock free, a commit that syncs nothing to disk. The caller asks
with :func:`at_once`; the store's next write on this thread then either commits at once or raises
:class:`WriterBusy` before it did anything, and the caller runs the whole call again where waiting
is harmless. Only the first write of the call is asked: a later one waits as usual."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeGuard

# The most messages (or items) a write asked to commit at once may hold: a turn's few. A bulk
# write stays on the lane, where the loop runs between its Python's switch intervals.
BRIEF_WRITE_MOST = 16


def is_brief(items: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Whether a call's ``items`` (messages, items, operations) make a brief write: a list or
    tuple of at least one and at most :data:`BRIEF_WRITE_MOST`."""
    return isinstance(items, list | tuple) and 0 < len(items) <= BRIEF_WRITE_MOST


class WriterBusy(Exception):  # control flow between the store and the lane, never a host's error
    """The write asked to commit at once could not without waiting; nothing of it was done."""


class _Asked(threading.local):
    at_once = False


_asked = _Asked()


@contextmanager
def at_once() -> Iterator[None]:
    """Within the block, this thread's next write commits at once or raises :class:`WriterBusy`."""
    _asked.at_once = True
    try:
        yield
    finally:
        _asked.at_once = False


def asked_at_once() -> bool:
    """Whether this thread's write now was asked to commit at once; asking answers once."""
    if not _asked.at_once:
        return False
    _asked.at_once = False
    return True
