"""FermixStore's keyed reads and writes on each store (the SQLite file, then PostgreSQL): a get
is one read by the row's unique key, a put of a known namespace goes straight to admission."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.sqlite import SqliteStore

from fermix_memory import MemorySystem
from fermix_memory.application.memory_writes import OperationOutcome
from fermix_memory.domain.values import MAX_ITEM_VALUE_CHARS, MAX_VALUE_CHARS, ConversationKey
from fermix_memory.langgraph import FermixStore, ValueNotStorable

pytestmark = pytest.mark.usefixtures("every_store")

ALICE = ("memories", "alice")


def test_get_reads_what_put_wrote_and_nothing_else(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        store = FermixStore(memory, agent_id="ada")
        store.put(ALICE, "colour", {"text": "likes green"})  # maps the namespace
        store.put(ALICE, "Odd Key/1", {"n": 1})  # a known namespace: the direct way
        store.put(ALICE, "colour", {"text": "likes blue"})  # the same key: replaced
        item = store.get(ALICE, "colour")
        assert item is not None and item.value == {"text": "likes blue"} and item.namespace == ALICE
        assert item.created_at <= item.updated_at
        odd = store.get(ALICE, "Odd Key/1")
        assert odd is not None and odd.value == {"n": 1} and odd.key == "Odd Key/1"
        assert store.get(("memories", "bob"), "colour") is None
        assert store.get(ALICE, "missing") is None
        with pytest.raises(ValueNotStorable):
            store.put(ALICE, "bad", {"t": (1, 2)})
        store.delete(ALICE, "colour")
        assert store.get(ALICE, "colour") is None
        live = [r.key for r in memory.memories(agent_id="ada", owner_id="alice", include_archived=False)]
        assert len(live) == 1 and live[0].startswith("k.")  # the odd key's digest


def test_memory_value_by_key_reads_the_live_row_of_a_conversation_scope(tmp_path: Path) -> None:
    chat = ConversationKey("langgraph-store", "memories.alice")
    with MemorySystem.open(tmp_path / "home") as memory:
        store = FermixStore(memory, agent_id="ada")
        store.batch([PutOp(ALICE, "tea", {"text": "green"})])
        found = memory.memory_value_by_key(agent_id="ada", owner_id="alice", conversation=chat, key="tea")
        row = memory.memory_by_key(agent_id="ada", owner_id="alice", conversation=chat, key="tea")
        assert found is not None and row is not None
        assert (found.id, found.value, found.created_at, found.updated_at) == (
            row.id, row.value, row.created_at, row.updated_at)
        assert memory.memory_value_by_key(agent_id="ada", owner_id="bob", conversation=chat, key="tea") is None
        assert memory.memory_value_by_key(agent_id="ada", owner_id="alice", conversation=chat, key="Tea") is None
        store.delete(ALICE, "tea")
        assert memory.memory_value_by_key(agent_id="ada", owner_id="alice", conversation=chat, key="tea") is None


def test_an_item_is_a_document_kept_whole_as_in_langgraphs_store(tmp_path: Path) -> None:
    """An item is not a fact a prompt file shows: it may take as much as a message's content
    (ADR-0104), as ``SqliteStore`` keeps it; replaced, searched, on every store. Past that it is
    refused and the batch with it records nothing; a fact written through the API keeps its
    2,000 characters."""
    profile = {"name": "Alice", "notes": [f"note {n}: " + "likes tea and long walks " * 20 for n in range(200)]}
    bigger = {**profile, "notes": profile["notes"] * 2}
    conn = sqlite3.connect(tmp_path / "peer.db", check_same_thread=False, isolation_level=None)
    peer = SqliteStore(conn)
    peer.setup()
    with MemorySystem.open(tmp_path / "home") as memory:
        ours = FermixStore(memory, agent_id="ada")
        for store in (ours, peer):
            store.put(ALICE, "profile", profile)
            store.put(ALICE, "profile", bigger)  # replaced by a larger one
            store.put(ALICE, "small", {"text": "hi"})
        for key in ("profile", "small"):
            got, want = ours.get(ALICE, key), peer.get(ALICE, key)
            assert got is not None and want is not None and got.value == want.value
        def found(store: BaseStore) -> list[tuple[str, object]]:  # SqliteStore's times are whole seconds: ties
            return sorted(((i.key, i.value) for i in store.search(ALICE)), key=lambda found: found[0])

        assert found(ours) == found(peer)
        ours.put(("memories", "bob", "work"), "plan", {"text": "ship it"})
        peer.put(("memories", "bob", "work"), "plan", {"text": "ship it"})
        for ask in ({}, {"prefix": ("memories", "bob")}, {"max_depth": 2}, {"suffix": ("work",)}):
            assert ours.list_namespaces(**ask) == peer.list_namespaces(**ask), ask  # read without the values
        head = memory.head()
        with pytest.raises(ValueNotStorable, match=f"limit {MAX_ITEM_VALUE_CHARS}"):
            ours.batch([PutOp(ALICE, "more", {"text": "fine"}),
                        PutOp(ALICE, "huge", {"text": "x" * MAX_ITEM_VALUE_CHARS})])
        assert memory.head() == head and ours.get(ALICE, "more") is None
        [outcome] = memory.write_memory({"op": "add", "category": "preference", "key": "tea",
                                         "value": "x" * (MAX_VALUE_CHARS + 1)}, agent_id="ada", owner_id="alice")
        assert isinstance(outcome, OperationOutcome) and outcome.status == "refused"
    conn.close()


def test_a_filter_is_read_in_sql_first_and_decided_as_langgraph_decides(tmp_path: Path) -> None:
    """The texts a filter asks for are looked for in SQL (``LIKE``, its wildcards escaped; letter
    case ignored there on SQLite), and each row found is then matched as ``InMemoryStore`` matches
    it: the same items, none missed, none extra."""
    from langgraph.store.memory import InMemoryStore

    values = ["50%_off!", "50X_off", "RARE", "rare", "ünïcode", "del\x7f", "a\"quote", "back\\slash"]
    reference = InMemoryStore()
    with MemorySystem.open(tmp_path / "home") as memory:
        ours = FermixStore(memory, agent_id="ada")
        for store in (ours, reference):
            for n, text in enumerate(values * 3):  # more rows than a first page of a filtered search
                store.put(ALICE, f"k{n}", {"tag": text, "n": n, "deep": {"tags": [text, "x"]}})
        for text in values:
            for condition in ({"tag": text}, {"tag": {"$eq": text}}, {"deep": {"tags": [text, "x"]}},
                              {"tag": {"$ne": text}}):
                got = sorted(i.key for i in ours.search(ALICE, filter=condition, limit=100))
                assert got == sorted(i.key for i in reference.search(ALICE, filter=condition, limit=100)), condition
