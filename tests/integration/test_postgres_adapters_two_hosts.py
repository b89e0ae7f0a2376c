"""The framework adapters on two hosts of one PostgreSQL database: what one host's Agents session
or LangGraph store writes, the other's reads once it has heard of it (ADR-0064), whatever it
had read and kept before; and each host's writes go on from the other's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from fermix_memory.langgraph import FermixStore
from fermix_memory.openai_agents import FermixAgentsSession
from tests.waits import until

ALICE = ("memories", "alice")


def config(url: str) -> dict[str, Any]:
    return {"fermix_core": {"storage": {"url": url}}}


def reply(text: str, item_id: str) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def test_an_agents_session_on_two_hosts(postgres_url: str, tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "host-a", config=config(postgres_url)) as a, \
            MemorySystem.open(tmp_path / "host-b", config=config(postgres_url)) as b:
        on_a = FermixAgentsSession.open(a, "chat", agent_id="ada", owner_id="alice", review=False)
        on_b = FermixAgentsSession.open(b, "chat", agent_id="ada", owner_id="alice", review=False)
        first = [{"role": "user", "content": "I live in Paris"}, reply("Noted.", "msg_1")]
        asyncio.run(on_a.add_items(first))  # type: ignore[arg-type]
        until(lambda: asyncio.run(on_b.get_items()) == first, "host b reads host a's turn")
        assert asyncio.run(on_b.get_items(1)) == first[-1:]  # kept by b's window now

        second = [{"role": "user", "content": "And Lyon?"}, reply("Lyon too.", "msg_2")]
        asyncio.run(on_b.add_items(second))  # type: ignore[arg-type]
        until(lambda: asyncio.run(on_a.get_items()) == first + second, "host a reads host b's turn")
        assert asyncio.run(on_a.pop_item()) == second[-1]
        until(lambda: asyncio.run(on_b.get_items()) == first + second[:1], "host b hears the retraction")
        asyncio.run(on_b.add_items(second[-1:]))  # type: ignore[arg-type]  # taken back on a, added again on b
        until(lambda: asyncio.run(on_a.get_items()) == first + second, "host a reads it back")


def test_a_langgraph_store_on_two_hosts(postgres_url: str, tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "host-a", config=config(postgres_url)) as a, \
            MemorySystem.open(tmp_path / "host-b", config=config(postgres_url)) as b:
        on_a, on_b = FermixStore(a, agent_id="ada"), FermixStore(b, agent_id="ada")
        assert on_b.get(ALICE, "profile") is None and on_b.search(ALICE) == []
        document = {"notes": ["likes tea " * 50] * 40}
        on_a.put(ALICE, "profile", document)

        def b_reads(value: Any) -> bool:
            item = on_b.get(ALICE, "profile")
            return item is not None and item.value == value and [i.value for i in on_b.search(ALICE)] == [value]

        until(lambda: b_reads(document), "host b reads host a's item")
        on_b.put(ALICE, "profile", {"notes": ["likes coffee"]})
        until(lambda: (i := on_a.get(ALICE, "profile")) is not None and i.value == {"notes": ["likes coffee"]},
              "host a reads host b's replacement")
        on_a.delete(ALICE, "profile")
        until(lambda: on_b.get(ALICE, "profile") is None and on_b.search(ALICE) == [], "host b hears the delete")
        live = [r for r in b.memories(agent_id="ada", owner_id="alice") if not r.archived]
        assert live == []
