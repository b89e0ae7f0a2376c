"""Where the log is, as the caches see it (SPEC §4): its last position read once per prompt
(:class:`PositionReads`), whether committed events follow on from what a cache saw
(:class:`LogFollower`), and whether a commit erases (what no cache may outlive)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain import events as ev

# Whether committed events follow on from what a cache saw, and what it has seen after them.
Follows = Callable[[int, Sequence[RecordedEvent]], tuple[bool, int]]


def follows_by_position(seen: int, recorded: Sequence[RecordedEvent]) -> tuple[bool, int]:
    """A log whose positions run without gaps: events follow when they start right after ``seen``."""
    return recorded[0].position == seen + 1, recorded[-1].position


def erases(recorded: Sequence[RecordedEvent]) -> bool:
    """Whether a commit erases an owner, a conversation or a row: what nothing derived from the
    erased text may outlive in any cache."""
    for item in recorded:  # a message (the usual event) is told apart by its type alone
        event = item.event
        if type(event) is not ev.MessageAppended and isinstance(event, ev.ERASURE_RECORDS):
            return True
    return False


class PositionReads:
    """The log's last position for the caches' freshness checks: read at each call, except inside
    ``with reads:`` on this thread, where it is read once and held (a prompt consults three caches,
    and one read of the log's position serves them all, the same moment for each)."""

    def __init__(self, last_position: Callable[[], int]) -> None:
        self._read = last_position
        self._local = threading.local()

    def __call__(self) -> int:
        held: int | None = getattr(self._local, "held", None)
        if held is None:
            return self._read()
        if held < 0:
            held = self._local.held = self._read()
        return held

    def offer(self, position: int) -> None:
        """A position read with another statement (a window read with it): inside ``with reads:``
        on this thread, before the position was read, it is the one held (so it is not read again)."""
        if getattr(self._local, "held", None) == -1:
            self._local.held = position

    def __enter__(self) -> None:
        self._local.held = -1  # read at the first call inside

    def __exit__(self, *exc: object) -> None:
        self._local.held = None


class LogFollower:
    """Tracks the last log position seen through commits; detects foreign writes. A store whose
    positions leave gaps (several chains, ADR-0031) gives its own ``follows`` and a
    ``last_position`` that changes whenever events may have been missed."""

    def __init__(self, last_position: Callable[[], int], follows: Follows | None = None) -> None:
        self._last_position = last_position
        self._follows = follows or follows_by_position
        self.seen = last_position()

    def observe(self, recorded: Sequence[RecordedEvent]) -> bool:
        """Advance past ``recorded``; False when a cache cannot just apply them and must empty:
        they do not follow on from what was seen (a foreign write), or they erase an owner
        or a row (whose messages and rows must not outlive the erasure in any cache)."""
        contiguous, self.seen = self._follows(self.seen, recorded)
        return contiguous and not erases(recorded)

    def fresh(self) -> bool:
        return self.saw(self._last_position())

    def saw(self, current: int) -> bool:
        """Whether the log is still where it was seen, given its position ``current`` (read now);
        when not, what was kept before must go, and ``current`` is what was seen."""
        if current == self.seen:
            return True
        self.seen = current
        return False
