"""The lane's threads (ADR-0100, ADR-0101): one caller's calls keep to the thread that ran its
last call; calls at once still get a thread each, up to the pool's size; a call cancelled before it
starts never runs; results and errors come back to the caller's loop as raised."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fermix_memory.entrypoints.api import lane
from fermix_memory.entrypoints.api.lane_pool import LaneCall, LanePool

WAIT_S = 60.0  # how long a condition may take to come true on a loaded machine
WORKERS = 4


def on(pool: LanePool, call: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``call(*args)`` started on ``pool``, heard of through a future of the running loop."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    pool.start(LaneCall(call, args, future=future))
    return future


def test_one_callers_calls_keep_to_one_thread_with_others_idle() -> None:
    """A task awaiting one call after another, after a burst started every thread: each call
    goes to the thread that ran the last one, not round the idle ones."""
    pool = LanePool(WORKERS, "test-lane")
    together = threading.Barrier(WORKERS, timeout=WAIT_S)

    async def main() -> list[int]:
        assert len(await asyncio.gather(*(on(pool, together.wait) for _ in range(WORKERS)))) == WORKERS
        return [await on(pool, threading.get_ident) for _ in range(40)]

    ran_on = asyncio.run(main())
    assert len(set(ran_on)) == 1, f"one caller's calls went round {len(set(ran_on))} threads"


def test_calls_at_once_each_get_a_thread_up_to_the_pools_size() -> None:
    pool = LanePool(WORKERS, "test-lane")
    together = threading.Barrier(WORKERS, timeout=WAIT_S)  # broken unless all run at the same time

    async def main() -> list[int]:
        return list(await asyncio.gather(*(on(pool, together.wait) for _ in range(WORKERS))))

    assert sorted(asyncio.run(main())) == list(range(WORKERS))


def test_a_call_beyond_the_pools_size_waits_for_a_thread_and_then_runs() -> None:
    pool = LanePool(WORKERS, "test-lane")
    release = threading.Event()
    started = threading.Semaphore(0)

    def hold() -> str:
        started.release()
        release.wait(WAIT_S)
        return "held"

    async def main() -> None:
        held = [on(pool, hold) for _ in range(WORKERS)]
        for _ in range(WORKERS):
            assert started.acquire(timeout=WAIT_S)
        queued = on(pool, lambda: "queued")
        await asyncio.sleep(0)
        assert not queued.done()  # every thread is held: nothing can have run it
        release.set()
        assert await queued == "queued"
        assert await asyncio.gather(*held) == ["held"] * WORKERS

    asyncio.run(main())


def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    pool = LanePool(1, "test-lane")
    release = threading.Event()
    ran: list[str] = []

    async def main() -> None:
        first = on(pool, release.wait, WAIT_S)
        second = on(pool, ran.append, "second")
        third = on(pool, ran.append, "third")
        assert second.cancel()
        release.set()
        await asyncio.gather(first, third)

    asyncio.run(main())
    assert ran == ["third"]


def test_a_call_whose_loop_closed_before_it_ended_leaves_the_thread_going_on() -> None:
    pool = LanePool(1, "test-lane")
    release = threading.Event()

    async def start() -> None:
        on(pool, release.wait, WAIT_S)

    asyncio.run(start())  # the loop closes with the call still running
    release.set()

    async def next_call() -> int:
        return int(await asyncio.wait_for(on(pool, lambda: 42), WAIT_S))

    assert asyncio.run(next_call()) == 42


class _Unreachable:
    """A caller whose loop fails to take the result in a way no closed loop does."""

    def cancelled(self) -> bool:
        return False

    def get_loop(self) -> _Unreachable:
        return self

    def call_soon_threadsafe(self, *_: object) -> None:
        raise ValueError("this loop takes nothing")


def test_a_caller_that_cannot_be_told_costs_the_pool_no_thread() -> None:
    pool = LanePool(1, "test-lane")
    ran = threading.Event()
    pool.start(LaneCall(ran.set, future=_Unreachable()))  # type: ignore[arg-type]
    assert ran.wait(WAIT_S)

    async def next_call() -> int:
        return int(await asyncio.wait_for(on(pool, lambda: 7), WAIT_S))

    assert asyncio.run(next_call()) == 7


class Stop(BaseException):
    pass


@pytest.mark.parametrize("error", [ValueError("bad"), Stop()])
def test_a_calls_error_is_its_callers_and_the_thread_goes_on(error: BaseException) -> None:
    pool = LanePool(1, "test-lane")

    def fail() -> None:
        raise error

    async def main() -> None:
        with pytest.raises(type(error)) as raised:
            await on(pool, fail)
        assert raised.value is error
        assert await on(pool, lambda x: x * 2, 21) == 42

    asyncio.run(main())


def test_a_call_raising_stop_iteration_is_a_runtime_error_for_its_caller() -> None:
    """A future refuses StopIteration (as a coroutine does): the caller gets a RuntimeError, not
    a future that never settles."""
    pool = LanePool(1, "test-lane")

    async def main() -> None:
        with pytest.raises(RuntimeError, match="StopIteration"):
            await asyncio.wait_for(on(pool, next, iter(())), WAIT_S)

    asyncio.run(main())


def test_an_awaited_call_runs_on_a_lane_thread_with_its_result() -> None:
    async def main() -> tuple[str, int]:
        return await lane.run_sync(lambda: (threading.current_thread().name, 7))  # type: ignore[return-value]

    name, value = asyncio.run(main())
    assert name.startswith("fermix-lane") and value == 7


def test_calls_still_waiting_for_a_thread_at_interpreter_exit_run_before_it_ends(tmp_path: Path) -> None:
    """As the standard executor runs what it was given before the interpreter ends: calls beyond
    the pool's size, waiting when the main thread returns, still run (none refused)."""
    ran = tmp_path / "ran"
    script = tmp_path / "exit.py"
    script.write_text(f"""
import threading
from fermix_memory.entrypoints.api.lane_pool import LaneCall, LanePool

go = threading.Event()

def work(n):
    go.wait()
    with open({str(ran)!r}, "a") as f:
        f.write(f"{{n}}\\n")

pool = LanePool(2, "exit")
for n in range(6):
    pool.start(LaneCall(work, (n,)))
go.set()  # the main thread returns at once: the interpreter shuts down with calls waiting
""")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert sorted(ran.read_text().split()) == [str(n) for n in range(6)], done.stderr
