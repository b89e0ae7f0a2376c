"""The memory tools and scheduled jobs through the embedding API (what a host calls)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fermix_memory import MemorySystem


@pytest.fixture
def memory(tmp_path: Path):  # type: ignore[no-untyped-def]
    with MemorySystem.open(tmp_path / "home") as system:
        yield system


def test_tool_definitions_in_both_styles() -> None:
    openai = MemorySystem.tool_definitions("openai")
    anthropic = MemorySystem.tool_definitions("anthropic")
    assert [t["function"]["name"] for t in openai] == [t["name"] for t in anthropic]
    assert {t["name"] for t in anthropic} == {"memory_store", "memory_recall", "memory_sources_list"}
    json.dumps(openai), json.dumps(anthropic)
    with pytest.raises(ValueError):
        MemorySystem.tool_definitions("gemini")


def test_store_and_recall_in_a_conversation(memory: MemorySystem) -> None:
    stored = memory.dispatch_tool("memory_store", {"key": "parking", "value": "Level 3, spot 42"},
                                  agent_id="ada", owner_id="alice", conversation="telegram:1")
    assert stored["ok"] and stored["status"] == "added"
    found = memory.dispatch_tool("memory_recall", json.dumps({"key": "parking"}), agent_id="ada",
                                 owner_id="alice", conversation="telegram:1")
    assert [m["value"] for m in found["memories"]] == ["Level 3, spot 42"]
    other = memory.dispatch_tool("memory_recall", {"query": "parking", "scope": "all"}, agent_id="ada",
                                 owner_id="bob", conversation="telegram:1")
    assert other == {"ok": True, "memories": [], "messages": []}
    # memory_store rows never render into the prompt files.
    assert not memory.prompt_file("ada", "alice", "memory_md").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "context"),
    [
        ("memory_store", {"key": 1, "value": "x"}, {}),
        ("memory_store", {"key": "k", "value": "x" * 1_000_000}, {}),
        ("memory_store", "{not json", {}),
        ("memory_forget", {}, {}),
        ("memory_recall", {"query": "x", "limit": "ten"}, {}),
        ("memory_recall", {"query": "x"}, {"agent_id": ""}),
        ("memory_recall", {"query": "x"}, {"conversation": "no-colon"}),
    ],
)
def test_bad_tool_calls_are_tool_errors(memory: MemorySystem, name: str, arguments: object,
                                         context: dict[str, str]) -> None:
    call = {"agent_id": "ada", "owner_id": "alice", "conversation": "telegram:1", **context}
    result = memory.dispatch_tool(name, arguments, **call)
    assert result["ok"] is False and result["error"] and result["code"]
    json.dumps(result)


def test_a_job_run_sees_only_its_own_rows(memory: MemorySystem) -> None:
    memory.write_memory({"op": "add", "category": "identity", "key": "name", "value": "Alice"},
                        agent_id="ada", owner_id="alice", writer="reviewer", trust="operator")
    memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                          sender="alice", content="digest please")
    job = memory.save_job(job_id="daily", agent_id="ada", owner_id="alice", name="Daily digest",
                          schedule="0 8 * * *", prompt="Summarise my day")
    other = memory.save_job(job_id="weekly", agent_id="ada", owner_id="alice", name="Weekly",
                            schedule="0 9 * * 1", prompt="Summarise my week")
    for source, value in ((job.memory_source_id, "daily digest sent"), (other.memory_source_id, "weekly digest")):
        assert memory.dispatch_tool("memory_store", {"key": "last_digest", "value": value}, agent_id="ada",
                                    owner_id="alice", job_source_id=source)["ok"]
    seen = memory.dispatch_tool("memory_recall", {"query": "digest Alice name", "scope": "all", "source": "all"},
                                agent_id="ada", owner_id="alice", job_source_id=job.memory_source_id)
    assert [m["value"] for m in seen["memories"]] == ["daily digest sent"]
    assert seen["messages"] == []
    run = memory.record_job_run(run_id="run-1", job_id="daily", status="succeeded",
                                started_at=datetime(2026, 11, 30, 8, tzinfo=UTC))
    assert run.status == "succeeded"
    sources = memory.dispatch_tool("memory_sources_list", {}, agent_id="ada", owner_id="alice",
                                   conversation="telegram:1")
    assert {s["id"] for s in sources["sources"]} >= {job.memory_source_id, other.memory_source_id}
    assert memory.verify().ok


def test_racing_first_saves_of_one_job_id_cannot_both_win(memory: MemorySystem) -> None:
    import threading

    from fermix_memory.application.jobs import IdentifierInUse

    for round_ in range(20):
        barrier = threading.Barrier(2)
        outcomes: dict[str, str] = {}

        def save(owner: str, job_id: str = f"race-{round_}", barrier: threading.Barrier = barrier,
                 outcomes: dict[str, str] = outcomes) -> None:
            barrier.wait()
            try:
                memory.save_job(job_id=job_id, agent_id="ada", owner_id=owner, name="n", schedule="@daily",
                                prompt="p")
                outcomes[owner] = "saved"
            except IdentifierInUse:
                outcomes[owner] = "refused"

        threads = [threading.Thread(target=save, args=(owner,)) for owner in ("alice", "bob")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes.values()) == ["refused", "saved"], outcomes
    assert memory.verify().ok
