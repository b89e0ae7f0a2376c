"""The Agents SDK session builds ``get_items(limit)`` from the store's rows (``history_rows``,
``row_items``): the same items, item for item, as the way through ``Message`` objects
(``history`` and ``message_items``), on windows of every kind of item and message, with a
compaction checkpoint leading the window, on each store."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.queries import SqliteQueries
from fermix_memory.domain.values import ConversationKey
from fermix_memory.entrypoints.integrations.agents_items import message_items, row_items
from fermix_memory.openai_agents import FermixAgentsSession

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER = "ada", "alice"
KEY = ConversationKey("openai-agents", "chat-1")
FILLER = " ".join(["we also talked about the harbour, the tides and the small wooden boats"] * 3)

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is on this picture? And the weather in Paris?"},
    {"role": "user", "content": [{"type": "input_text", "text": "this one"},
                                 {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=",
                                  "detail": "auto"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look, then call"}],
     "encrypted_content": "gAAAA", "content": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
     "arguments": "{\"city\": \"Paris\", \"big\": 123456789012345678901234567890}", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21.5 degrees"},
    {"type": "function_call_output", "call_id": "call_1",
     "output": [{"type": "input_text", "text": "one"}, {"type": "input_text", "text": "two"}]},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "grep", "input": "harbour"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "tides"}},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "A boat. Sunny in Paris \u00e9\u4e2d\U0001f600.",
                  "annotations": [], "logprobs": []}]},
    {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    {"role": "developer", "content": "be brief", "extra": {"n": 2**70, "x": 1.5e300, "list": [None, True]}},
    {"role": "system", "content": ""},
]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home", config={}) as opened:
        yield opened


def old_way(memory: MemorySystem, limit: int) -> list[dict[str, Any]]:
    return [item for m in memory.history(AGENT, KEY, limit) for item in message_items(m)]


def new_way(memory: MemorySystem, limit: int) -> list[dict[str, Any]]:
    return [item for r in memory.history_rows(AGENT, KEY, limit) for item in row_items(r, AGENT, KEY)]


def fill(memory: MemorySystem) -> FermixAgentsSession:
    s = FermixAgentsSession.open(memory, KEY.chat_id, agent_id=AGENT, owner_id=OWNER, trust="operator",
                                 review=False)
    fermix = s.session
    for i in range(6):  # messages recorded by other means than items: turns, calls, results, a rule
        fermix.append("user", f"message {i} {FILLER}")
        fermix.append("assistant", f"looking {i}", tool_calls=[{"id": f"c{i}", "name": "f", "arguments": "{}"}])
        fermix.append("tool", f"result {i}", tool_call_id=f"c{i}")
        fermix.append("tool", "a result of no call")
        fermix.append("system", "   ")
        asyncio.run(s.add_items(items_of(i)))
    return s


def items_of(turn: int) -> list[dict[str, Any]]:
    """:data:`ITEMS` with the ids of this turn's (an item's id is recorded once per conversation)."""
    items = copy.deepcopy(ITEMS)
    for item in items:
        if "id" in item:
            item["id"] += f"_{turn}"
    return items


def assert_same(memory: MemorySystem, s: FermixAgentsSession, length: int) -> None:
    for limit in [*range(length + 3), 2**63 - 1]:
        rows, messages = memory.history_rows(AGENT, KEY, limit), memory.history(AGENT, KEY, limit)
        assert [r.id for r in rows] == [m.id for m in messages]
        assert new_way(memory, limit) == old_way(memory, limit), limit
    everything = asyncio.run(s.get_items())
    for limit in range(len(everything) + 2):
        assert asyncio.run(s.get_items(limit)) == (everything[-limit:] if limit else []), limit


def test_items_from_rows_are_the_items_from_messages(memory: MemorySystem) -> None:
    s = fill(memory)
    assert_same(memory, s, len(memory.history(AGENT, KEY)))
    assert asyncio.run(s.get_items(len(ITEMS))) == items_of(5), "the items as added, exactly"


def test_items_from_rows_with_a_compaction_checkpoint_leading(memory: MemorySystem) -> None:
    s = fill(memory)
    assert s.session.compact(context_window=600).status == "compacted"
    asyncio.run(s.add_items(items_of(6)[:3]))
    window = memory.history(AGENT, KEY)
    assert window[0].kind == "checkpoint" and window[0].id > window[1].id
    assert_same(memory, s, len(window))


def test_rows_read_back_are_fresh_for_the_caller(memory: MemorySystem) -> None:
    s = fill(memory)
    read = asyncio.run(s.get_items(4))
    read[0]["content"][0]["text"] = "changed"
    read[1]["content"][0]["refusal"] = "changed"
    read[2]["extra"]["list"].append("changed")
    assert asyncio.run(s.get_items(len(ITEMS))) == items_of(5)


@pytest.mark.sqlite_only("the plan of SQLite's statement")
def test_the_window_tail_is_one_statement_of_seeks_only(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home", config={}) as memory:
        fill(memory)
    conn = apsw.Connection(str(tmp_path / "home" / "memory.db"))
    key = (AGENT, KEY.channel, KEY.chat_id, KEY.thread_scope)
    sql = SqliteQueries.window_tail_sql
    plan = [str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", (*key, *key, *key, 21))]
    assert [step for step in plan if step.startswith("SEARCH")] == [
        "SEARCH messages USING INDEX messages_by_conversation"
        " (agent_id=? AND channel=? AND chat_id=? AND thread_scope=?)",
        *["SEARCH conversation_state USING INDEX sqlite_autoindex_conversation_state_1"
          " (agent_id=? AND channel=? AND chat_id=? AND thread_scope=?)"] * 2,
    ], plan
    assert not any("SCAN" in step or "TEMP B-TREE" in step for step in plan), plan
