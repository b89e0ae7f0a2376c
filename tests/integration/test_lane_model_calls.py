"""Calls that wait on a model never hold up the lane's reads and appends (ADR-0055).

A loopback model server holds every answer until released; while five ``review_now`` calls of an
``AsyncMemorySystem`` wait on it (more than the lane has threads), an append and a
``compose_prompt`` still complete. Then the server lets go and every review finishes.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from fermix_memory import AsyncMemorySystem
from fermix_memory.entrypoints.api import lane
from fermix_memory.entrypoints.api.model_bound import is_model_bound
from fermix_memory.entrypoints.api.session import Session
from tests.integration.loopback_models import LoopbackModelServer, RecordedRequest, Reply

AGENT = "ada"
CALLS = lane.WORKERS + 1
WAIT_S = 60.0  # how long a condition may take to come true on a loaded machine


def config(server: LoopbackModelServer) -> dict[str, Any]:
    return {"fermix_core": {
        "providers": [{"name": "held", "kind": "openai", "base_url": server.base_url, "model": "m"}],
        "timeouts": {"llm_buffered_s": 3 * WAIT_S},
    }}


async def until(condition: Any, what: str) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(poll(), WAIT_S)
    except TimeoutError:
        raise AssertionError(f"still not true after {WAIT_S} s: {what}") from None


def test_reads_and_appends_complete_while_model_calls_hold_every_lane_thread(
        tmp_path: Path, openai_server: LoopbackModelServer) -> None:
    release = threading.Event()
    held = []

    def hold(request: RecordedRequest) -> Reply:
        held.append(request)
        release.wait(2 * WAIT_S)
        return openai_server.ok("Nothing to save.")

    openai_server.always(hold)

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", config=config(openai_server)) as memory:
            sessions = [memory.session(agent_id=AGENT, owner_id=f"user{n}", conversation=f"chat:{n}")
                        for n in range(CALLS)]
            for s in sessions:
                await s.append("user", "I live in Paris")
            reviews = [asyncio.ensure_future(memory.review_now(agent_id=AGENT, owner_id=s.owner_id))
                       for s in sessions]
            try:
                await until(lambda: len(held) >= lane.WORKERS, "the model calls fill as many threads as the lane has")
                appended = await asyncio.wait_for(sessions[0].append("assistant", "Noted"), WAIT_S)
                prompt = await asyncio.wait_for(sessions[0].compose_prompt(system="You are Ada."), WAIT_S)
                assert not release.is_set() and all(not r.done() for r in reviews)
                assert appended > 0 and prompt[-1]["content"] == "Noted"
            finally:
                release.set()
            results = await asyncio.wait_for(asyncio.gather(*reviews), WAIT_S)
            assert [[r.status for r in result] for result in results] == [["completed"]] * CALLS
            assert len(held) == CALLS

    asyncio.run(main())


def test_the_calls_that_may_wait_on_a_model_are_marked() -> None:
    from fermix_memory import MemorySystem

    for method in (MemorySystem.review_now, MemorySystem.compact, MemorySystem.before_turn,
                   MemorySystem.handle_command, MemorySystem.fill_vectors, MemorySystem.close,
                   Session.before_turn, Session.handle_command):
        assert is_model_bound(method), method.__name__
    assert not is_model_bound(MemorySystem.append_message) and not is_model_bound(Session.compose_prompt)
