"""The lane's threads (ADR-0100, ADR-0101): a call goes to the thread that finished a call last,
when it is free, never to one that slept longer; its caller hears of it through its own loop,
with no executor future between them.

An async caller awaits one call after another. A pool whose idle threads share one queue hands
each call to whichever has waited longest: one caller's calls go round the threads, each on a
thread that went to sleep several calls ago. Here each thread is a slot with a queue of its own,
and a call goes to the free slot freed last: one caller's calls keep to one thread. The slot is
freed before the caller hears of the result, so the caller's next call finds it free. Calls at
once still get a thread each, up to the pool's size; beyond it they wait, and a thread that
finishes takes the oldest first.

A call's result or error goes straight to the ``asyncio`` future its caller awaits, by one
``call_soon_threadsafe``: no ``concurrent.futures.Future`` (a condition variable each) and no
``wrap_future`` chaining a second future to it, which cost as much as the hop itself (ADR-0101).

At interpreter exit, as with the standard executor, what was handed over before still runs: each
thread finishes its queue, and calls still waiting run on the threads that free up; nothing new
starts (``RuntimeError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from queue import SimpleQueue
from typing import Any

log = logging.getLogger("fermix_memory.lane")
_EMPTY: Mapping[str, Any] = {}


class LaneCall:
    """One call for a lane thread: ``call(*args, **kwargs)``; ``future`` (of ``loop``) gets its
    result or error, unless it was cancelled before the call started, which then never runs;
    ``ended(self)``, when given, is told on the thread once the call ran or was dropped, before
    the caller hears of it."""

    __slots__ = ("args", "call", "ended", "error", "future", "kwargs", "loop", "result")

    def __init__(self, call: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: Mapping[str, Any] = _EMPTY,
                 future: asyncio.Future[Any] | None = None,
                 ended: Callable[[LaneCall], object] | None = None) -> None:
        self.call, self.args, self.kwargs = call, args, kwargs
        self.future = future
        self.loop = None if future is None else future.get_loop()
        self.ended = ended
        self.result: Any = None
        self.error: BaseException | None = None

    def _run(self) -> None:
        """Run the call (not if its caller gave up before it started); never raises."""
        future = self.future
        if future is not None and future.cancelled():
            self.future = None
        else:
            try:
                self.result = self.call(*self.args, **self.kwargs)
            except BaseException as exc:  # the caller's, whatever it is: the thread goes on
                self.error = exc
        self.call = self.args = self.kwargs = None  # type: ignore[assignment]  # what the call held goes now
        if self.ended is not None:
            with contextlib.suppress(Exception):  # the caller's bookkeeping: never the thread's end
                self.ended(self)

    def _tell(self) -> None:
        """Hand the result or error to the caller's loop (nothing to tell: no future, or a loop
        that closed meanwhile)."""
        if self.future is None or self.loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody is left to hear it
            self.loop.call_soon_threadsafe(_settle, self.future, self.result, self.error)
        self.result = self.error = None


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the caller's loop: the call's outcome into its future (unless cancelled meanwhile)."""
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    elif isinstance(error, StopIteration):  # a future refuses it, as a coroutine's result would be lost
        future.set_exception(RuntimeError(f"the call raised StopIteration: {error!r}"))
    else:
        future.set_exception(error)


class _Slot:
    __slots__ = ("name", "queue", "thread")

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue: SimpleQueue[LaneCall | None] = SimpleQueue()
        self.thread: threading.Thread | None = None


class LanePool:
    """At most ``workers`` threads named ``name``-N, started as calls first need them."""

    def __init__(self, workers: int, name: str) -> None:
        self._slots = [_Slot(f"{name}-{n}") for n in range(workers)]
        self._lock = threading.Lock()
        self._free = list(reversed(self._slots))  # a stack: the slot freed last on top
        self._waiting: deque[LaneCall] = deque()  # no free slot, oldest first
        self._exiting = False
        self._exit_hook = False

    def start(self, job: LaneCall) -> None:
        """Hand ``job`` to a thread (or queue it for the first that frees up); ``RuntimeError``
        once the interpreter is shutting down."""
        with self._lock:
            if self._exiting:
                raise RuntimeError("cannot start a lane call after interpreter shutdown")
            if not self._free:
                self._waiting.append(job)
                return
            slot = self._free.pop()
            if slot.thread is None:
                try:
                    self._start_thread(slot)
                except BaseException:
                    self._free.append(slot)
                    raise
        slot.queue.put(job)

    def _start_thread(self, slot: _Slot) -> None:
        """Under ``_lock``: ``slot``'s thread, and once per pool the hook that lets the threads
        finish what they were given at interpreter exit (the standard executor's own)."""
        if not self._exit_hook:
            threading._register_atexit(self._at_exit)  # type: ignore[attr-defined]  # concurrent.futures' hook
            self._exit_hook = True
        slot.thread = threading.Thread(target=self._serve, args=(slot,), name=slot.name, daemon=True)
        slot.thread.start()

    def _serve(self, slot: _Slot) -> None:
        get = slot.queue.get
        job = get()
        while job is not None:
            job._run()
            with self._lock:  # the slot is free (or takes the oldest waiting call) before the caller hears
                following = self._waiting.popleft() if self._waiting else None
                if following is None:
                    self._free.append(slot)
            try:
                job._tell()
            except Exception:  # never the thread's end: the pool would lose a slot for good
                log.exception("a lane call's result could not be handed to its caller")
            job = following if following is not None else get()

    def _at_exit(self) -> None:
        """At interpreter exit: nothing new starts; every thread ends once its queue is done."""
        with self._lock:
            self._exiting = True
            threads = [slot.thread for slot in self._slots if slot.thread is not None]
            for slot in self._slots:
                if slot.thread is not None:
                    slot.queue.put(None)
        for thread in threads:
            thread.join()
