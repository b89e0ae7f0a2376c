"""FermixStore, the LangGraph store over fermix rows: refusals, audit, prompt files,
isolation, forgetting, the async side and a real LangGraph graph (ADR-0028)."""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp
from typing_extensions import TypedDict

from fermix_memory import DomainError, FermixError, InvalidArgument, MemorySystem
from fermix_memory.domain.values import MAX_ITEM_VALUE_CHARS
from fermix_memory.entrypoints.extras import MissingExtra
from fermix_memory.langgraph import (
    FermixStore,
    FilterNotSupported,
    NamespaceNotMapped,
    ValueNotStorable,
)
from tests.integration.test_forget import found

ALICE = ("memories", "alice")
BOB = ("memories", "bob")


@pytest.fixture
def store(memory: MemorySystem) -> FermixStore:
    return FermixStore(memory, agent_id="ada")


def rows(memory: MemorySystem) -> list[tuple[int, str, str, bool]]:
    return [(r.id, r.key, r.value, r.archived) for r in memory.memories()]


@pytest.mark.parametrize(("call", "error"), [
    (lambda s: s.put(("memories",), "k", {"a": 1}), NamespaceNotMapped),
    (lambda s: s.put(("memories", "al\x01ice"), "k", {"a": 1}), NamespaceNotMapped),
    (lambda s: s.put(("memories", "alice", "x" * 250), "k", {"a": 1}), NamespaceNotMapped),
    (lambda s: s.batch([PutOp(("memories", "a.b"), "k", {"a": 1})]), NamespaceNotMapped),
    (lambda s: s.batch([PutOp(("memories", "alice"), "k", {"a": 1}, ttl=5.0)]), InvalidArgument),
    (lambda s: s.put(ALICE, "k", {"text": "x" * MAX_ITEM_VALUE_CHARS}), ValueNotStorable),  # with its key, past it
    (lambda s: s.put(ALICE, "k", {"t": (1, 2)}), ValueNotStorable),
    (lambda s: s.put(ALICE, "k", {1: "int key"}), ValueNotStorable),
    (lambda s: s.put(ALICE, "k", {"x": float("nan")}), ValueNotStorable),
    (lambda s: s.put(ALICE, "k", {"x": {1, 2}}), ValueNotStorable),
    (lambda s: s.put(ALICE, "k", {"x": object()}), ValueNotStorable),
    (lambda s: s.batch([PutOp(ALICE, "k", ["not", "a", "dict"])]), ValueNotStorable),  # type: ignore[arg-type]
    (lambda s: s.search(("memories",)), NamespaceNotMapped),
    (lambda s: s.search(ALICE, filter={"n": {"$in": [1]}}), FilterNotSupported),
    (lambda s: s.search(ALICE, query="x", limit=90, offset=20), FilterNotSupported),
    (lambda s: s.get(("memories",), "k"), NamespaceNotMapped),
])
def test_what_cannot_map_is_a_typed_error_and_nothing_is_written(store: FermixStore, memory: MemorySystem,
                                                                 call: Any, error: type[Exception]) -> None:
    store.put(ALICE, "kept", {"text": "kept"})
    before = (rows(memory), memory.head())
    with pytest.raises(error) as raised:
        call(store)
    assert isinstance(raised.value, FermixError)
    assert (rows(memory), memory.head()) == before


def test_a_bad_operation_stops_the_whole_batch_before_any_write(store: FermixStore, memory: MemorySystem) -> None:
    with pytest.raises(ValueNotStorable):
        store.batch([PutOp(ALICE, "a", {"text": "fine"}),
                     PutOp(ALICE, "b", {"text": "y" * (MAX_ITEM_VALUE_CHARS + 1)})])
    assert rows(memory) == []
    # an unmappable namespace is also LangGraph's own namespace error, for hosts that catch that
    with pytest.raises(InvalidNamespaceError):
        store.put(("memories",), "k", {"a": 1})


def test_every_put_and_delete_is_an_audited_event_and_delete_archives(store: FermixStore,
                                                                      memory: MemorySystem) -> None:
    store.put(ALICE, "food", {"text": "likes coffee"})
    store.put(ALICE, "food", {"text": "likes tea"})
    store.delete(ALICE, "food")
    assert store.get(ALICE, "food") is None
    assert store.search(ALICE) == []
    [row] = memory.memories()
    assert row.archived and row.category == "context" and row.promote_target is None
    store.put(ALICE, "food", {"text": "likes water"})
    item = store.get(ALICE, "food")
    assert item is not None and item.value == {"text": "likes water"}
    assert (item.created_at, item.updated_at) == (row.created_at, memory.memory(row.id).updated_at)
    kinds = [(e["kind"], e["by"]["source_type"], e["by"]["trust"]) for e in memory.explain(row.id)["events"]]
    assert kinds == [("memory.added", "langgraph", "guest"), ("memory.replaced", "langgraph", "guest"),
                     ("memory.archived", "langgraph", "guest"), ("memory.replaced", "langgraph", "guest")]
    assert memory.verify().ok


def test_items_stay_out_of_the_prompt_files(store: FermixStore, memory: MemorySystem) -> None:
    memory.write_memory({"op": "add", "category": "preference", "key": "tone", "value": "Prefers Brevityword"},
                        agent_id="ada", owner_id="alice", trust="operator")
    store.put(ALICE, "food", {"text": "likes Zanzibarcoffee"})
    s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:1")
    prompt = repr(s.compose_prompt(system="You are Ada."))
    assert "Brevityword" in prompt and "Zanzibarcoffee" not in prompt
    # ... yet the owner's own memory tools reach them
    recalled = s.dispatch_tool("memory_recall", {"query": "Zanzibarcoffee", "scope": "all"})
    assert [m["key"] for m in recalled["memories"]] == ["food"]


def test_two_owners_never_see_each_others_items_and_forget_removes_every_byte(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        store = FermixStore(memory, agent_id="ada")
        store.put(ALICE, "secret", {"text": "Quokkapassword of alice"})
        store.put((*ALICE, "work"), "3f2a-uuid-key", {"text": "Narwhalproject at work"})
        store.put(BOB, "secret", {"text": "Bobcatpassword of bob"})
        assert [i.value["text"] for i in store.search(BOB)] == ["Bobcatpassword of bob"]
        assert store.search(BOB, query="Quokkapassword Narwhalproject") == []
        assert {i.key for i in store.search(ALICE, query="Quokkapassword Narwhalproject")} == \
               {"secret", "3f2a-uuid-key"}
        bob = memory.session(agent_id="ada", owner_id="bob", conversation="telegram:bob")
        assert bob.dispatch_tool("memory_recall", {"query": "Quokkapassword", "scope": "all"})["memories"] == []
    assert set(found(home, ("Quokkapassword", "Narwhalproject", "Bobcatpassword"))) == \
           {"Quokkapassword", "Narwhalproject", "Bobcatpassword"}
    with MemorySystem.open(home) as memory:
        memory.forget_owner("alice")
        store = FermixStore(memory, agent_id="ada")
        assert store.get(ALICE, "secret") is None and store.search(ALICE) == []
        assert store.list_namespaces() == [BOB]
    assert found(home, ("Quokkapassword", "Narwhalproject", "3f2a-uuid-key", "memories.alice")) == {}
    assert set(found(home, ("Bobcatpassword",))) == {"Bobcatpassword"}


def test_the_owner_label_can_be_elsewhere_in_the_namespace(memory: MemorySystem) -> None:
    store = FermixStore(memory, agent_id="ada", owner_index=0)
    store.put(("alice", "memories"), "k", {"text": "first label"})
    [row] = memory.memories()
    assert row.owner_id == "alice"
    assert FermixStore(memory, agent_id="ada").search(("memories", "alice")) == []
    with pytest.raises(DomainError):
        FermixStore(memory, agent_id="ada", owner_index=-1)
    with pytest.raises(InvalidArgument):
        FermixStore(memory, agent_id="ada", trust="admin")  # type: ignore[arg-type]


def test_abatch_reads_off_the_event_loop_and_puts_at_once(memory: MemorySystem) -> None:
    """A batch that reads runs on the lane; a batch of puts only is a brief write, committed on
    the loop's thread when nothing would make it wait there (ADR-0110)."""
    threads: list[tuple[int, bool]] = []  # each batch's thread, and whether it only put

    class Recording(FermixStore):
        def batch(self, ops: Any) -> Any:
            ops = list(ops)
            threads.append((threading.get_ident(), all(isinstance(op, PutOp) and op.value is not None for op in ops)))
            return super().batch(ops)

    store = Recording(memory, agent_id="ada")

    async def main() -> tuple[Any, ...]:
        loop_thread = threading.get_ident()
        await asyncio.gather(*(store.aput(ALICE, f"k{i}", {"text": f"fact {i}", "n": i}) for i in range(20)))
        got = await store.aget(ALICE, "k3")
        found = await store.asearch(ALICE, filter={"n": {"$gte": 18}})
        names = await store.alist_namespaces()
        results = await store.abatch([GetOp(ALICE, "k1"), SearchOp(ALICE, query="fact", limit=100)])
        await store.adelete(ALICE, "k0")  # a delete reads its row first: on the lane
        return loop_thread, got, found, names, results

    loop_thread, got, found_items, names, results = asyncio.run(main())
    puts = [thread for thread, put_only in threads if put_only]
    others = [thread for thread, put_only in threads if not put_only]
    assert len(puts) == 20 and loop_thread in puts
    assert others and loop_thread not in others
    assert got is not None and got.value == {"text": "fact 3", "n": 3}
    assert sorted(i.key for i in found_items) == ["k18", "k19"]
    assert names == [ALICE]
    assert results[0].key == "k1" and len(results[1]) == 20
    assert store.get(ALICE, "k0") is None


class State(TypedDict):
    owner: str
    fact: str
    recalled: list[str]


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    namespace = ("memories", state["owner"])
    if state["fact"]:
        store.put(namespace, f"fact-{len(store.search(namespace))}", {"text": state["fact"]})
    return {"recalled": [item.value["text"] for item in store.search(namespace, query="tea coffee")]}


def test_a_langgraph_graph_keeps_its_memories_in_fermix(tmp_path: Path) -> None:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    with MemorySystem.open(tmp_path / "home") as memory:
        graph = builder.compile(store=FermixStore(memory, agent_id="ada"))
        graph.invoke({"owner": "alice", "fact": "alice drinks tea", "recalled": []})
        graph.invoke({"owner": "bob", "fact": "bob drinks coffee", "recalled": []})
    with MemorySystem.open(tmp_path / "home") as memory:  # a later run, a new process's view
        graph = builder.compile(store=FermixStore(memory, agent_id="ada"))
        out = graph.invoke({"owner": "alice", "fact": "", "recalled": []})
        assert out["recalled"] == ["alice drinks tea"]
        out = asyncio.run(graph.ainvoke({"owner": "bob", "fact": "", "recalled": []}))
        assert out["recalled"] == ["bob drinks coffee"]


@pytest.mark.parametrize("framework", ["langgraph.store.base", "langchain_core.tools"])
def test_without_the_extra_the_import_names_it(monkeypatch: pytest.MonkeyPatch, framework: str) -> None:
    for name in ("fermix_memory.langgraph", "fermix_memory.entrypoints.integrations.langgraph_store",
                 "fermix_memory.entrypoints.integrations.langchain_tools"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, framework, None)  # what an install without the extra looks like
    with pytest.raises(MissingExtra, match=re.escape("pip install 'fermix-memory[langgraph]'")):
        importlib.import_module("fermix_memory.langgraph")
