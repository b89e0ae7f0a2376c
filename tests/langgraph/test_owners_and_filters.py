"""FermixStore beyond one owner's namespaces (ADR-0059): a default owner for namespaces without
an owner label, the operator's view over every owner; a search without a query read in pages of
SQL; filters with dotted paths as LangGraph's ``SqliteStore`` reads them (checked against it)."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.sqlite import SqliteStore

from fermix_memory import DomainError, InvalidArgument, MemorySystem
from fermix_memory.langgraph import FermixStore, NamespaceNotMapped

ALICE, BOB = ("memories", "alice"), ("memories", "bob")


def keys(items: list[Any]) -> set[tuple[tuple[str, ...], str]]:
    return {(tuple(i.namespace), i.key) for i in items}


def test_without_a_default_owner_the_error_says_how_to_map(memory: MemorySystem) -> None:
    store = FermixStore(memory, agent_id="ada")
    with pytest.raises(NamespaceNotMapped, match="default_owner") as put:
        store.put(("docs",), "k", {"a": 1})
    assert "all_owners" not in str(put.value)
    with pytest.raises(NamespaceNotMapped, match=r"default_owner.*all_owners"):
        store.search(("memories",))
    with pytest.raises(NamespaceNotMapped, match="owner_index"):
        store.search(())
    with pytest.raises(InvalidArgument, match="trust='operator'"):
        FermixStore(memory, agent_id="ada", all_owners=True)
    with pytest.raises(DomainError):
        FermixStore(memory, agent_id="ada", default_owner="bad\x01owner")


def test_a_namespace_without_an_owner_label_belongs_to_the_default_owner(memory: MemorySystem) -> None:
    store = FermixStore(memory, agent_id="ada", default_owner="shared")
    store.put(("docs",), "guide", {"text": "how to brew Zanzibarcoffee"})
    store.put(("memories",), "motto", {"text": "be kind"})
    store.put(ALICE, "food", {"text": "likes tea"})
    assert {(r.owner_id, r.key) for r in memory.memories()} == {("shared", "guide"), ("shared", "motto"),
                                                                ("alice", "food")}
    item = store.get(("docs",), "guide")
    assert item is not None and item.value == {"text": "how to brew Zanzibarcoffee"}
    # a prefix without an owner label reads the default owner's items only (owners stay apart)
    assert keys(store.search(())) == {(("docs",), "guide"), (("memories",), "motto")}
    assert keys(store.search(("memories",))) == {(("memories",), "motto")}
    assert keys(store.search(("docs",), query="Zanzibarcoffee")) == {(("docs",), "guide")}
    assert keys(store.search(ALICE)) == {(ALICE, "food")}
    store.delete(("docs",), "guide")
    assert store.get(("docs",), "guide") is None
    assert store.list_namespaces() == [("memories",), ALICE]


def test_the_operator_view_searches_every_owner(memory: MemorySystem) -> None:
    guest = FermixStore(memory, agent_id="ada", default_owner="shared")
    guest.put(ALICE, "food", {"text": "alice likes tea", "n": 1})
    guest.put((*BOB, "work"), "food", {"text": "bob likes tea too", "n": 2})
    guest.put(("memories",), "motto", {"text": "tea for everyone", "n": 3})
    FermixStore(memory, agent_id="other").put(ALICE, "food", {"text": "another agent's tea", "n": 4})
    operator = FermixStore(memory, agent_id="ada", trust="operator", all_owners=True)
    everything = {(ALICE, "food"), ((*BOB, "work"), "food"), (("memories",), "motto")}
    assert keys(operator.search(())) == everything
    assert keys(operator.search(("memories",))) == everything
    assert [i.value["n"] for i in operator.search(("memories",), filter={"n": {"$gte": 2}})] == [3, 2]
    assert keys(operator.search(("memories",), query="tea", limit=10)) == everything
    assert keys(operator.search(BOB)) == {((*BOB, "work"), "food")}  # an owner label still names one
    assert [i.key for i in operator.search((), limit=1, offset=1)] == ["food"]
    with pytest.raises(NamespaceNotMapped, match="default_owner"):
        operator.put(("docs",), "k", {"a": 1})  # a put still needs an owner


def test_a_search_without_a_query_reads_pages_not_the_owner(memory: MemorySystem,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = FermixStore(memory, agent_id="ada")
    store.batch([PutOp(ALICE, f"k{i}", {"n": i, "rare": i % 97 == 0}) for i in range(600)])
    store.put(BOB, "other", {"n": 0})
    pages: list[tuple[int, int]] = []
    original = MemorySystem.conversation_memories

    def recording(self: MemorySystem, **kwargs: Any) -> Any:
        pages.append((kwargs["limit"], kwargs["offset"]))
        return original(self, **kwargs)

    monkeypatch.setattr(MemorySystem, "conversation_memories", recording)
    newest = store.search(ALICE, limit=10, offset=5)
    assert pages == [(10, 5)]  # without a filter the offset is the SQL's: no row before it is read
    every = store.search(ALICE, limit=1000)
    assert [i.key for i in newest] == [i.key for i in every[5:15]]
    assert len(every) == 600 and all(a.updated_at >= b.updated_at for a, b in itertools.pairwise(every))
    pages.clear()
    rare = store.search(ALICE, filter={"rare": True}, limit=3)
    assert [i.value["n"] for i in rare] == [582, 485, 388]
    assert pages == [(3, 0)]  # the filter's number looked for in SQL: one page of what is wanted (ADR-0109)
    pages.clear()
    rare = store.search(ALICE, filter={"rare": {"$ne": False}}, limit=3)  # nothing SQL looks for
    assert [i.value["n"] for i in rare] == [582, 485, 388]
    assert pages[0] == (64, 0) and len(pages) < 5  # page after page, growing, only until 3 matched


# --- filters with dotted paths, against SqliteStore ---------------------------------------------------

NESTED: list[dict[str, Any]] = [
    {"text": "a", "user": {"access-level": "nested", "level": 1, "tags": ["a", "b"], "flag": True}},
    {"text": "b", "user": {"access-level": "top", "level": 2, "tags": ["a"], "flag": False}},
    {"text": "c", "user": {"level": 3, "tags": [], "deep": {"x": "y"}}},
    {"text": "d", "user": {"access-level": "nested", "level": 4, "deep": {"x": "z"}}},
    {"text": "e", "user": {"level": 5, "access-level": None}, "user.level": 99},
]
DOTTED_FILTERS: list[dict[str, Any]] = [
    {"user.access-level": "nested"}, {"user.access-level": "top"}, {"user.level": 3}, {"user.level": 3.0},
    {"user.level": {"$gt": 2}}, {"user.level": {"$gte": 2, "$lt": 4}}, {"user.level": {"$lte": 1}},
    {"user.level": {"$ne": 3}}, {"user.level": {"$eq": 4}}, {"user.tags": ["a", "b"]}, {"user.tags": []},
    {"user.flag": True}, {"user.flag": False}, {"user.deep.x": "y"}, {"user.deep.x": "z"},
    {"user.missing": None}, {"user.access-level": None}, {"text": "c", "user.level": 3},
    {"user.level": 5},
]


@pytest.fixture
def sqlite_peer(tmp_path: Path) -> Iterator[SqliteStore]:
    conn = sqlite3.connect(tmp_path / "peer.db", check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    store = SqliteStore(conn)
    store.setup()
    yield store
    conn.close()


def found(store: BaseStore, prefix: tuple[str, ...], flt: dict[str, Any]) -> set[tuple[Any, ...]]:
    return {(tuple(i.namespace), i.key) for i in store.search(prefix, filter=flt, limit=100)}


@pytest.mark.parametrize("flt", DOTTED_FILTERS, ids=[repr(f) for f in DOTTED_FILTERS])
def test_dotted_filters_match_what_sqlite_store_matches(memory: MemorySystem, sqlite_peer: SqliteStore,
                                                        flt: dict[str, Any]) -> None:
    ours = FermixStore(memory, agent_id="ada")
    for i, value in enumerate(NESTED):
        for namespace in (ALICE, (*ALICE, "work")):
            for store in (ours, sqlite_peer):
                store.put(namespace, f"item-{i}", value)
    for prefix in (ALICE, (*ALICE, "work")):
        assert found(ours, prefix, flt) == found(sqlite_peer, prefix, flt)


def test_a_literal_dotted_field_still_matches_where_no_path_leads(memory: MemorySystem) -> None:
    # InMemoryStore reads a dotted field as a top-level key: where no nested path exists, so do we
    store = FermixStore(memory, agent_id="ada")
    store.put(ALICE, "flat", {"user.name": "ada"})
    store.put(ALICE, "nested", {"user": {"name": "ada"}, "user.name": "someone else"})
    assert {i.key for i in store.search(ALICE, filter={"user.name": "ada"})} == {"flat", "nested"}


@pytest.mark.usefixtures("every_store")
def test_gets_pages_and_batches_on_every_store(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        store = FermixStore(memory, agent_id="ada", trust="operator", all_owners=True, default_owner="shared")
        store.batch([PutOp(ns, f"k{i}", {"n": i, "user": {"level": i % 3}})
                     for i in range(30) for ns in (ALICE, (*ALICE, "work"), ("memories", "alicex"), ("docs",))])
        item = store.get((*ALICE, "work"), "k7")
        assert item is not None and item.value == {"n": 7, "user": {"level": 1}}
        assert keys(store.search(ALICE, limit=100)) == {(ns, f"k{i}") for i in range(30)
                                                        for ns in (ALICE, (*ALICE, "work"))}
        page = store.search(ALICE, filter={"user.level": 2}, limit=5, offset=2)
        assert len(page) == 5 and all(i.value["user"]["level"] == 2 for i in page)
        assert len(store.search((), limit=1000)) == 120
        assert memory.verify().ok
