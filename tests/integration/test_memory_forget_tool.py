"""The model tool ``memory_forget``: off unless enabled; archives a row the caller may see, or,
when configured, erases it on an operator's request or on the owner's own request about their
own fact (and says which); every refusal is recorded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fermix_memory import AsyncMemorySystem, ConfigError, MemorySystem, NotFound
from fermix_memory.entrypoints.mcp.server import OneSpeaker, build_server

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

CONV = "telegram:alice"


def open_memory(home: Path, mode: str | None) -> MemorySystem:
    return MemorySystem.open(home, config=None if mode is None else {"fermix_core": {"memory": {"forget_tool": mode}}})


def rows(memory: MemorySystem) -> tuple[int, int]:
    """Alice's row (her profile) and Bob's row, both written by the operator."""
    [alice] = memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "Drinks Yerbamate"},
                                  agent_id="ada", owner_id="alice", trust="operator")
    [bob] = memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "Drinks Rooibos"},
                                agent_id="ada", owner_id="bob", trust="operator")
    assert alice.memory_id is not None and bob.memory_id is not None
    return alice.memory_id, bob.memory_id


def forget(memory: MemorySystem, memory_id: Any, *, owner: str = "alice", trust: str = "guest") -> dict[str, Any]:
    return memory.dispatch_tool("memory_forget", {"id": memory_id, "reason": "the user asked"}, agent_id="ada",
                                owner_id=owner, trust=trust, conversation=f"telegram:{owner}")  # type: ignore[arg-type]


def names(definitions: list[dict[str, Any]]) -> list[str]:
    return [d["function"]["name"] if "function" in d else d["name"] for d in definitions]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "home"


def test_the_tool_is_off_unless_the_host_enables_it(home: Path) -> None:
    with open_memory(home, None) as memory:
        alice, _ = rows(memory)
        for style in ("openai", "anthropic"):
            assert "memory_forget" not in names(memory.tool_definitions(style))
        assert "memory_forget" not in names(MemorySystem.tool_definitions())
        answer = forget(memory, alice)
        assert answer["ok"] is False and answer["code"] == "unknown_tool"
        assert memory.memory(alice).archived is False
    with open_memory(home, "archive") as memory:
        for style in ("openai", "anthropic"):
            assert names(memory.tool_definitions(style))[-1] == "memory_forget"
        assert "memory_forget" not in names(MemorySystem.tool_definitions())  # the class knows no settings
    with pytest.raises(ConfigError, match="forget_tool"):
        open_memory(home, "delete")


def test_a_guest_archives_a_row_it_recalled(home: Path) -> None:
    with open_memory(home, "archive") as memory:
        alice, _ = rows(memory)
        recalled = memory.dispatch_tool("memory_recall", {"query": "Yerbamate"}, agent_id="ada", owner_id="alice",
                                        conversation=CONV)
        [hit] = recalled["memories"]
        assert forget(memory, hit["id"]) == {"ok": True, "status": "archived", "id": alice}
        row = memory.memory(alice)
        assert row.archived
        assert forget(memory, alice)["status"] == "already_archived"
        assert "Yerbamate" not in memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        [archived] = [r for r in memory.events() if r.event.kind == "memory.archived"]
        assert archived.event.provenance.source_id == "memory_forget"
        assert archived.event.reason == "the user asked"


def test_a_guest_cannot_forget_another_owners_row_and_the_refusal_is_recorded(home: Path) -> None:
    with open_memory(home, "erase") as memory:
        _, bob = rows(memory)
        before = memory.memory(bob)
        for trust in ("guest", "operator"):  # an operator of Alice's conversation does not see Bob's rows either
            answer = forget(memory, bob, trust=trust)
            assert answer["ok"] is False and answer["code"] == "not_visible", answer
        assert memory.memory(bob) == before
        refusals = [r.event for r in memory.events() if r.event.kind == "memory.operation_refused"]
        assert [(e.op, e.memory_id, e.reason, e.provenance.owner_id, e.provenance.source_id)
                for e in refusals] == [("archive", bob, "not_visible", "alice", "memory_forget")] * 2
        assert forget(memory, 10**30)["code"] == "not_visible"  # an id beyond every row: refused too
        assert forget(memory, "7")["code"] == "invalid_type"  # not even a call: the model is told


def test_an_operators_call_erases_when_configured_and_a_guests_only_archives(home: Path, tmp_path: Path) -> None:
    with open_memory(home, "erase") as memory:
        alice, _ = rows(memory)
        [other] = memory.write_memory({"op": "add", "category": "context", "key": "tea", "value": "Likes Sencha"},
                                      agent_id="ada", owner_id="alice", trust="operator")
        # The agent's working knowledge (agent-scoped), not her own fact: a guest's call archives it.
        assert forget(memory, other.memory_id)["status"] == "archived"
        assert memory.memory(other.memory_id).archived  # type: ignore[arg-type]
        assert forget(memory, alice, trust="operator") == {"ok": True, "status": "erased", "id": alice}
        with pytest.raises(NotFound):
            memory.memory(alice)
        assert not any("Yerbamate" in repr(r.event) for r in memory.events())
        assert "Yerbamate" not in memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        assert memory.verify().ok
        assert memory.replay_into(tmp_path / "replayed")["identical"]


def test_the_async_api_and_the_mcp_server_offer_the_tool_when_enabled(home: Path) -> None:
    async def check() -> None:
        config = {"fermix_core": {"memory": {"forget_tool": "archive"}}}
        async with AsyncMemorySystem.open(home, config=config) as memory:
            assert "memory_forget" in names(memory.tool_definitions("anthropic"))

    anyio.run(check)
    with open_memory(home, "archive") as memory:
        alice, _ = rows(memory)
        session = memory.session(agent_id="ada", owner_id="alice", conversation=CONV)

        async def listed() -> None:
            async with Client(build_server(memory, OneSpeaker(session)), cache=None) as client:
                assert "memory_forget" in {t.name for t in (await client.list_tools()).tools}
                answer = await client.call_tool("memory_forget", {"id": alice})
                assert answer.structured_content is not None and answer.structured_content["status"] == "archived"

        anyio.run(listed)
        assert memory.memory(alice).archived


def test_the_owner_asking_about_their_own_fact_erases_it_and_is_told_so(home: Path, tmp_path: Path) -> None:
    with open_memory(home, "erase") as memory:
        alice, bob = rows(memory)
        stored = memory.dispatch_tool("memory_store", {"key": "gate", "value": "Gate code Pangolinkey"},
                                      agent_id="ada", owner_id="alice", conversation="telegram:alice")
        for row in (alice, stored["id"]):  # her profile, and a note of the conversation she is in
            assert forget(memory, row) == {"ok": True, "status": "erased", "id": row}
            with pytest.raises(NotFound):
                memory.memory(row)
        assert not any(word in repr(r.event) for r in memory.events() for word in ("Yerbamate", "Pangolinkey"))
        assert "Yerbamate" not in memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        assert memory.memory(bob).archived is False
        [record, _] = [r.event for r in memory.events() if r.event.kind == "memory.forgotten"]
        assert (record.memory_id, record.owner_id, record.provenance.source_id) == (alice, "alice", "memory_forget")
        verified = memory.verify()
        assert verified.ok, verified.problem
        assert memory.replay_into(tmp_path / "replayed")["identical"]


def test_every_other_request_only_archives(home: Path) -> None:
    with open_memory(home, "erase") as memory:
        job = memory.dispatch_tool("memory_store", {"key": "feed", "value": "Feed Kestrelnews"}, agent_id="ada",
                                   owner_id="alice", job_source_id="job:digest")
        ran = memory.dispatch_tool("memory_forget", {"id": job["id"]}, agent_id="ada", owner_id="alice",
                                   trust="operator", job_source_id="job:digest")
        assert ran == {"ok": True, "status": "archived", "id": job["id"]}  # a job run's row: restorable
        assert memory.memory(job["id"]).archived
    with open_memory(home, "archive") as memory:
        alice, _ = rows(memory)
        assert forget(memory, alice) == {"ok": True, "status": "archived", "id": alice}  # erasing is not enabled
        assert memory.memory(alice).archived
