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
from fermix_memory.application.query_ports import ResourceRevision
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


def constructed_window(memory: MemorySystem, conversation: str) -> list[Message]:
    """The window from the log's messages, each built by the ``Message`` constructor
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
    return ([m for m in built if m.id == state.checkpoint_message_id]
            + [m for m in built if m.id != state.checkpoint_message_id])


def reference(memory: MemorySystem, conversation: str, style: str) -> str:
    """The prompt composed from :func:`constructed_window`."""
    key = conversation_key(conversation)
    window = constructed_window(memory, conversation)

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
                assert memory.history(AGENT, conversation) == constructed_window(memory, conversation)
                assert dumps(memory.compose_prompt(AGENT, "alice", conversation, system="You are Ada.",
                                                   style=style)) == expected  # from the messages now
                say(memory, conversation, "user", "one more")  # the cached window takes the write
                assert dumps(memory.compose_prompt(AGENT, "alice", conversation, system="You are Ada.",
                                                   style=style)) == reference(memory, conversation, style)


def system_text(memory: MemorySystem, owner: str, conversation: str) -> str:
    prompt = memory.compose_prompt(AGENT, owner, conversation)
    return prompt[0]["content"] if prompt and prompt[0]["role"] == "system" else ""


def everything(memory: MemorySystem, owner: str, conversation: str) -> str:
    return dumps(memory.compose_prompt(AGENT, owner, conversation))


def add_fact(memory: MemorySystem, owner: str, value: str) -> int:
    [outcome] = memory.write_memory({"op": "add", "category": "interest", "key": value.lower(), "value": value},
                                    agent_id=AGENT, owner_id=owner, trust="operator")
    assert outcome.memory_id is not None
    return outcome.memory_id


def test_a_forget_leaves_no_erased_text_in_a_cached_window_or_prompt_file(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        say(memory, "tg:group", "user", "Alice says Quetzalcoatlus", owner="alice")
        say(memory, "tg:group", "user", "Bob says Bobwombatfacts", owner="bob")
        say(memory, "tg:secret", "user", "Bob whispers Obsidianorchid", owner="bob")
        fact = add_fact(memory, "bob", "Marzipanmountain")
        add_fact(memory, "bob", "Zebrafinchtea")
        for conversation in ("tg:group", "tg:secret"):  # the windows and the prompt files are cached now
            assert "Marzipanmountain" in everything(memory, "bob", conversation)
        assert "Quetzalcoatlus" in everything(memory, "bob", "tg:group")
        memory.forget_owner("alice")
        assert "Quetzalcoatlus" not in everything(memory, "bob", "tg:group")
        assert "Bobwombatfacts" in everything(memory, "bob", "tg:group")
        memory.forget_memory(fact)
        assert "Marzipanmountain" not in everything(memory, "bob", "tg:group")
        assert "Zebrafinchtea" in system_text(memory, "bob", "tg:group")
        memory.forget_conversation(AGENT, "tg:secret")
        assert "Obsidianorchid" not in everything(memory, "bob", "tg:secret")
        assert [m["role"] for m in memory.compose_prompt(AGENT, "bob", "tg:secret")] == ["system"]


def test_every_write_reaches_a_cached_window_and_prompt_file(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        say(memory, "tg:1", "user", "first")
        assert "Kestrelnest" not in system_text(memory, "alice", "tg:1")  # the window and files are cached
        add_fact(memory, "alice", "Kestrelnest")
        assert "Kestrelnest" in system_text(memory, "alice", "tg:1")
        add_fact(memory, "alice", "Heronpond")
        say(memory, "tg:1", "user", "second")
        assert "Heronpond" in system_text(memory, "alice", "tg:1")
        assert "second" in everything(memory, "alice", "tg:1")
        [first] = [r for r in memory.resource_history("user_md", agent_id=AGENT, owner_id="alice")
                   if "Kestrelnest" in r.content and "Heronpond" not in r.content]
        memory.resource_rollback("user_md", first.revision, agent_id=AGENT, owner_id="alice")
        assert "Heronpond" not in system_text(memory, "alice", "tg:1")
        memory.retract_newest_message(agent_id=AGENT, owner_id="alice", conversation="tg:1")
        assert "second" not in everything(memory, "alice", "tg:1")
        memory.clear_window(AGENT, "tg:1", owner_id="alice")
        say(memory, "tg:1", "user", "after the clear")
        assert [m["content"] for m in memory.compose_prompt(AGENT, "alice", "tg:1")[1:]] == ["after the clear"]


@pytest.mark.sqlite_only("on PostgreSQL another host's writes reach the caches through the change feed"
                         " (test_postgres_store)")
def test_a_write_by_another_process_reaches_a_cached_window_and_prompt_file(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory, MemorySystem.open(tmp_path / "home") as other:
        say(memory, "tg:1", "user", "first")
        assert system_text(memory, "alice", "tg:1") == system_text(other, "alice", "tg:1")  # both cache them
        add_fact(other, "alice", "Heronpond")
        say(other, "tg:1", "user", "second, from the other one")
        assert "Heronpond" in system_text(memory, "alice", "tg:1")
        assert "second, from the other one" in everything(memory, "alice", "tg:1")
        other.forget_owner("alice")
        assert everything(memory, "alice", "tg:1") == everything(other, "alice", "tg:1")
        assert "Heronpond" not in everything(memory, "alice", "tg:1")


def test_a_capped_window_read_as_rows_takes_writes_as_a_reload_would(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[fermix_core.memory]\nmax_conversation_history = 5\n", encoding="utf-8")
    with MemorySystem.open(home) as memory:
        for i in range(8):
            user = i % 2 == 0
            say(memory, "tg:capped", "user" if user else "assistant", f"turn {i}", sender=None if user else AGENT)
    with MemorySystem.open(home) as memory:
        cold = memory.compose_prompt(AGENT, "alice", "tg:capped")  # the five newest, kept as rows
        assert [m["content"] for m in cold[1:]] == ["turn 4", "turn 5", "turn 6", "turn 7"]  # turn 3: an orphan
        say(memory, "tg:capped", "user", "turn 8")
        after = dumps(memory.compose_prompt(AGENT, "alice", "tg:capped"))
        history = memory.history(AGENT, "tg:capped")
    with MemorySystem.open(home) as reopened:
        assert after == dumps(reopened.compose_prompt(AGENT, "alice", "tg:capped"))
        assert history == reopened.history(AGENT, "tg:capped")
        assert [m.content for m in history] == ["turn 4", "turn 5", "turn 6", "turn 7", "turn 8"]
