"""Background work off the turn's critical path: reviews run on one worker thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

log = logging.getLogger("fermix_memory.background")

T = TypeVar("T")


class BackgroundWorker:
    """Runs jobs one at a time on a daemon-free worker; a key already queued is not queued twice.

    A job's failure is logged and kept in its future: it never reaches the caller who
    submitted it.
    """

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._queued: dict[Any, Future[Any]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, key: Any, job: Callable[[], T]) -> Future[T]:
        with self._lock:
            if self._closed:
                done: Future[T] = Future()
                done.set_exception(RuntimeError("the memory system is closed"))
                return done
            queued = self._queued.get(key)
            if queued is not None and not queued.running() and not queued.done():
                return queued

            def run() -> T:
                with self._lock:
                    self._queued.pop(key, None)
                try:
                    return job()
                except Exception:
                    log.exception("background job %r failed", key)
                    raise

            future = self._executor.submit(run)
            self._queued[key] = future
            return future

    def close(self) -> None:
        """Wait for the running job; drop queued ones (the next turn queues them again)."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
