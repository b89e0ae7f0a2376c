"""Tool calls, tool results and senders through the embedding API: stored with their ids and
sent back the way each model API requires (ADR-0022)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.message_input import InvalidMessage
from tests.request_rules import check_anthropic, check_openai

AGENT, CONV = "ada", "telegram:-100"
OPENAI_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as opened:
        yield opened


def turns(prompt: Any) -> Any:
    return [m for m in prompt if m["role"] != "system"] if isinstance(prompt, list) else prompt[1]


def weather_turn(memory: MemorySystem, *, tool_calls: Any = (OPENAI_CALL,)) -> None:
    s = memory.session(agent_id=AGENT, owner_id="alice", conversation=CONV)
    s.append("user", "Weather in Paris?")
    s.append("assistant", "", tool_calls=list(tool_calls))
    s.append("tool", '{"temp": 21}', tool_call_id="call_1")
    s.append("assistant", "It is 21 degrees.  ")


def test_a_tool_call_and_its_result_are_sent_as_openai_requires(memory: MemorySystem) -> None:
    weather_turn(memory)
    prompt = memory.compose_prompt(AGENT, "alice", CONV)
    check_openai(prompt)
    assert turns(prompt) == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [OPENAI_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "It is 21 degrees.  "},
    ]


def test_a_tool_call_and_its_result_are_sent_as_anthropic_requires(memory: MemorySystem) -> None:
    # An Anthropic host records the model's tool_use block as it came.
    weather_turn(memory, tool_calls=[{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                      "input": {"city": "Paris"}},
                                     {"id": "call_1", "name": "get_weather", "arguments": {"city": "Lyon"}}])
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="user", sender="alice",
                          content="Thanks!")
    prompt = memory.compose_prompt(AGENT, "alice", CONV, style="anthropic")
    check_anthropic(prompt)
    assert prompt[1] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            # toolu_1 got no result: shown as text, so the request stays valid
            {"type": "text", "text": '[called tool get_weather (id toolu_1) with {"city":"Paris"}]'},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Lyon"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": '{"temp": 21}'}]},
        {"role": "assistant", "content": "It is 21 degrees."},
        {"role": "user", "content": "Thanks!"},
    ]


def test_tool_results_without_their_call_and_empty_replies_still_make_valid_requests(memory: MemorySystem) -> None:
    s = memory.session(agent_id=AGENT, owner_id="alice", conversation=CONV)
    s.append("user", "Look it up")
    s.append("tool", "42 results")                          # recorded before ids were: no tool_call_id
    s.append("tool", "", tool_call_id="call_gone")          # its call compacted away
    s.append("assistant", "")                               # an empty reply
    s.append("assistant", "Found 42.")
    openai = memory.compose_prompt(AGENT, "alice", CONV)
    system, anthropic = memory.compose_prompt(AGENT, "alice", CONV, style="anthropic")
    check_openai(openai)
    check_anthropic((system, anthropic))
    assert turns(openai) == [
        {"role": "user", "content": "Look it up"},
        {"role": "user", "content": "[tool result] 42 results"},
        {"role": "user", "content": "[result of tool call call_gone] (no output)"},
        {"role": "assistant", "content": "Found 42."},
    ]
    assert anthropic == [
        {"role": "user", "content": [{"type": "text", "text": "Look it up"},
                                     {"type": "text", "text": "[tool result] 42 results"},
                                     {"type": "text", "text": "[result of tool call call_gone] (no output)"}]},
        {"role": "assistant", "content": "Found 42."},
    ]


def test_tool_calls_survive_export_and_import(memory: MemorySystem, tmp_path: Path) -> None:
    weather_turn(memory)
    lines = list(memory.export_history())
    with MemorySystem.open(tmp_path / "other") as other:
        other.import_history(lines)
        assert other.compose_prompt(AGENT, "alice", CONV) == memory.compose_prompt(AGENT, "alice", CONV)
    assert memory.verify().ok


@pytest.mark.parametrize(("role", "fields", "says"), [
    ("user", {"tool_calls": [OPENAI_CALL]}, "only an assistant message can carry tool_calls"),
    ("assistant", {"tool_call_id": "call_1"}, "only a tool message can carry a tool_call_id"),
    ("assistant", {"tool_calls": []}, "non-empty list"),
    ("assistant", {"tool_calls": [{"id": "", "name": "f"}]}, "id must not be empty"),
    ("assistant", {"tool_calls": [OPENAI_CALL, OPENAI_CALL]}, "different ids"),
    ("assistant", {"tool_calls": [{"id": "a", "name": "f", "arguments": 3}]}, "JSON object or JSON text"),
    ("assistant", {"tool_calls": [{"id": "a", "name": "f", "arguments": {"x": {1, 2}}}]}, "JSON-serialisable"),
    ("assistant", {"tool_calls": "call_1"}, "non-empty list"),
    ("tool", {"tool_call_id": 7}, "tool_call_id must be text"),
    ("tool", {"metadata": {"tool_call_id": ["x"]}}, "tool_call_id must be text"),
])
def test_malformed_tool_calls_are_typed_errors(memory: MemorySystem, role: str, fields: dict[str, Any],
                                               says: str) -> None:
    with pytest.raises(InvalidMessage, match=says):
        memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role=role, content="x",
                              **fields)
    assert memory.history(AGENT, CONV) == []


def test_a_group_chat_says_who_wrote_each_user_turn(memory: MemorySystem) -> None:
    for owner, sender, text in (("alice", "alice", "I'll bring bread"), ("bob", "bob", "I'll bring wine"),
                                ("carol", "carol smith", "Cheese from me"), ("bob", "bob", "And glasses")):
        memory.append_message(agent_id=AGENT, owner_id=owner, conversation=CONV, role="user", sender=sender,
                              content=text)
    memory.append_message(agent_id=AGENT, owner_id="bob", conversation=CONV, role="assistant", sender=AGENT,
                          content="Sounds like a picnic.")
    assert turns(memory.compose_prompt(AGENT, "alice", CONV)) == [
        {"role": "user", "content": "I'll bring bread", "name": "alice"},
        {"role": "user", "content": "I'll bring wine", "name": "bob"},
        {"role": "user", "content": "[carol smith] Cheese from me"},   # no valid name: a prefix
        {"role": "user", "content": "And glasses", "name": "bob"},
        {"role": "assistant", "content": "Sounds like a picnic."},
    ]
    assert memory.compose_prompt(AGENT, "alice", CONV, style="anthropic")[1] == [
        {"role": "user", "content": [{"type": "text", "text": "[alice] I'll bring bread"},
                                     {"type": "text", "text": "[bob] I'll bring wine"},
                                     {"type": "text", "text": "[carol smith] Cheese from me"},
                                     {"type": "text", "text": "[bob] And glasses"}]},
        {"role": "assistant", "content": "Sounds like a picnic."},
    ]


def test_one_sender_keeps_plain_user_turns(memory: MemorySystem) -> None:
    s = memory.session(agent_id=AGENT, owner_id="alice", conversation=CONV)
    s.append("user", "Hello")
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="user", content="Again")
    assert turns(memory.compose_prompt(AGENT, "alice", CONV)) == [{"role": "user", "content": "Hello"},
                                                                 {"role": "user", "content": "Again"}]
