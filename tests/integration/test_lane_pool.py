"""The lane's threads (ADR-0100): one caller's calls keep to the thread that ran its last call;
calls at once still get a thread each, up to the pool's size; a call cancelled before it starts
never runs; results and errors come back as raised."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from concurrent.futures import Future, wait
from pathlib import Path

import pytest

from fermix_memory.entrypoints.api import lane
from fermix_memory.entrypoints.api.lane_pool import LanePool

WAIT_S = 60.0  # how long a condition may take to come true on a loaded machine
WORKERS = 4


def test_one_callers_calls_keep_to_one_thread_with_others_idle() -> None:
    """A task awaiting one call after another, after a burst started every thread: each call
    goes to the thread that ran the last one, not round the idle ones."""
    pool = LanePool(WORKERS, "test-lane")
    together = threading.Barrier(WORKERS, timeout=WAIT_S)
    assert all(f.result(WAIT_S) is not None for f in [pool.submit(together.wait) for _ in range(WORKERS)])

    async def one_after_another() -> list[int]:
        loop = asyncio.get_running_loop()
        return [await asyncio.wrap_future(pool.submit(threading.get_ident), loop=loop) for _ in range(40)]

    ran_on = asyncio.run(one_after_another())
    assert len(set(ran_on)) == 1, f"one caller's calls went round {len(set(ran_on))} threads"


def test_a_call_submitted_as_a_call_finishes_runs_on_the_finishing_thread() -> None:
    pool = LanePool(WORKERS, "test-lane")
    ran_on: list[int] = []
    done = threading.Event()

    def chain(left: int) -> None:
        future = pool.submit(lambda: ran_on.append(threading.get_ident()))
        future.add_done_callback(lambda _: chain(left - 1) if left else done.set())

    chain(30)
    assert done.wait(WAIT_S)
    assert len(ran_on) == 31 and len(set(ran_on)) == 1


def test_calls_at_once_each_get_a_thread_up_to_the_pools_size() -> None:
    pool = LanePool(WORKERS, "test-lane")
    together = threading.Barrier(WORKERS, timeout=WAIT_S)  # broken unless all run at the same time
    futures = [pool.submit(together.wait) for _ in range(WORKERS)]
    assert sorted(f.result(WAIT_S) for f in futures) == list(range(WORKERS))


def test_a_call_beyond_the_pools_size_waits_for_a_thread_and_then_runs() -> None:
    pool = LanePool(WORKERS, "test-lane")
    release = threading.Event()
    started = threading.Semaphore(0)

    def hold() -> str:
        started.release()
        release.wait(WAIT_S)
        return "held"

    held = [pool.submit(hold) for _ in range(WORKERS)]
    for _ in range(WORKERS):
        assert started.acquire(timeout=WAIT_S)
    queued = pool.submit(lambda: "queued")
    assert not queued.done()  # every thread is held: nothing can have run it
    release.set()
    assert queued.result(WAIT_S) == "queued"
    assert [f.result(WAIT_S) for f in held] == ["held"] * WORKERS


def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    pool = LanePool(1, "test-lane")
    release = threading.Event()
    ran: list[str] = []
    first = pool.submit(release.wait, WAIT_S)
    second = pool.submit(ran.append, "second")
    third = pool.submit(ran.append, "third")
    assert second.cancel()
    release.set()
    wait([first, third], WAIT_S)
    assert ran == ["third"] and second.cancelled()


class Stop(BaseException):
    pass


@pytest.mark.parametrize("error", [ValueError("bad"), Stop()])
def test_a_calls_error_is_its_futures_and_the_thread_goes_on(error: BaseException) -> None:
    pool = LanePool(1, "test-lane")

    def fail() -> None:
        raise error

    failed: Future[None] = pool.submit(fail)
    assert failed.exception(WAIT_S) is error
    assert pool.submit(lambda x: x * 2, 21).result(WAIT_S) == 42


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
from fermix_memory.entrypoints.api.lane_pool import LanePool

go = threading.Event()

def work(n):
    go.wait()
    with open({str(ran)!r}, "a") as f:
        f.write(f"{{n}}\\n")

pool = LanePool(2, "exit")
futures = [pool.submit(work, n) for n in range(6)]
go.set()  # the main thread returns at once: the interpreter shuts down with calls waiting
""")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert sorted(ran.read_text().split()) == [str(n) for n in range(6)], done.stderr
