"""The lane's threads (ADR-0100): a call goes to the thread that finished a call last, when it is
free, never to one that slept longer.

An async caller awaits one call after another. A plain ``ThreadPoolExecutor`` of several threads
hands each call to whichever of its idle threads has waited longest: one caller's calls go round
its threads, each on a thread that went to sleep several calls ago. Here each thread is a slot
of its own (a one-thread ``ThreadPoolExecutor``) and a call goes to the free slot freed last: one
caller's calls keep to one thread. A slot is freed by the first callback of its call's future,
before the caller hears of the result, so the caller's next call finds it free. Calls at once
still get a thread each, up to the pool's size; beyond it they wait, and a slot that is freed
takes the oldest first. At interpreter exit, as with the standard executor, what was submitted
before still runs: a thread finishes its call, and calls still waiting run on the threads that
free up.
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class LanePool:
    """At most ``workers`` threads named ``name``-N; :meth:`submit` as ``ThreadPoolExecutor``'s."""

    def __init__(self, workers: int, name: str) -> None:
        self._slots = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-{n}") for n in range(workers)]
        self._lock = threading.Lock()
        self._free = list(reversed(self._slots))  # a stack: the slot freed last on top
        self._waiting: deque[tuple[Future[Any], Callable[[], Any]]] = deque()  # no free slot, oldest first

    def submit(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """``call(*args, **kwargs)`` on one of the threads; its future (cancelled before it starts,
        it never runs)."""
        with self._lock:
            if not self._free:
                future: Future[T] = Future()
                self._waiting.append((future, functools.partial(call, *args, **kwargs)))
                return future
            slot = self._free.pop()
        try:
            started = slot.submit(call, *args, **kwargs)
        except BaseException:  # the interpreter is shutting down: nothing new starts
            with self._lock:
                self._free.append(slot)
            raise
        started.add_done_callback(functools.partial(self._freed, slot))  # its first callback
        return started

    def _freed(self, slot: ThreadPoolExecutor, _: Future[Any]) -> None:
        """``slot``'s call ended: the oldest waiting call goes to it, or it is free."""
        while True:
            with self._lock:
                if not self._waiting:
                    self._free.append(slot)
                    return
                future, call = self._waiting.popleft()
            try:
                started = slot.submit(_relay, future, call)
            except RuntimeError:  # the interpreter is shutting down: run it here, as the executor runs
                _relay(future, call)  # what it was given before it ends
                continue
            started.add_done_callback(functools.partial(self._freed, slot))
            return


def _relay(future: Future[T], call: Callable[[], T]) -> None:
    """Run a call that waited for a slot, into the future its caller holds."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = call()
    except BaseException as exc:
        future.set_exception(exc)
        del exc  # no cycle through the traceback
    else:
        future.set_result(result)
