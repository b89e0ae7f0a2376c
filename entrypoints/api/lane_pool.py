"""The lane's threads (ADR-0100): a call goes to the thread that finished a call last, when it is
free, never to one that slept longer.

An async caller awaits one call after another. A plain ``ThreadPoolExecutor`` of several threads
hands each call to whichever of its idle threads has waited longest: one caller's calls go round
its threads, each on a thread that went to sleep several calls ago. Here each thread is a slot
of its own (a one-thread ``ThreadPoolExecutor``) and a call goes to the free slot freed last: one
caller's calls keep to one thread, and a call submitted while that thread hands over its last
result is taken by it straight after. Calls at once still get a thread each, up to the pool's
size; beyond it they queue, and a thread that finishes takes the oldest before it is free again.
Shutting down at interpreter exit is the standard library's: a thread runs what it was given
before it ends.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class _Call:
    __slots__ = ("args", "call", "future", "kwargs")

    def __init__(self, future: Future[Any], call: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.future, self.call, self.args, self.kwargs = future, call, args, kwargs


class LanePool:
    """At most ``workers`` threads named ``name``-N; :meth:`submit` as ``ThreadPoolExecutor``'s."""

    def __init__(self, workers: int, name: str) -> None:
        self._slots = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-{n}") for n in range(workers)]
        self._lock = threading.Lock()
        self._free = list(reversed(self._slots))  # a stack: the slot freed last on top
        self._queued: deque[_Call] = deque()  # calls that found no free slot, oldest first

    def submit(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """``call(*args, **kwargs)`` on one of the threads; its future (cancelled before it starts,
        it never runs)."""
        future: Future[T] = Future()
        queued = _Call(future, call, args, kwargs)
        with self._lock:
            if not self._free:
                self._queued.append(queued)
                return future
            slot = self._free.pop()
        try:
            slot.submit(self._run, slot, queued)
        except BaseException:  # the interpreter is shutting down: nothing new starts
            with self._lock:
                self._free.append(slot)
            raise
        return future

    def _run(self, slot: ThreadPoolExecutor, queued: _Call | None) -> None:
        """Run ``queued``, then the oldest call waiting for a slot, until none waits."""
        while queued is not None:
            future = queued.future
            if not future.set_running_or_notify_cancel():
                queued = self._next(slot)
                continue
            try:
                result = queued.call(*queued.args, **queued.kwargs)
            except BaseException as exc:
                queued = self._next(slot)
                future.set_exception(exc)
                del exc  # no cycle through the traceback
            else:
                queued = self._next(slot)
                future.set_result(result)

    def _next(self, slot: ThreadPoolExecutor) -> _Call | None:
        """The oldest call waiting for a slot, or ``None`` with ``slot`` freed; before the caller
        hears of the call just run, so that its next call finds this slot free."""
        with self._lock:
            if self._queued:
                return self._queued.popleft()
            self._free.append(slot)
            return None
