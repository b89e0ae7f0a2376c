"""The session API and the shapes of compose_prompt (ADR-0017)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import fermix_memory
from fermix_memory import CommandResult, InvalidArgument, MemorySystem, Session
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.fence import CLOSE_TAG, OPEN_TAG, SUMMARY_OPEN_TAG
from fermix_memory.domain.values import Trust

AGENT, OWNER, CONV = "ada", "alice", "telegram:42"
FILLER = " ".join(["we also talked about the harbour, the tides and the small wooden boats"] * 3)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as opened:  # no provider: the offline rules model
        yield opened


def rule(memory: MemorySystem) -> None:
    memory.write_memory({"op": "add", "category": "directive", "key": "tone", "value": "Answer briefly"},
                        agent_id=AGENT, owner_id=OWNER, trust="operator")


def test_a_session_names_agent_owner_and_conversation_once(memory: MemorySystem) -> None:
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV, trust="guest")
    assert (s.agent_id, s.owner_id, str(s.conversation), s.trust) == (AGENT, OWNER, CONV, Trust.GUEST)
    asked = s.append("user", "I keep my kayak at the north pier")
    s.append("assistant", "Noted.")
    [question, answer] = s.history()
    assert question.id == asked and question.sender == OWNER and question.trust is Trust.GUEST
    assert answer.sender == AGENT and answer.role.value == "assistant"
    assert [h.message.id for h in s.recall("kayak", source="history").messages] == [asked]
    stored = s.dispatch_tool("memory_store", {"key": "boat", "value": "A red kayak"})
    assert stored["ok"], stored
    assert [h.memory.value for h in s.recall(key="boat").memories] == ["A red kayak"]
    assert s.before_turn().compacted is False
    review = s.after_turn(peak_prompt_tokens=100)
    memory.wait_for_background()
    assert review.done()
    assert s.handle_command("hello") is None
    refused = s.handle_command("/new")
    assert isinstance(refused, CommandResult) and not refused.ok, "a guest session cannot clear the window"
    assert len(s.history()) == 2


def test_a_session_refuses_bad_values_when_it_is_made(memory: MemorySystem) -> None:
    with pytest.raises(InvalidIdentifier):
        memory.session(agent_id="", owner_id=OWNER, conversation=CONV)
    with pytest.raises(fermix_memory.DomainError):
        memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV, trust="root")
    with pytest.raises(fermix_memory.DomainError):
        memory.session(agent_id=AGENT, owner_id=OWNER, conversation=42)


def test_an_operator_session_runs_chat_commands(memory: MemorySystem) -> None:
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV, trust="operator")
    s.append("user", "hello")
    result = s.handle_command("/new")
    assert result is not None and result.ok and result.command == "/new"
    assert s.history() == []


def test_compose_prompt_merges_the_host_system_prompt_into_one_system_message(memory: MemorySystem) -> None:
    rule(memory)
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    s.append("user", "Hi")
    messages = s.compose_prompt(system="You are Ada, a sailing assistant.")
    assert isinstance(messages, list)
    [system] = [m for m in messages if m["role"] == "system"]
    assert system is messages[0]
    assert system["content"].startswith("You are Ada, a sailing assistant.\n\n" + OPEN_TAG)
    assert system["content"].count(CLOSE_TAG) == 1 and "Answer briefly" in system["content"]
    assert messages[1:] == [{"role": "user", "content": "Hi"}]
    flat = memory.compose_prompt(AGENT, OWNER, CONV, system="You are Ada, a sailing assistant.")
    assert flat == messages


def test_compose_prompt_in_the_anthropic_shape_returns_system_and_messages(memory: MemorySystem) -> None:
    rule(memory)
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    s.append("user", "Hi")
    s.append("assistant", "Hello!")
    system, messages = s.compose_prompt(system="You are Ada.", style="anthropic")
    assert system.startswith("You are Ada.") and "Answer briefly" in system
    assert messages == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    assert json.loads(json.dumps([system, messages])) == [system, messages]
    with pytest.raises(fermix_memory.DomainError):
        s.compose_prompt(style="gemini")


def test_compose_prompt_never_starts_the_window_with_an_orphan_assistant_message(memory: MemorySystem) -> None:
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV, trust="operator")
    for i in range(8):
        s.append("user", f"Point {i} about the trip. {FILLER}")
        s.append("assistant", f"Reply {i}: the ferry leaves at {i + 6} o'clock.")
    result = s.handle_command("/compact")
    assert result is not None and result.ok, result
    window = s.history()
    assert window[0].kind == "checkpoint" and window[1].role.value == "assistant", "compaction left an orphan"
    for style in ("openai", "anthropic"):
        prompt = s.compose_prompt(style=style)
        system, messages = prompt if isinstance(prompt, tuple) else (prompt[0]["content"], prompt[1:])
        assert messages[0]["role"] == "user", "the window starts with a user message"
        assert all(m["role"] != "system" for m in messages), "one system message only"
        assert system.count(SUMMARY_OPEN_TAG) == 1, "the checkpoint and the orphan reply share one fence"
        kept = [m.content for m in window[1:]]
        orphans = kept[: next(i for i, m in enumerate(window[1:]) if m.role.value == "user")]
        assert all(o in system for o in orphans), "an orphan reply is kept, inside the summary"


def test_write_memory_and_append_message_share_the_guest_trust_default(memory: MemorySystem) -> None:
    mid = memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", content="hi")
    assert memory.history(AGENT, CONV)[0].trust is Trust.GUEST and mid > 0
    [out] = memory.write_memory({"op": "add", "category": "directive", "key": "tone", "value": "Be rude"},
                                agent_id=AGENT, owner_id=OWNER)
    assert out.status == "refused" and out.reason == "guest_directive", "a directive needs trust='operator'"
    [out] = memory.write_memory({"op": "add", "category": "goal", "key": "swim", "value": "Swim a mile"},
                                agent_id=AGENT, owner_id=OWNER)
    assert out.status == "added"
    assert memory.memory(out.memory_id).source_type == "api"


def test_chat_model_types_are_exported_at_the_top_level() -> None:
    for name in ("ChatModel", "ChatRequest", "ChatResponse", "ChatMessage", "Session", "CommandResult"):
        assert name in fermix_memory.__all__ and hasattr(fermix_memory, name)
    request = fermix_memory.ChatRequest(messages=(fermix_memory.ChatMessage(role="user", content="hi"),))
    assert request.messages[0].content == "hi"
    assert Session.__module__ == "fermix_memory.entrypoints.api.session"


def test_host_input_names_the_bad_argument(memory: MemorySystem) -> None:
    with pytest.raises(InvalidIdentifier, match="owner_id"):
        memory.before_turn(agent_id=AGENT, owner_id="", conversation=CONV)
    with pytest.raises(fermix_memory.InvalidNumber, match="peak_prompt_tokens"):
        memory.after_turn(agent_id=AGENT, owner_id=OWNER, conversation=CONV, peak_prompt_tokens=-1)
    with pytest.raises(InvalidArgument, match="system"):
        memory.compose_prompt(AGENT, OWNER, CONV, system="\x00")
