"""A lone client's short calls run on the event loop, clients taking turns share the worker lane;
either way a turn is the Python API's (ADR-0073, "The cost of a request")."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.server.app import build_app
from fermix_memory.entrypoints.server.operation import Waiting
from tests.integration.held_store import memory_on_held_store, wait_for_locks_past_any_hold, write_lock_held
from tests.server.conftest import ADA, TOKENS
from tests.waits import HANG_GUARD_S, until

TURN = {"owner_id": "alice", "conversation": "telegram:42"}


def test_only_a_lone_client_with_nothing_on_the_lane_runs_on_the_loop() -> None:
    waiting = Waiting()
    one, other = {"client": ("127.0.0.1", 50001)}, {"client": ("127.0.0.1", 50002)}
    assert not waiting.alone(one)  # a connection's first request: nothing known yet
    assert waiting.alone(one) and waiting.alone(one)
    assert not waiting.alone(other) and not waiting.alone(one)  # two clients taking turns
    assert waiting.alone(one)
    waiting.count = 1  # a call of the server waits on the lane
    assert not waiting.alone(one)
    assert not Waiting().alone({}) and not Waiting().alone({})  # no client address: never


def test_turns_on_the_loop_and_on_the_lane_are_the_python_apis(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        app = build_app(AsyncMemorySystem(memory), TOKENS)
        first, second = (TestClient(app, client=("127.0.0.1", port)) for port in (50001, 50002))
        ids = []
        # One client alone (its calls on the loop), then two taking turns (theirs on the lane).
        for client in (first, first, first, second, first, second):
            said = {**TURN, "role": "user", "content": f"turn {len(ids)}"}
            sent = client.post("/v1/messages", headers=ADA, json=said)
            assert sent.status_code == 201
            ids.append(sent.json()["id"])
            prompt = client.post("/v1/prompt", headers=ADA, json=TURN)
            assert prompt.json()["messages"] == memory.compose_prompt("ada", "alice", "telegram:42")
        assert ids == sorted(ids) and len(set(ids)) == 6
        refused = first.post("/v1/messages", headers=ADA, json={**TURN, "role": "wizard", "content": "hi"})
        assert refused.status_code == 400 and "error" in refused.json()  # a typed error, on the loop too
        assert [m.content for m in memory.history("ada", "telegram:42")] == [f"turn {n}" for n in range(6)]


def test_turns_in_one_request_on_the_loop_and_on_the_lane_are_the_python_apis(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        app = build_app(AsyncMemorySystem(memory), TOKENS)
        first, second = (TestClient(app, client=("127.0.0.1", port)) for port in (50001, 50002))
        ids = []
        # One client alone (the append and the prompt on the loop), then two taking turns (both
        # calls of a turn on the lane, in one call there).
        for client in (first, first, first, second, first, second):
            said = {**TURN, "role": "user", "content": f"turn {len(ids)}", "prompt": {"style": "anthropic"}}
            sent = client.post("/v1/messages", headers=ADA, json=said)
            assert sent.status_code == 201, sent.text
            ids.append(sent.json()["id"])
            system, messages = memory.compose_prompt("ada", "alice", "telegram:42", style="anthropic")
            assert sent.json()["prompt"] == {"system": system, "messages": messages}
        assert ids == sorted(ids) and len(set(ids)) == 6
        refused = first.post("/v1/messages", headers=ADA, json={**TURN, "role": "wizard", "content": "hi",
                                                                "prompt": {}})
        assert refused.status_code == 400 and "error" in refused.json()  # a typed error, from the lane too
        assert [m.content for m in memory.history("ada", "telegram:42")] == [f"turn {n}" for n in range(6)]


def test_a_lone_clients_append_that_would_wait_for_the_write_lock_goes_to_the_lane(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ADR-0110: the lock held by another connection (an operator's command on the same home),
    a lone client's append is not made on the loop, where it would hold every other request
    (here, until the holder gives up): it waits on the lane, and the loop answers a prompt."""
    home = tmp_path / "home"
    wait_for_locks_past_any_hold(monkeypatch)
    with memory_on_held_store(home) as (memory, store):
        app = build_app(AsyncMemorySystem(memory), TOKENS)
        client = TestClient(app, client=("127.0.0.1", 50001))
        for n in range(3):  # a lone client, its owner known here
            assert client.post("/v1/messages", headers=ADA, json={**TURN, "role": "user", "content": f"{n}"}).is_success
        written = store.at_once_written
        assert client.post("/v1/messages", headers=ADA, json={**TURN, "role": "user", "content": "3"}).is_success
        assert store.at_once_written == written + 1  # on the loop, at once
        answered: list[Any] = []
        with write_lock_held(home / "memory.db") as holder:
            refused = store.at_once_refused
            sender = threading.Thread(target=lambda: answered.append(client.post(
                "/v1/messages", headers=ADA, json={**TURN, "role": "user", "content": "while the lock was held"})))
            sender.start()
            until(lambda: store.at_once_refused > refused, "the append tried at once, and sent to the lane")
            prompt = client.post("/v1/prompt", headers=ADA, json=TURN)
            assert prompt.status_code == 200 and not answered and not holder.gave_up
        sender.join(HANG_GUARD_S)
        assert not holder.gave_up, "the loop waited for the lock"
        assert answered[0].status_code == 201
        assert [m.content for m in memory.history("ada", "telegram:42")] == ["0", "1", "2", "3",
                                                                             "while the lock was held"]
