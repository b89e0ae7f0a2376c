"""A long fact from the reviewer is kept: stored whole up to 2,000 characters, shown cut in the
prompt files, found by recall. The reviewer runs against a real model server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.domain import events as ev
from tests.integration.loopback_models import LoopbackModelServer
from tests.manual_clock import TestClock

AGENT, OWNER, CONV = "ada", "alice", "telegram:1"
KEY_ENV = "FERMIX_TEST_LONG_FACT_KEY"
LONG_FACT = (
    "Works as the lead engineer of the municipal water utility in Porto, where she is migrating forty "
    "years of paper maintenance records into a geographic information system, coordinating three field "
    "crews, a vendor in Braga and the regional environment agency, and reporting monthly to a council "
    "committee that meets in the old customs house by the riverside quay"
)


def reviewer_answers(server: LoopbackModelServer, *operations: dict[str, object]) -> None:
    server.script(server.ok(json.dumps({"operations": list(operations)})))


@pytest.fixture
def memory(tmp_path: Path, openai_server: LoopbackModelServer, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[MemorySystem]:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    config = {"fermix_core": {"providers": [{"name": "primary", "kind": "openai", "model": "m1",
                                             "base_url": openai_server.base_url, "api_key_env": KEY_ENV}]}}
    with MemorySystem.open(tmp_path / "home", config=config, clock=TestClock()) as opened:
        yield opened


def review(memory: MemorySystem, text: str) -> tuple[str, list[str]]:
    memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", sender=OWNER,
                          content=text, trust="operator")
    [result] = memory.review_now(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    return result.status, [o.status for o in result.outcomes]


def test_a_350_character_reviewer_fact_is_stored_whole_shown_cut_and_recalled_by_its_tail(
        memory: MemorySystem, openai_server: LoopbackModelServer) -> None:
    assert 300 < len(LONG_FACT) <= 400
    reviewer_answers(openai_server, {"op": "add", "category": "context", "key": "work", "value": LONG_FACT})
    assert review(memory, "Let me tell you about my work at the water utility") == ("completed", ["added"])

    [row] = memory.memories(agent_id=AGENT, owner_id=OWNER)
    assert row.value == LONG_FACT
    assert not [e for e in (r.event for r in memory.events()) if isinstance(e, ev.OperationRefused)]

    text = memory.prompt_file(AGENT, OWNER, "memory_md").read_text(encoding="utf-8")
    [bullet] = [line for line in text.splitlines() if line.startswith("- work: ")]
    shown = bullet.removeprefix("- work: ")
    assert len(shown) <= 200 and shown.endswith("…")
    kept = shown.removesuffix("…")
    assert LONG_FACT.startswith(kept) and LONG_FACT[len(kept)] == " "  # cut between two words
    assert len(kept) > 150
    assert shown in memory.compose_prompt(AGENT, OWNER, CONV)[0]["content"]

    for tail_word in ("customs", "riverside quay"):
        assert tail_word not in text
        hits = memory.recall(tail_word, agent_id=AGENT, owner_id=OWNER, conversation=CONV)
        assert [h.memory.value for h in hits.memories] == [LONG_FACT]


def test_a_reviewer_fact_over_the_stored_bound_is_kept_cut_with_a_marker(
        memory: MemorySystem, openai_server: LoopbackModelServer) -> None:
    huge = " ".join([LONG_FACT] * 8)
    assert len(huge) > 2000
    reviewer_answers(openai_server, {"op": "add", "category": "context", "key": "work", "value": huge})
    assert review(memory, "Here is everything about my work") == ("completed", ["added"])
    [row] = memory.memories(agent_id=AGENT, owner_id=OWNER)
    assert len(row.value) <= 2000 and row.value.endswith("…") and huge.startswith(row.value[:-1])
    assert huge[len(row.value) - 1] == " "
    # Another writer is told, not silently cut: the refusal is its answer and is recorded.
    [out] = memory.write_memory({"op": "add", "category": "context", "key": "work2", "value": huge},
                                agent_id=AGENT, owner_id=OWNER, trust="operator")
    assert (out.status, out.reason) == ("refused", "value_too_long")
