"""The OpenAI Agents SDK session reads the window's end as such and records a call's items in one
transaction; ``history(limit)``, ``append_messages`` and ``Session.append_many`` underneath.

What is checked against the SDK's own behaviour: ``get_items(limit)`` is the newest ``limit``
of ``get_items()`` whatever the messages stand for (0, 1 or several items each, the compaction
checkpoint leading the window), ``session_settings`` is taken as ``agents.SQLiteSession`` takes
it, and a Runner reads the limit from it.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.memory import SessionSettings

from fermix_memory import AsyncMemorySystem, MemorySystem
from fermix_memory.application.message_input import InvalidMessage
from fermix_memory.domain import events as ev
from fermix_memory.openai_agents import FermixAgentsSession
from tests.integration.test_openai_agents_session import NO_TRACES, ScriptedModel, said

AGENT, OWNER = "ada", "alice"
FILLER = " ".join(["we also talked about the harbour, the tides and the small wooden boats"] * 3)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home", config={}) as opened:
        yield opened


def compacted_window(memory: MemorySystem, conversation: str = "t:1") -> list[int]:
    """A window holding a compaction checkpoint (newer than the messages it kept) and a message
    after it; the ids of the window, in its order."""
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=conversation, trust="operator")
    for i in range(12):
        s.append("user", f"message {i} {FILLER}")
        s.append("assistant", f"reply {i}")
    assert s.compact(context_window=600).status == "compacted"
    s.append("user", "after the compaction")
    window = s.history()
    assert window[0].kind == "checkpoint" and window[0].id > window[1].id
    return [m.id for m in window]


# --- history(limit): the window's end, read as such -------------------------------------------


@pytest.mark.usefixtures("every_store")
def test_history_limit_is_the_end_of_the_window_the_checkpoint_leading_it(memory: MemorySystem) -> None:
    ids = compacted_window(memory)
    for limit in range(len(ids) + 3):
        assert [m.id for m in memory.history(AGENT, "t:1", limit)] == (ids[-limit:] if limit else []), limit
    assert [m.id for m in memory.history(AGENT, "t:1", 2**63 - 1)] == ids


@pytest.mark.usefixtures("every_store")
def test_history_limit_keeps_to_a_capped_window(tmp_path: Path) -> None:
    config = {"fermix_core": {"memory": {"max_conversation_history": 4}}}
    with MemorySystem.open(tmp_path / "home", config=config) as memory:
        ids = compacted_window(memory)
        assert len(ids) == 4
        for limit in range(7):
            assert [m.id for m in memory.history(AGENT, "t:1", limit)] == (ids[-limit:] if limit else []), limit


# --- get_items(limit) ----------------------------------------------------------------------------


def test_get_items_limit_reads_further_back_past_messages_of_no_item(memory: MemorySystem) -> None:
    fermix = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="t:2", trust="operator")
    fermix.append("user", "Weather in Paris and Rome?")
    fermix.append("assistant", "Looking.", tool_calls=[{"id": "c1", "name": "weather", "arguments": "{}"},
                                                       {"id": "c2", "name": "weather", "arguments": "{}"}])
    fermix.append("tool", "21", tool_call_id="c1")
    for _ in range(5):
        fermix.append("system", "   ")  # a message that stands for no item
    s = FermixAgentsSession(fermix)
    everything = asyncio.run(s.get_items())
    assert len(everything) == 5
    for limit in range(8):
        assert asyncio.run(s.get_items(limit)) == (everything[-limit:] if limit else []), limit


@pytest.mark.usefixtures("every_store")
def test_get_items_limit_with_a_compaction_checkpoint_leading(memory: MemorySystem) -> None:
    ids = compacted_window(memory, "openai-agents:chat-1")
    s = FermixAgentsSession.open(memory, "chat-1", agent_id=AGENT, owner_id=OWNER)
    everything = asyncio.run(s.get_items())
    assert everything[0]["role"] == "system" and len(everything) == len(ids)
    for limit in range(len(ids) + 2):
        assert asyncio.run(s.get_items(limit)) == (everything[-limit:] if limit else []), limit


def test_items_read_back_are_the_callers_to_change(memory: MemorySystem) -> None:
    s = FermixAgentsSession.open(memory, "chat-1", agent_id=AGENT, owner_id=OWNER)
    items: list[Any] = [
        {"role": "user", "content": "hello"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    ]
    asyncio.run(s.add_items(copy.deepcopy(items)))
    for limit in (None, 3):
        read = asyncio.run(s.get_items(limit))
        assert read == items
        read[0]["content"] = "changed"
        read[1]["content"][0]["text"] = "changed"
        read[1]["content"].append({"type": "output_text", "text": "more"})
        read[2]["name"] = "changed"
        assert asyncio.run(s.get_items()) == items, "what a caller does to its items changes no later read"
        assert asyncio.run(s.get_items(3)) == items


# --- session_settings, as the SDK's own sessions take them ----------------------------------------


def test_session_settings_are_normalised_as_the_sdk_does(memory: MemorySystem) -> None:
    def ours(settings: Any = None) -> FermixAgentsSession:
        return FermixAgentsSession.open(memory, "chat-1", agent_id=AGENT, owner_id=OWNER, session_settings=settings)

    assert ours().session_settings == SessionSettings() == SQLiteSession("x").session_settings
    assert ours({"limit": 3}).session_settings == SessionSettings(limit=3)
    given = SessionSettings(limit=4)
    assert ours(given).session_settings is given
    with pytest.raises(TypeError, match="bogus, zz") as ours_error:
        ours({"limit": 2, "zz": 1, "bogus": 0})
    with pytest.raises(TypeError) as sdk_error:
        SQLiteSession("x", session_settings={"limit": 2, "zz": 1, "bogus": 0})
    assert str(ours_error.value) == str(sdk_error.value)
    with pytest.raises(TypeError):
        ours(["limit", 2])
    s = ours({"limit": 2})
    asyncio.run(s.add_items([{"role": "user", "content": f"m{n}"} for n in range(5)]))  # type: ignore[misc]
    assert [i["content"] for i in asyncio.run(s.get_items())] == ["m3", "m4"]  # type: ignore[typeddict-item]


def test_a_runner_reads_as_many_items_as_the_session_settings_say(memory: MemorySystem) -> None:
    s = FermixAgentsSession.open(memory, "chat-1", agent_id=AGENT, owner_id=OWNER, session_settings={"limit": 2},
                                 review=False)
    model = ScriptedModel([said("one", "msg_1")], [said("two", "msg_2")], [said("three", "msg_3")],
                          [said("four", "msg_4")])
    agent = Agent(name="Ada", model=model)
    for text in ("first", "second", "third"):
        Runner.run_sync(agent, text, session=s, run_config=NO_TRACES)
    texts = [[i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in turn]
             for turn in model.inputs]
    assert texts == [["first"], ["first", "one", "second"], ["second", "two", "third"]]
    Runner.run_sync(agent, "fourth", session=s, run_config=RunConfig(tracing_disabled=True,
                                                                        session_settings=SessionSettings(limit=1)))
    assert [i.get("role") for i in model.inputs[-1]] == ["assistant", "user"], "the run's own limit wins"
    assert len(asyncio.run(s.get_items(100))) == 8


# --- many messages, one transaction --------------------------------------------------------------


@pytest.mark.usefixtures("every_store")
def test_append_many_gives_the_ids_in_order_with_keys_honoured(memory: MemorySystem) -> None:
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="t:3")
    first = s.append("user", "before", idempotency_key="k0")
    ids = s.append_many([{"role": "user", "content": "a", "idempotency_key": "k1"},
                         {"role": "assistant", "content": "b"},
                         {"role": "user", "content": "a again", "idempotency_key": "k1"},
                         {"role": "user", "content": "old", "idempotency_key": "k0"},
                         {"role": "tool", "content": "r", "tool_call_id": "c1", "sender": "tooling"}])
    assert ids[2] == ids[0] and ids[3] == first
    assert ids[0] < ids[1] < ids[4] == ids[1] + 1
    window = s.history()
    assert [m.content for m in window] == ["before", "a", "b", "r"]
    assert window[1].sender == OWNER and window[2].sender == AGENT and window[3].sender == "tooling"
    assert s.append_many([{"role": "user", "content": "a", "idempotency_key": "k1"}]) == [ids[0]], "across calls too"
    assert s.append_many([]) == []
    positions = [r.position for r in memory.events() if isinstance(r.event, ev.MessageAppended)]
    assert positions == [first, ids[0], ids[1], ids[4]]


@pytest.mark.parametrize("bad", [{"role": "user"}, {"role": "user", "content": "x", "colour": "red"},
                                 {"role": "nobody", "content": "x"}, {"role": "user", "content": "\x00"}, "text"])
def test_a_bad_message_of_a_batch_records_none(memory: MemorySystem, bad: Any) -> None:
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="t:4")
    with pytest.raises(InvalidMessage):
        s.append_many([{"role": "user", "content": "fine"}, bad])
    with pytest.raises(InvalidMessage):
        memory.append_messages([{"agent_id": AGENT, "owner_id": OWNER, "conversation": "t:4", "role": "user",
                                 "content": "fine"}, {"agent_id": AGENT, **bad} if isinstance(bad, dict) else bad])
    with pytest.raises(InvalidMessage):
        s.append_many({"role": "user", "content": "a dict, not a list"})  # type: ignore[arg-type]
    assert s.history() == []


def test_append_messages_of_several_conversations_and_their_async_twins(tmp_path: Path) -> None:
    async def main() -> list[int]:
        memory = await AsyncMemorySystem.open(tmp_path / "home", config={})
        try:
            ids = await memory.append_messages([
                {"agent_id": AGENT, "owner_id": OWNER, "conversation": "t:5", "role": "user", "content": "one"},
                {"agent_id": AGENT, "owner_id": "bob", "conversation": "t:6", "role": "user", "content": "two",
                 "trust": "operator"}])
            session = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="t:5")
            ids += await session.append_many([{"role": "assistant", "content": "three"}])
            assert [m.content for m in await memory.history(AGENT, "t:5")] == ["one", "three"]
            assert [m.owner_id for m in await memory.history(AGENT, "t:6", 1)] == ["bob"]
            return ids
        finally:
            await memory.close()

    ids = asyncio.run(main())
    assert ids == sorted(ids) and len(set(ids)) == 3
