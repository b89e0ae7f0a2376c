"""The first prompt of a conversation (read from the store, nothing of it cached) and every later
one are, byte for byte, the prompt composed the reference way: each stored message built by the
``Message`` constructor, the turns composed, then shaped for the API. For every kind of row a
window holds: senders, tool calls and results, notes, retractions, a cleared window, a compaction
checkpoint; on both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.composer import as_anthropic, as_openai, compose_prompt
from fermix_memory.application.message_input import conversation_key
from fermix_memory.application.ports import ResourceRevision
from fermix_memory.domain import events as ev
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey

pytestmark = pytest.mark.usefixtures("every_store")

AGENT = "ada"
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
FILLER = " ".join(["we also talked about the harbour, the tides and the small wooden boats"] * 3)


def say(memory: MemorySystem, conversation: str, role: str, content: str, *, owner: str = "alice",
        sender: str | None = None, **options: Any) -> None:
    memory.append_message(agent_id=AGENT, owner_id=owner, conversation=conversation, role=role, content=content,
                          sender=owner if sender is None else sender, **options)


def fill(memory: MemorySystem) -> list[str]:
    """One conversation per kind of window; returns their names."""
    for i in range(6):
        say(memory, "tg:plain", "user", f"message {i}: I live in Paris and I like tea")
        say(memory, "tg:plain", "assistant", f"Noted {i}.  ", sender=AGENT)
    say(memory, "tg:plain", "user", "   ")
    for owner, sender in (("alice", "alice"), ("bob", "Bob [the] Smith"), ("carol", ""), ("bob", "bob")):
        say(memory, "tg:senders", "user", f"hello from {owner}", owner=owner, sender=sender)
        say(memory, "tg:senders", "assistant", f"Hello {owner}.", sender=AGENT)
    say(memory, "tg:tools", "user", "Weather in Paris?")
    say(memory, "tg:tools", "assistant", "", sender=AGENT, tool_calls=[CALL])
    say(memory, "tg:tools", "tool", '{"temp": 21}', sender="tool", tool_call_id="call_1")
    say(memory, "tg:tools", "assistant", "It is 21 degrees.", sender=AGENT)
    say(memory, "tg:tools", "assistant", "Checking again.", sender=AGENT,
        tool_calls=[{**CALL, "id": "call_2"}, {**CALL, "id": "call_3"}])
    say(memory, "tg:tools", "tool", "", sender="tool", tool_call_id="call_3")
    say(memory, "tg:tools", "tool", "a result of no known call", sender="tool")
    say(memory, "tg:tools", "assistant", "", sender=AGENT, tool_calls=[{**CALL, "id": "call_4"}])
    say(memory, "tg:notes", "system", "The operator's rule.", sender="op", trust="operator")
    say(memory, "tg:notes", "user", "hi")
    say(memory, "tg:notes", "system", "a guest's note", sender="guest")
    say(memory, "tg:notes", "assistant", "Hi.", sender=AGENT)
    for i in range(3):
        say(memory, "tg:retracted", "user", f"question {i}")
        say(memory, "tg:retracted", "assistant", f"answer {i}", sender=AGENT)
    memory.retract_newest_message(agent_id=AGENT, owner_id="alice", conversation="tg:retracted")
    say(memory, "tg:cleared", "user", "before the clear")
    memory.clear_window(AGENT, "tg:cleared", owner_id="alice")
    say(memory, "tg:cleared", "assistant", "an orphan reply", sender=AGENT)
    say(memory, "tg:cleared", "user", "after the clear")
    for i in range(8):
        say(memory, "tg:compacted", "user", f"I sail on day {i}. {FILLER}", trust="operator")
        say(memory, "tg:compacted", "assistant", f"Noted {i}.", sender=AGENT, trust="operator")
    reply = memory.handle_command("/compact", agent_id=AGENT, owner_id="alice", conversation="tg:compacted",
                                  trust="operator", context_window=600)
    assert reply is not None and reply.ok, reply
    say(memory, "tg:compacted", "user", "and after the summary?")
    memory.review_now()  # the owner's prompt files get content
    memory.wait_for_background()
    return ["tg:plain", "tg:senders", "tg:tools", "tg:notes", "tg:retracted", "tg:cleared", "tg:compacted"]


def reference(memory: MemorySystem, conversation: str, style: str) -> str:
    """The prompt composed from the log's messages, each built by the ``Message`` constructor
    (``MessageAppended.message``), the checkpoint first: no row of the store is read."""
    key = conversation_key(conversation)
    state = memory.conversation_state(agent_id=AGENT, conversation=conversation)
    appended, retracted = [], set()
    for item in memory.events():
        e = item.event
        if isinstance(e, ev.MessageAppended) and (e.agent_id, e.conversation) == (AGENT, key):
            appended.append(e.message(item.position))
        elif isinstance(e, ev.MessageRetracted):
            retracted.add(e.message_id)
    built = sorted((m for m in appended if m.id > state.window_start_id and m.id not in retracted),
                   key=lambda m: (m.created_at, m.id))
    window = ([m for m in built if m.id == state.checkpoint_message_id]
              + [m for m in built if m.id != state.checkpoint_message_id])

    def revision(agent_id: str, owner_id: str, name: str) -> ResourceRevision | None:
        return next((r for r in memory.resources(agent_id=agent_id, owner_id=owner_id) if r.name == name), None)

    def read(agent_id: str, c: ConversationKey) -> list[Message]:
        assert (agent_id, c) == (AGENT, key)
        return window

    composed = compose_prompt(revision, read, AGENT, "alice", key, system="You are Ada.")
    return dumps(as_anthropic(composed) if style == "anthropic" else as_openai(composed))


def dumps(prompt: Any) -> str:
    return json.dumps(prompt, ensure_ascii=False)


def test_first_and_later_prompts_are_the_reference_prompt_for_every_kind_of_row(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        conversations = fill(memory)
    with MemorySystem.open(tmp_path / "home") as memory:  # nothing cached: every first prompt is cold
        assert len({m["role"] for c in conversations for m in memory.compose_prompt(AGENT, "alice", c)}) == 4
        kinds = set()
        for conversation in conversations:
            for m in memory.history(AGENT, conversation):
                kinds.add((m.role.value, m.kind, bool(m.metadata)))
        assert ("system", "checkpoint", True) in kinds and ("tool", "text", True) in kinds
    for style in ("openai", "anthropic"):
        with MemorySystem.open(tmp_path / "home") as memory:
            for conversation in conversations:
                cold = dumps(memory.compose_prompt(AGENT, "alice", conversation, system="You are Ada.", style=style))
                warm = dumps(memory.compose_prompt(AGENT, "alice", conversation, system="You are Ada.", style=style))
                expected = reference(memory, conversation, style)
                assert cold == expected, conversation
                assert warm == expected, conversation
                say(memory, conversation, "user", "one more")  # the cached window takes the write
                assert dumps(memory.compose_prompt(AGENT, "alice", conversation, system="You are Ada.",
                                                   style=style)) == reference(memory, conversation, style)
