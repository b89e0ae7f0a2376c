""""Why does it believe this?": the events and source messages behind a memory row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fermix_memory import MemorySystem, NotFound


def test_a_reviewed_fact_names_the_messages_it_came_from(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path) as memory:
        conversation = "telegram:7"
        memory.append_message(agent_id="ada", owner_id="alice", conversation=conversation, role="user",
                              sender="alice", content="I live in Paris.")
        memory.append_message(agent_id="ada", owner_id="alice", conversation=conversation, role="assistant",
                              sender="ada", content="Lovely city.")
        memory.review_now()
        memory.append_message(agent_id="ada", owner_id="alice", conversation=conversation, role="user",
                              sender="alice", content="I moved to Berlin.")
        memory.append_message(agent_id="bob", owner_id="bob", conversation=conversation, role="user",
                              sender="bob", content="I live in Rome.")
        memory.review_now(agent_id="ada")
        [row] = [m for m in memory.memories(agent_id="ada") if m.key == "home_city"]
        why = memory.explain(row.id)
    assert why["memory"]["value"] == "Berlin"
    added, replaced = why["events"]
    assert added["kind"] == "memory.added" and added["value"] == "Paris"
    assert [m["content"] for m in added["source_messages"]] == ["I live in Paris."]
    assert replaced["kind"] == "memory.replaced" and replaced["previous_value"] == "Paris"
    assert replaced["by"]["source_type"] == "reviewer" and replaced["by"]["trust"] == "guest"
    # Only what that review read: the new message, not the earlier one, nor another owner's.
    assert [m["content"] for m in replaced["source_messages"]] == ["I moved to Berlin."]


def test_an_operator_write_and_an_unknown_row(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path) as memory:
        [outcome] = memory.write_memory({"op": "add", "category": "goal", "key": "run", "value": "Run a marathon"},
                                        agent_id="ada", owner_id="alice", source_type="cli", reason="set by hand",
                                        trust="operator")
        why = memory.explain(outcome.memory_id)
        assert why["events"][0]["by"]["source_type"] == "cli"
        assert why["events"][0]["by"]["reason"] == "set by hand"
        assert why["events"][0]["source_messages"] == []
        with pytest.raises(NotFound):
            memory.explain(10**6)


def test_explain_returns_json_ready_data(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path) as memory:
        [outcome] = memory.write_memory({"op": "add", "category": "goal", "key": "run", "value": "Run a marathon"},
                                        agent_id="ada", owner_id="alice", trust="operator")
        why = memory.explain(outcome.memory_id)
    assert json.loads(json.dumps(why)) == why
    assert why["memory"]["value"] == "Run a marathon" and why["memory"]["category"] == "goal"
    assert why["memory"]["id"] == outcome.memory_id
