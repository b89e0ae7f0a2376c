"""Background work off the turn's critical path: reviews run on one worker thread."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import Any, TypeVar

from fermix_memory.application.errors import MemoryClosed

log = logging.getLogger("fermix_memory.background")

T = TypeVar("T")


def _closed_error() -> MemoryClosed:
    return MemoryClosed("the memory system was closed before this background work ran")


class BackgroundWorker:
    """Runs jobs one at a time on a daemon-free worker; a key already queued is not queued twice.

    A job's failure is logged and kept in its future: it never reaches the caller who
    submitted it. The futures handed out are the worker's own, so that closing can answer a job
    it drops with :class:`MemoryClosed` (a ``FermixError``) instead of cancelling it.
    """

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._queued: dict[Any, Future[Any]] = {}
        self._lock = threading.Lock()
        self._running = 0
        self._closed = False

    def submit(self, key: Any, job: Callable[[], T]) -> Future[T]:
        with self._lock:
            queued = self._queued.get(key)
            # Queued and not started: every later submit is answered with it (a future is made
            # only for new work: the same upkeep is asked for after every commit).
            if queued is not None and not self._closed and not queued.running() and not queued.done():
                return queued
            future: Future[T] = Future()
            if self._closed:
                future.set_exception(_closed_error())
                return future
            self._queued[key] = future
            self._executor.submit(self._run, key, future, job)
            return future

    def idle(self) -> bool:
        """Whether no job runs or waits to start (a job counts as running until it returned,
        before its future is answered)."""
        with self._lock:
            return not self._queued and not self._running

    def _run(self, key: Any, future: Future[T], job: Callable[[], T]) -> None:
        with self._lock:
            if self._queued.get(key) is not future:
                return  # dropped by close, which answered its future
            del self._queued[key]
            self._running += 1
        if not future.set_running_or_notify_cancel():
            with self._lock:
                self._running -= 1
            return  # the host cancelled it while it waited
        try:
            try:
                result = job()
            finally:
                with self._lock:
                    self._running -= 1
        except BaseException as exc:  # kept in the future, as the executor's own would
            if isinstance(exc, Exception):
                log.exception("background job %r failed", key)
            future.set_exception(exc)
        else:
            future.set_result(result)

    def close(self) -> None:
        """Wait for the running job; drop queued ones (the next turn queues them again), whose
        futures raise :class:`MemoryClosed`."""
        with self._lock:
            self._closed = True
            dropped = list(self._queued.values())
            self._queued.clear()
        for future in dropped:
            with contextlib.suppress(InvalidStateError):  # the host cancelled it meanwhile
                future.set_exception(_closed_error())
        self._executor.shutdown(wait=True, cancel_futures=True)
