"""The same operations against LangGraph's ``InMemoryStore`` and ``FermixStore`` give the same
results on everything the namespace mapping supports (ADR-0028 says what differs: the order of a
search without a query, the ranking of one with a query, namespaces left empty)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from fermix_memory import MemorySystem
from fermix_memory.langgraph import FermixStore

NAMESPACES = [("memories", "alice"), ("memories", "alice", "work"), ("memories", "bob"), ("notes", "alice"),
              ("memories", "bob", "work", "old")]
PREFIXES = [("memories", "alice"), ("memories", "bob"), ("notes", "alice"), ("memories", "alice", "work"),
            ("memories", "bob", "work")]
KEYS = ["food", "Food", "3f2a-1b", "a b", "", "k." + "0" * 40, "ünïcode", "x" * 80]
TEXTS = ["likes coffee", "plays violin", "lives in paris", "drinks tea", "likes coffee and tea"]
QUERY_WORDS = ["coffee", "violin", "paris", "tea"]
FILTERS: list[dict[str, Any]] = [
    {"n": 1}, {"n": {"$gt": 1}}, {"n": {"$gte": 2, "$lt": 4}}, {"n": {"$ne": 2}}, {"n": {"$lte": 0}},
    {"n": {"$eq": 3}}, {"text": "drinks tea"}, {"tags": ["a", "b"]}, {"tags": []}, {"meta": {"lang": "en"}},
    {"meta": {"lang": {"$ne": "en"}}}, {"missing": None},
]

# Besides short facts, documents: an item is not bounded like a fact (ADR-0104); a NUL, unicode.
DOCUMENTS = ["notes " + "lives in paris and drinks tea and " * 400, "bin\x00ary", "ünï 🙂 " * 50]
values = st.fixed_dictionaries(
    {"text": st.sampled_from(TEXTS + DOCUMENTS), "n": st.integers(min_value=0, max_value=4)},
    optional={"tags": st.lists(st.sampled_from(["a", "b"]), max_size=2),
              "meta": st.fixed_dictionaries({"lang": st.sampled_from(["en", "fr"])})},
)
namespaces = st.sampled_from(NAMESPACES)
keys = st.sampled_from(KEYS)
operations = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values),
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(st.just("get"), namespaces, keys),
    st.tuples(st.just("search"), st.sampled_from(PREFIXES), st.sampled_from([None, *FILTERS]),
              st.integers(min_value=0, max_value=4), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("query"), st.sampled_from(PREFIXES), st.sampled_from(QUERY_WORDS),
              st.sampled_from([None, *FILTERS])),
    st.tuples(st.just("list"), st.sampled_from([None, ("memories",), ("*", "alice"), ("notes",)]),
              st.sampled_from([None, ("work",), ("alice",), ("*",)]), st.sampled_from([None, 1, 2, 3]),
              st.integers(min_value=0, max_value=5), st.integers(min_value=0, max_value=2)),
)

_agents = itertools.count()


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path_factory.mktemp("langgraph") / "home") as memory:
        yield memory


def fresh_store(memory: MemorySystem) -> FermixStore:
    """A store of its own agent: agents share nothing, so each example starts empty."""
    return FermixStore(memory, agent_id=f"agent-{next(_agents)}")


def seen(item: Item | None) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def live_copy(reference: InMemoryStore) -> InMemoryStore:
    """The reference with only its live items: InMemoryStore keeps listing a namespace once
    touched (a get, a delete) even when no item is left in it; fermix lists namespaces holding
    items."""
    copy = InMemoryStore()
    for item in reference.search((), limit=10_000):
        copy.put(item.namespace, item.key, item.value)
    return copy


def everything(store: BaseStore, prefix: tuple[str, ...], flt: dict[str, Any] | None) -> list[Any]:
    return [seen(i) for i in store.search(prefix, filter=flt, limit=1000 if isinstance(store, InMemoryStore)
                                          else 100)]


def compare(ours: FermixStore, reference: InMemoryStore, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "put":
        _, ns, key, value = op
        ours.put(ns, key, value)
        reference.put(ns, key, value)
    elif kind == "delete":
        _, ns, key = op
        ours.delete(ns, key)
        reference.delete(ns, key)
    elif kind == "get":
        _, ns, key = op
        assert seen(ours.get(ns, key)) == seen(reference.get(ns, key))
    elif kind == "search":
        _, prefix, flt, limit, offset = op
        whole = everything(ours, prefix, flt)
        assert sorted(map(repr, whole)) == sorted(map(repr, everything(reference, prefix, flt)))
        page = [seen(i) for i in ours.search(prefix, filter=flt, limit=limit, offset=offset)]
        assert page == whole[offset: offset + limit]  # pages of one order (most recently updated first)
    elif kind == "query":
        _, prefix, word, flt = op
        found = ours.search(prefix, query=word, filter=flt, limit=100)
        expected = [i for i in everything(reference, prefix, flt) if word in i[2]["text"].split()]
        assert sorted(map(repr, map(seen, found))) == sorted(map(repr, expected))
        assert all(i.score is not None for i in found)
    else:
        _, prefix, suffix, depth, limit, offset = op
        arguments: dict[str, Any] = dict(prefix=prefix, suffix=suffix, max_depth=depth, limit=limit, offset=offset)
        assert ours.list_namespaces(**arguments) == live_copy(reference).list_namespaces(**arguments)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(operations, min_size=1, max_size=25))
def test_a_sequence_of_operations_gives_what_the_in_memory_store_gives(memory: MemorySystem,
                                                                      ops: list[tuple[Any, ...]]) -> None:
    ours, reference = fresh_store(memory), InMemoryStore()
    for op in ops:
        compare(ours, reference, op)
    for ns, key in itertools.product(NAMESPACES, KEYS):  # and the end state is the same
        assert seen(ours.get(ns, key)) == seen(reference.get(ns, key))


def test_a_batch_reads_before_it_writes_and_the_last_put_wins(memory: MemorySystem) -> None:
    ours, reference = fresh_store(memory), InMemoryStore()
    ns = ("memories", "alice")
    for store in (ours, reference):
        store.put(ns, "b", {"text": "drinks tea", "n": 1})
    batch = [PutOp(ns, "a", {"text": "likes coffee", "n": 1}), GetOp(ns, "a"), PutOp(ns, "a", {"text": "x", "n": 2}),
             PutOp(ns, "b", None), SearchOp(ns), ListNamespacesOp(match_conditions=(MatchCondition("prefix", ns),)),
             GetOp(ns, "b")]
    got, want = ours.batch(batch), reference.batch(batch)
    assert [seen(r) if not isinstance(r, list) else [seen(i) if isinstance(i, Item) else i for i in r]
            for r in got] == \
           [seen(r) if not isinstance(r, list) else [seen(i) if isinstance(i, Item) else i for i in r]
            for r in want]
    for store in (ours, reference):
        assert seen(store.get(ns, "a")) == (ns, "a", {"text": "x", "n": 2})
        assert store.get(ns, "b") is None


def test_values_of_every_json_shape_come_back_exactly(memory: MemorySystem, tmp_path: Path) -> None:
    ours, reference = fresh_store(memory), InMemoryStore()
    ns = ("memories", "alice")
    value = {"text": "a\x7fb\ud800c\u2028 \n\t\x00 \u2018quoted\u2019 \"q\"", "n": -1.5e300, "big": 2**80, "t": True,
             "none": None, "nested": {"list": [1, [2, {"x": []}]], "empty": {}}, "": "empty key", "é": "ü"}
    for key in ("k", "K", " spaced key ", "a/b", "k." + "a" * 40, "x" * 5, "\ud83d", ""):
        for store in (ours, reference):
            store.put(ns, key, value)
        assert seen(ours.get(ns, key)) == seen(reference.get(ns, key)) == (ns, key, value)


def test_every_filter_and_query_on_a_fixed_set_of_items(memory: MemorySystem) -> None:
    ours, reference = fresh_store(memory), InMemoryStore()
    for i, (ns, key) in enumerate(itertools.product(NAMESPACES, KEYS[:4])):
        value: dict[str, Any] = {"text": TEXTS[i % len(TEXTS)], "n": i % 5, "tags": ["a", "b"][: i % 3],
                                 "meta": {"lang": ["en", "fr"][i % 2]}}
        for store in (ours, reference):
            store.put(ns, key, value)
    for prefix, flt in itertools.product(PREFIXES, [None, *FILTERS]):
        compare(ours, reference, ("search", prefix, flt, 3, 1))
        for word in QUERY_WORDS:
            compare(ours, reference, ("query", prefix, word, flt))
    for prefix, suffix, depth in itertools.product([None, ("memories",), ("*", "alice")], [None, ("work",)],
                                                   [None, 1, 2]):
        compare(ours, reference, ("list", prefix, suffix, depth, 100, 0))
        compare(ours, reference, ("list", prefix, suffix, depth, 2, 1))
