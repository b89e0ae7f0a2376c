"""Provenance per fact: a review's operation names the messages it came from, checked against the
messages that review was shown; ``explain`` and ``fermix memory show`` list only those."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fermix_memory.domain import events as ev
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from tests.cli_runner import run_cli
from tests.integration.loopback_models import LoopbackModelServer, RecordedRequest, Reply
from tests.integration.test_reviewer import anthropic_entry, make_config, openai_entry, review_input

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER, OTHER, CONV = "ada", "alice", "bob", "telegram:1"
BOB_SECRET = "BOB-PRIVATE-words about his doctor"


def say(memory: MemorySystem, text: str, *, owner: str = OWNER) -> int:
    return memory.append_message(agent_id=AGENT, owner_id=owner, conversation=CONV, role="user", content=text,
                                 sender=owner, trust="guest")


def answering(server: LoopbackModelServer, build: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
              ) -> Callable[[RecordedRequest], Reply]:
    """A reply built from the messages the review request showed (their ids)."""
    def reply(request: RecordedRequest) -> Reply:
        _, messages = review_input(request)
        return server.ok(json.dumps({"operations": build(messages)}))
    return reply


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_each_fact_names_only_its_own_messages_and_unknown_ids_are_dropped_and_recorded(
    tmp_path: Path, model_servers: Callable[[str], LoopbackModelServer], protocol: str,
) -> None:
    server = model_servers(protocol)
    entry = openai_entry(server) if protocol == "openai" else anthropic_entry(server)
    home = tmp_path / "home"
    with MemorySystem.open(home, config=make_config(entry)) as memory:
        bobs = say(memory, BOB_SECRET, owner=OTHER)
        paris = say(memory, "I live in Paris.")
        coffee = say(memory, "Flat whites every morning, please.")
        say(memory, "Thanks!")
        never = 10**9

        def build(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            assert [m["id"] for m in messages] == [paris, coffee, paris + 2]
            return [
                {"op": "add", "category": "identity", "key": "home_city", "value": "Lives in Paris",
                 "source_message_ids": [paris]},
                # An id the review never showed, and another owner's message: dropped, recorded.
                {"op": "add", "category": "preference", "key": "coffee", "value": "Prefers flat whites",
                 "source_message_ids": [coffee, never, bobs]},
                # Only unknown ids: the fact falls back to the review's batch.
                {"op": "add", "category": "goal", "key": "tea", "value": "Wants to try tea",
                 "source_message_ids": [bobs]},
            ]

        server.script(answering(server, build))
        [result] = memory.review_now(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
        assert (result.status, result.applied) == ("completed", 3)
        rows = {r.key: r for r in memory.memories(agent_id=AGENT, owner_id=OWNER)}
        assert rows["home_city"].source_message_id == paris and rows["coffee"].source_message_id == coffee

        added = {e.key: e for e in (item.event for item in memory.events()) if isinstance(e, ev.MemoryAdded)}
        assert added["home_city"].provenance.source_message_ids == (paris,)
        assert added["home_city"].provenance.dropped_source_message_ids == ()
        assert added["coffee"].provenance.source_message_ids == (coffee,)
        assert added["coffee"].provenance.dropped_source_message_ids == (never, bobs)
        assert added["tea"].provenance.source_message_ids is None
        assert added["tea"].provenance.dropped_source_message_ids == (bobs,)

        city = memory.explain(rows["home_city"].id)["events"][0]
        assert [m["content"] for m in city["source_messages"]] == ["I live in Paris."]
        assert city["by"]["source_message_ids"] == [paris] and "dropped_source_messages" not in city["by"]
        drink = memory.explain(rows["coffee"].id)["events"][0]
        assert [m["id"] for m in drink["source_messages"]] == [coffee]
        assert drink["by"]["dropped_source_messages"] == 2
        tea = memory.explain(rows["tea"].id)["events"][0]
        assert [m["id"] for m in tea["source_messages"]] == [paris, coffee, paris + 2]  # the batch, as before
        assert BOB_SECRET not in json.dumps([city, drink, tea])
        coffee_id, tea_id = rows["coffee"].id, rows["tea"].id
        assert memory.verify().ok

    shown = run_cli("memory", "show", str(coffee_id), home=home)
    assert shown.returncode == 0, shown.stderr
    assert "Flat whites every morning" in shown.stdout and "2 named sources left out" in shown.stdout
    assert "I live in Paris" not in shown.stdout and "review read" not in shown.stdout
    assert BOB_SECRET not in shown.stdout
    batch = run_cli("memory", "show", str(tea_id), home=home).stdout  # no id kept: the batch, as before
    assert "the review read 3 user messages" in batch and "1 named source left out" in batch
    assert BOB_SECRET not in batch
    as_json = run_cli("--json", "memory", "show", str(coffee_id), home=home)
    assert [m["id"] for m in json.loads(as_json.stdout)["events"][0]["source_messages"]] == [coffee]
    assert BOB_SECRET not in as_json.stdout


def test_the_offline_rules_extractor_names_the_exact_message(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        say(memory, "I live in Paris.")
        jazz = say(memory, "I love jazz.")
        say(memory, "Nice weather.")
        moved = say(memory, "Actually, I moved to Berlin.")
        memory.review_now(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
        rows = {r.key: r for r in memory.memories(agent_id=AGENT, owner_id=OWNER)}
        for key, source, text in (("home_city", moved, "Actually, I moved to Berlin."),
                                  ("prefers_jazz", jazz, "I love jazz.")):
            [added] = memory.explain(rows[key].id)["events"]
            assert [(m["id"], m["content"]) for m in added["source_messages"]] == [(source, text)]
