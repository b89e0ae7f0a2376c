"""Use case: keep history search fast as messages arrive (ADR-0020), and write the marks
(days, names) and full-text entries that appends leave to it (ADR-0085, ADR-0091).

After a commit that appended messages, and once when the memory opens, the store's search index
is merged in bounded steps on the background worker: the appending call only queues the work
(once, however many commits come before it runs), never waits for it. The job waits for a pause
in the appends first, so a steady stream of appends (a bulk import, a busy host) is merged about
once a second rather than after every message. Levels only are merged while the appends go on;
in a pause, the whole index when its size and growth call for it, or after a bulk append.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from fermix_memory.application.errors import StorageError
from fermix_memory.application.store_ports import BULK_EVENTS, PAUSE_S, RecordedEvent, SearchIndex
from fermix_memory.domain.conversation_events import MessageAppended
from fermix_memory.domain.memory_events import MemoryAdded

log = logging.getLogger("fermix_memory.storage")

# Steps one job may take; what is left is taken up by the next job, which it queues itself (other
# background work queued meanwhile runs in between).
MAX_STEPS = 64
# A job merges once no message was appended for QUIET_S, or after MAX_WAIT_S of waiting.
QUIET_S = PAUSE_S
MAX_WAIT_S = 1.0
TOLERANCE_S = 0.001  # waits shorter than this are not worth a sleep
# The job queued when a memory opens comes this long after: a short-lived process (a command of
# the CLI) closes first and leaves the file as it found it.
OPEN_DELAY_S = 2.0


class JobQueue(Protocol):
    """Where the work goes (``BackgroundWorker``): a key already queued is not queued twice."""

    def submit(self, key: Any, job: Callable[[], Any]) -> Any: ...


class IndexUpkeep:
    """Queues :meth:`tidy` on ``background`` after commits that appended messages; :meth:`stop`
    (at close) ends a job's wait at once, and no merge starts after it."""

    def __init__(self, index: SearchIndex, background: JobQueue, *, max_steps: int = MAX_STEPS,
                 quiet_s: float = QUIET_S, max_wait_s: float = MAX_WAIT_S,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] | None = None) -> None:
        self._index = index
        self._background = background
        self._max_steps = max_steps
        self._quiet_s, self._max_wait_s = quiet_s, max_wait_s
        self._stopping = threading.Event()
        self._monotonic, self._sleep = monotonic, sleep or self._stopping.wait
        self._last_append = monotonic() - quiet_s  # no append yet: the job at open need not wait
        self._appends = 0  # commits that appended messages, counted to see appends resume
        self._bulk = False  # a bulk append came since the index was last merged whole
        self._queued = False  # a tidy job is queued and has not started yet
        self._opening: threading.Timer | None = None  # queues the job of :meth:`start`

    def stop(self) -> None:
        self._stopping.set()
        if self._opening is not None:
            self._opening.cancel()

    def mark_now(self) -> int:
        """Write every mark the appends left waiting, now, on the caller's thread (at close: a
        file closed cleanly holds every message's marks); a failure is logged, not raised."""
        try:
            return self._index.mark_messages()
        except StorageError as exc:
            log.warning("message marks were not written (the next open writes them): %s", exc)
            return 0

    def start(self, delay_s: float | None = None) -> None:
        """At open: one job, as after an append, ``delay_s`` later (:data:`OPEN_DELAY_S`). An
        index that a process left in segments (it ended right after an import: its job never
        ran) is merged as its size and growth say, rather than only after the next append."""
        self._opening = threading.Timer(OPEN_DELAY_S if delay_s is None else delay_s, self._queue_job)
        self._opening.daemon = True
        self._opening.start()

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        """An after-commit reaction of the store: a commit that appended messages or added memory
        rows (whose full-text entries may wait for this job, ADR-0091) queues the job."""
        for r in recorded:
            if isinstance(r.event, MessageAppended | MemoryAdded):
                self._last_append = self._monotonic()
                self._appends += 1
                if len(recorded) >= BULK_EVENTS:  # the whole index at the next pause, whatever its
                    self._bulk = True  # size: about 2 s of background work at a million messages
                self._queue_job()
                return

    def _queue_job(self) -> None:
        if self._stopping.is_set():
            return
        if not self._queued:  # a job not started yet sees this append when it starts
            self._queued = True
            self._background.submit(("search-index-upkeep",), self.tidy)

    def tidy(self) -> int:
        """Wait for a pause in the appends (at most ``max_wait_s``), then merge until nothing is
        left or ``max_steps`` were taken (the next job is then queued at once); the steps taken.
        A failed step (a full disk) ends the job with one warning: the index stays correct, only
        slower, until a later job merges it."""
        self._queued = False  # appends from now on queue the next job
        give_up = self._monotonic() + self._max_wait_s
        paused = True  # the wait ended in a pause of the appends, not at its longest
        while not self._stopping.is_set():
            now = self._monotonic()
            if self._last_append + self._quiet_s - now < TOLERANCE_S:
                break
            if give_up - now < TOLERANCE_S:
                paused = False
                break
            self._sleep(min(self._last_append + self._quiet_s, give_up) - now)
        steps, merged, appends = 0, True, self._appends
        try:
            if not self._stopping.is_set():
                self._index.mark_messages()  # the marks the appends left to it (ADR-0085)
            while merged and steps < self._max_steps and not self._stopping.is_set():
                # While appends go on, levels only: rewriting the whole of an index they are still
                # growing would be redone soon (an import). In a pause: whole after a bulk append,
                # else as the index's size and growth say.
                whole = (self._bulk or None) if paused and self._appends == appends else False
                merged = self._index.merge_step(whole=whole)
                steps += merged
                if whole and not merged:
                    self._bulk = False
        except StorageError as exc:
            log.warning("the search index was not merged (the next append tries again): %s", exc)
            return steps
        if merged and steps == self._max_steps and not self._stopping.is_set():
            self._queue_job()  # the budget ran out, not the work: the next job goes on
        return steps
