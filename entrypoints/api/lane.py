"""The worker lane: how async code runs a call of the synchronous core without blocking its loop
(ADR-0026).

Every way in that speaks asyncio (``AsyncMemorySystem``, and any integration whose framework
awaits) runs the core's calls here, and nowhere else::

    from fermix_memory.entrypoints.api.lane import run_sync

    message_id = await run_sync(session.append, "user", "I live in Paris")

``run_sync(call, *args, **kwargs)`` runs ``call(*args, **kwargs)`` on the lane and returns its
result or raises its error unchanged (the sync API's types and typed errors). The lane is one small
pool of threads for the whole process (:data:`WORKERS`), never the loop's default executor: the
host's own blocking work cannot starve memory calls, and memory calls cannot fill the host's
executor. Calls that may wait on a model (``review_now``, ``compact``, ``before_turn``,
``handle_command``, ``fill_vectors``, ``close``: marked ``model_bound``) run on a second pool of
their own (:data:`MODEL_WORKERS`, ADR-0055): however many wait on a slow provider, appends and
reads still find a free thread. Each lane thread keeps its own read connection, so a process holds at most
:data:`WORKERS` of them whatever the number of tasks; writes from several lane threads share
commits through the store's group commit. One caller's calls in turn keep to one thread
(:class:`~fermix_memory.entrypoints.api.lane_pool.LanePool`, ADR-0100), and the caller hears of
each through its own loop, with no executor future between them (ADR-0101).

Cancelling the task that awaits a call never cuts the call in half: a call that has not started
yet is dropped (it did nothing), one that has started runs to its end on its thread (a write
commits whole, or not at all when it fails) and only its result is dropped.

A brief write (a turn's few messages: ``AsyncSession.append``, the Agents session's
``add_items``) is the one exception (ADR-0110): :meth:`Lane.write` commits it on the awaiting
thread when the store can without waiting for anything (no writer ahead, the write lock free, a
commit that syncs nothing), and sends it here otherwise, or when tasks take turns at writing.

A :class:`Lane` is a view of the pool that counts its own calls in flight, so that whoever owns
it can :meth:`Lane.drain` them before closing what they use (``AsyncMemorySystem.close`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast

from fermix_memory.application.errors import MemoryClosed
from fermix_memory.application.write_at_once import WriterBusy, at_once
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.entrypoints.api.lane_pool import LaneCall, LanePool
from fermix_memory.entrypoints.api.model_bound import is_model_bound

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", covariant=True)

WORKERS = 4  # threads of the lane: enough to fill a group commit and overlap reads, bounded
MODEL_WORKERS = 8  # threads for calls that wait on a model: mostly idle in a socket read, bounded
# A brief write that began less than this after another running task's is one of tasks taking
# turns (ADR-0110): clients served at once, not a lone caller's next step.
TURNS_S = 0.05
_pools: dict[bool, LanePool] = {}
_pool_lock = threading.Lock()


def _shared_pool(model: bool = False) -> LanePool:
    """The process's lane threads; ``model``: those of the calls that may wait on a model."""
    pool = _pools.get(model)
    if pool is None:
        with _pool_lock:
            pool = _pools.get(model)
            if pool is None:
                pool = _pools[model] = LanePool(MODEL_WORKERS if model else WORKERS,
                                                "fermix-lane-model" if model else "fermix-lane")
    return pool


class Lane:
    """Runs sync calls on the lane's threads for async callers, and knows which are in flight."""

    def __init__(self, what: str = "this memory system") -> None:
        self._what = what
        self._in_flight: set[LaneCall] = set()
        self._drained: list[asyncio.Future[None]] = []  # closers waiting for the calls in flight
        self._lock = threading.Lock()
        self._closed = False
        # The last brief write's task, and when it began; brief writes awaited on the lane (ADR-0110).
        self._last_write: tuple[asyncio.Task[Any] | None, float] = (None, -TURNS_S)
        self._writes_on_lane = 0

    async def run(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``call(*args, **kwargs)`` on a lane thread (a model-bound call on one of the model's);
        its result, or its error unchanged. Raises :class:`MemoryClosed` once the lane was
        drained for closing."""
        if not callable(call):
            raise InvalidArgument(f"the lane runs a function, got {type(call).__name__}")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        job = LaneCall(call, args, kwargs, future, self._finished)
        with self._lock:
            if self._closed:
                raise MemoryClosed(f"{self._what} is closed")
            self._in_flight.add(job)
        try:
            _shared_pool(is_model_bound(call)).start(job)
        except BaseException:
            self._finished(job)
            raise
        # Cancelling the awaiting task drops the call only if it has not started (LaneCall).
        return await future

    async def write(self, here: bool, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """A brief write (one transaction, the call's first effect): when ``here``, run on this
        thread if the store commits it at once, without waiting for anything (ADR-0110); else,
        or when it could not, on a lane thread as :meth:`run`. Tasks taking turns at writing
        (another task, still running, began one a moment ago, or brief writes are awaited on the
        lane) go to the lane, where their writes share commits and the loop runs between them."""
        task, now = asyncio.current_task(), time.monotonic()
        last_task, last_at = self._last_write
        self._last_write = (task, now)
        turns = self._writes_on_lane > 0 or (
            last_task is not None and last_task is not task and not last_task.done() and now - last_at < TURNS_S)
        if here and not turns:
            job = LaneCall(call, args, kwargs)
            with self._lock:
                if self._closed:
                    raise MemoryClosed(f"{self._what} is closed")
                self._in_flight.add(job)  # a closer waits for it as for a call on a lane thread
            try:
                done, result = made_at_once(functools.partial(call, *args, **kwargs))
            finally:
                self._finished(job)
            if done:
                return cast(T, result)
        with self._lock:  # one lane may serve the loops of several threads
            self._writes_on_lane += 1
        try:
            return await self.run(call, *args, **kwargs)
        finally:
            with self._lock:
                self._writes_on_lane -= 1

    def _finished(self, job: LaneCall) -> None:
        """Once ``job`` ran (on its lane thread, or at once on its caller's) or was dropped:
        closers waiting for the last call in flight hear of it."""
        with self._lock:
            self._in_flight.discard(job)
            if self._in_flight or not self._drained:
                return
            drained, self._drained = self._drained, []
        for waiter in drained:
            with contextlib.suppress(RuntimeError):  # that closer's loop is gone
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    async def drain(self) -> None:
        """Refuse new calls, then wait (without blocking the loop) for those already started or
        queued: their tasks may have been cancelled, their calls still finish."""
        with self._lock:
            self._closed = True
            if not self._in_flight:
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drained.append(waiter)
        await waiter  # a closer cancelled meanwhile leaves the calls to finish as they will


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def detach(call: Callable[[], object]) -> None:
    """Run ``call`` on the lane with nobody awaiting it (closing what a cancelled open opened)."""
    _shared_pool(is_model_bound(call)).start(LaneCall(call))


_default = Lane("the lane")


async def run_sync(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a call of the sync API (a :class:`~fermix_memory.Session` or
    :class:`~fermix_memory.MemorySystem` method) on the lane; see the module's docstring."""
    return await _default.run(call, *args, **kwargs)


def made_at_once(call: Callable[[], T]) -> tuple[bool, T | None]:
    """``call()`` on this thread, its first write asked to commit at once (ADR-0110): ``(True,
    result)``; ``(False, None)`` when that write would have waited and did nothing, so that the
    caller makes the whole call again where waiting is harmless. Its errors are raised."""
    try:
        with at_once():
            return True, call()
    except WriterBusy:
        return False, None


async def run_write(here: bool, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """A brief write of the sync API (see :meth:`Lane.write`): at once on this thread when
    ``here`` and the store can, else on the lane as :func:`run_sync`."""
    return await _default.write(here, call, *args, **kwargs)


class OnLane(Generic[S]):
    """An async facade over a sync object whose methods run on a lane (see :func:`awaitable`)."""

    _sync: S
    _lane: Lane


def awaitable(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[OnLane[S], P], Coroutine[Any, Any, T]]:
    """The awaitable twin of a sync method: same parameters, same result, same errors, run on the
    facade's lane. Assigned in a facade's class body: ``recall = awaitable(MemorySystem.recall)``."""

    @functools.wraps(method)
    async def on_lane(self: OnLane[S], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._lane.run(functools.partial(method, self._sync, *args, **kwargs))

    return on_lane


def awaitable_write(method: Callable[Concatenate[S, P], T], here: Callable[Concatenate[S, P], bool]
                    ) -> Callable[Concatenate[OnLane[S], P], Coroutine[Any, Any, T]]:
    """:func:`awaitable` for a brief write (see :meth:`Lane.write`): run at once on the caller's
    thread when ``here(sync_object, *arguments)`` says it may and the store can, else on the
    facade's lane."""

    @functools.wraps(method)
    async def at_once_or_on_lane(self: OnLane[S], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._lane.write(here(self._sync, *args, **kwargs),
                                      functools.partial(method, self._sync, *args, **kwargs))

    return at_once_or_on_lane
