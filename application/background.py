"""Background work off the turn's critical path: reviews and upkeep run on one worker thread.

Two kinds of job (ADR-0055). Work a turn asked for (a review, a compaction) is submitted with an
``on_drop``: closing runs it while its wait lasts, and one still queued when the wait is over is
handed to its ``on_drop`` (which records it, so that nothing asked is lost unsaid). Upkeep (the
search index, the vectors) has none: its work is queued in the store itself and taken up again
when a memory opens, so closing drops it at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

import attrs

from fermix_memory.application.errors import MemoryClosed

log = logging.getLogger("fermix_memory.background")

T = TypeVar("T")


def _closed_error() -> MemoryClosed:
    return MemoryClosed("the memory system was closed before this background work ran")


@attrs.define(eq=False)
class _Job:
    key: Any
    run: Callable[[], Any]
    future: Future[Any]
    on_drop: Callable[[], object] | None


class BackgroundWorker:
    """Runs jobs one at a time on one thread; a key already queued is not queued twice.

    A job's failure is logged and kept in its future: it never reaches the caller who
    submitted it. The futures handed out are the worker's own, so that closing can answer a job
    it drops with :class:`MemoryClosed` (a ``FermixError``) instead of cancelling it.

    The thread is a daemon: a process that ends without closing its memory is not held at exit
    by an idle worker; the memory's own exit hook closes it, as :meth:`close` does.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: deque[_Job] = deque()
        self._queued: dict[Any, _Job] = {}
        self._changed = threading.Condition()
        self._running: _Job | None = None
        self._closing = False  # close began: nothing new is taken
        self._closed = False  # nothing more starts
        self._thread: threading.Thread | None = None

    def submit(self, key: Any, job: Callable[[], T], *, on_drop: Callable[[], object] | None = None) -> Future[T]:
        """Queue ``job``; ``on_drop`` makes it work that :meth:`close` runs while its wait lasts,
        and is called instead when the job is left queued at the end of that wait."""
        with self._changed:
            queued = self._queued.get(key)
            # Queued and not started: every later submit is answered with it (a future is made
            # only for new work: the same upkeep is asked for after every commit).
            if queued is not None and not self._closing and not queued.future.done():
                queued.on_drop = queued.on_drop or on_drop
                return queued.future
            future: Future[T] = Future()
            if self._closing:
                future.set_exception(_closed_error())
                return future
            if self._thread is None:
                thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # the interpreter is ending: no thread may start now
                    future.set_exception(_closed_error())
                    return future
                self._thread = thread
            item = _Job(key, job, future, on_drop)
            self._queued[key] = item
            self._jobs.append(item)
            self._changed.notify_all()
            return future

    def idle(self) -> bool:
        """Whether no job runs or waits to start (a job counts as running until it returned,
        before its future is answered)."""
        with self._changed:
            return not self._jobs and self._running is None

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._jobs and not self._closed:
                    self._changed.wait()
                if not self._jobs:
                    return
                item = self._running = self._jobs.popleft()
                if self._queued.get(item.key) is item:
                    del self._queued[item.key]
            try:
                self._run(item)
            finally:
                with self._changed:
                    self._running = None
                    self._changed.notify_all()

    def _run(self, item: _Job) -> None:
        if not item.future.set_running_or_notify_cancel():
            return  # the host cancelled it while it waited
        try:
            try:
                result = item.run()
            finally:
                with self._changed:
                    self._running = None
        except BaseException as exc:  # kept in the future, as an executor's would
            if isinstance(exc, Exception):
                log.exception("background job %r failed", item.key)
            item.future.set_exception(exc)
        else:
            item.future.set_result(result)

    def close(self, wait_s: float = 0.0) -> None:
        """Drop queued upkeep at once; run the queued work a turn asked for while ``wait_s`` lasts,
        then hand what is left of it to its ``on_drop``; wait for the job running then. Dropped
        jobs' futures raise :class:`MemoryClosed`."""
        on_worker = threading.current_thread() is self._thread  # closed by a job: it cannot wait for itself
        deadline = time.monotonic() + (0.0 if on_worker else wait_s)
        with self._changed:
            self._closing = True
            dropped = [j for j in self._jobs if j.on_drop is None]
            self._jobs = deque(j for j in self._jobs if j.on_drop is not None)
            while self._jobs and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            self._closed = True
            dropped += self._jobs
            self._jobs.clear()
            self._queued.clear()
            self._changed.notify_all()
            thread = self._thread
        for item in dropped:
            if item.on_drop is not None and not item.future.done():
                try:
                    item.on_drop()
                except Exception as exc:  # the store is failing: the work is still named
                    log.warning("background job %r was dropped at close and could not be recorded: %s", item.key, exc)
            with contextlib.suppress(InvalidStateError):  # the host cancelled it meanwhile
                item.future.set_exception(_closed_error())
        if thread is not None and not on_worker:
            thread.join()
