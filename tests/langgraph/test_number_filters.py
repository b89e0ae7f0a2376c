"""A search filter's numbers are looked for in SQL first (ADR-0109), on each store: the rows the SQL
keeps are at least those the filter passes, whatever the stored values' types, the operands' types
and the rounding of large numbers; the filter then decides as it did without them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fermix_memory import InvalidArgument, MemorySystem, NumberBound
from fermix_memory.entrypoints.integrations.langgraph_filters import filter_numbers, item_matches
from fermix_memory.entrypoints.integrations.langgraph_items import CATEGORY, CHANNEL
from fermix_memory.langgraph import FermixStore

pytestmark = pytest.mark.usefixtures("every_store")

ALICE = ("memories", "alice")
CHAT = "memories.alice"

VALUES: dict[str, dict[str, object]] = {
    "int": {"n": 5}, "float": {"n": 5.5}, "negative": {"n": -3}, "zero": {"n": 0}, "negative-zero": {"n": -0.0},
    "true": {"n": True}, "false": {"n": False}, "number-text": {"n": "7"}, "spaced-number-text": {"n": " 4 "},
    "text": {"n": "seven"}, "null": {"n": None}, "list": {"n": [5]}, "object": {"n": {"v": 5}}, "missing": {"m": 5},
    "past-2^53": {"n": 2**53 + 1}, "past-2^54": {"n": 2**54 + 1},
    "rounds-up": {"n": 2**54 + 3}, "past-2^64": {"n": 2**64 + 3},
    "subnormal": {"n": 1e-310}, "largest": {"n": 1.7976931348623157e308}, "fraction": {"n": 0.1 + 0.2},
    "nested": {"user": {"level": 6}}, "dotted": {"user.level": 2}, "both": {"user": {"level": 1}, "user.level": 9},
    "nested-text": {"user": {"level": "3"}}, "quoted-key": {'a"b': 4}, "backslash-key": {"a\\b": 4},
}

FILTERS: list[dict[str, object]] = [
    {"n": 5}, {"n": 5.0}, {"n": True}, {"n": False}, {"n": 0}, {"n": -0.0}, {"n": 0.30000000000000004},
    {"n": {"$eq": 5}}, {"n": {"$eq": 7}}, {"n": {"$gt": 5}}, {"n": {"$gte": 5}}, {"n": {"$lt": 5}},
    {"n": {"$lte": 0}}, {"n": {"$gt": "6"}}, {"n": {"$lt": "4.5"}}, {"n": {"$gte": 2**54}},
    {"n": {"$gte": 2**54 + 2}}, {"n": {"$gte": 2**54 + 4}},
    {"n": {"$lte": 2**54 + 2}}, {"n": {"$gte": 2**53 + 2}}, {"n": {"$gt": 2**64}},
    {"n": {"$gt": -1, "$lt": 6}}, {"n": {"$ne": 5}}, {"n": {"$gt": math.inf}}, {"n": {"$lt": math.inf}},
    {"n": {"$lt": 1e-300}}, {"n": {"$gt": 0}}, {"n": {"$gte": 1.7976931348623157e308}}, {"n": {"$lte": -0.0}},
    {"n": {"$gt": 10**400}}, {"n": {"$gt": True}}, {"n": {"$gt": 4, "$lte": 5.5}, "m": None},
    {"user.level": {"$gte": 2}}, {"user.level": 9}, {"user.level": 1}, {"user.level": {"$lt": 5}},
    {'a"b': {"$gt": 3}}, {"a\\b": 4}, {"user": {"level": 6}}, {"n": [5]},
]


def test_numbers_in_a_filter_leave_out_only_items_it_does_not_pass(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        store = FermixStore(memory, agent_id="ada")
        for key, value in VALUES.items():
            store.put(ALICE, key, value)
        # A row of the store's conversation that holds no item (another writer's text): never found.
        memory.write_memory({"op": "add", "category": CATEGORY, "key": "not_an_item", "value": "n: 5 {"},
                            agent_id="ada", owner_id="alice", writer="tool", conversation=(CHANNEL, CHAT))
        assert "n: 5 {" in {r.value for r in memory.conversation_memories(
            agent_id="ada", owner_id="alice", channel=CHANNEL, chat_prefix=CHAT, unshown_category=CATEGORY)}
        every = store.search(ALICE, limit=1000)
        assert sorted(i.key for i in every) == sorted(VALUES)
        for condition in FILTERS:
            expected = sorted(i.key for i in every if item_matches(i.value, condition))
            assert sorted(i.key for i in store.search(ALICE, filter=condition, limit=1000)) == expected, condition


def test_the_sql_store_keeps_the_rows_within_a_bound(tmp_path: Path, every_store: str) -> None:
    """The bound is the store's to use: SQLite reads it (only the row within it comes back);
    PostgreSQL does not (every row comes back, for the caller's filter to decide)."""
    with MemorySystem.open(tmp_path / "home") as memory:
        store = FermixStore(memory, agent_id="ada")
        for n in (1, 5, 9):
            store.put(ALICE, f"k{n}", {"n": n, "text": f"t{n}"})
        store.put(ALICE, "k-text", {"n": "5", "text": "five"})
        within = NumberBound(paths=(("value", "n"),), low=4.0, high=6.0)
        above = NumberBound(paths=(("missing",), ("value", "n")), low=4.0, text_passes=True)
        found, more = ({json.loads(r.value)["key"] for r in memory.conversation_memories(
            agent_id="ada", owner_id="alice", channel=CHANNEL, chat_prefix=CHAT, unshown_category=CATEGORY,
            numbers=[bound])} for bound in (within, above))
        if every_store == "sqlite":
            assert (found, more) == ({"k5"}, {"k5", "k9", "k-text"})  # above 4: a number written as text too
        else:
            assert found == more == {"k1", "k5", "k9", "k-text"}
        with pytest.raises(InvalidArgument, match="NumberBound"):
            memory.conversation_memories(agent_id="ada", channel=CHANNEL, numbers=[(("value", "n"), 1, 2)])


@pytest.mark.sqlite_only("a pure function of the filter: no store is asked")
def test_the_bounds_of_a_filter() -> None:
    paths = (("value", "n"),)
    [equal] = filter_numbers({"n": 5})
    assert (equal.paths, equal.text_passes) == (paths, False) and equal.low < 5 < equal.high
    assert equal.high - equal.low < 1e-6  # room for a rounding, not for another number
    above, below = filter_numbers({"n": {"$gt": 2, "$lte": "8"}})  # "8" compares as a number
    assert (above.paths, above.high, above.text_passes, below.low, below.text_passes) == (paths, None, True, None, True)
    assert 2 - 1e-6 < above.low < 2 < 8 < below.high < 8 + 1e-6
    assert filter_numbers({"user.level": {"$eq": 0}}) == (
        NumberBound((("value", "user", "level"), ("value", "user.level")), 0.0, 0.0, False),)
    # Nothing bounds a condition on text, on a nested object, a list, an inequality, or a number
    # that no float holds.
    for condition in ({"n": "5"}, {"n": {"$eq": "5"}}, {"n": {"$ne": 5}}, {"n": [5]}, {"user": {"level": 5}},
                      {"n": {"$eq": {"$gt": 5}}}, {"n": {"$eq": [5]}},
                      {"n": {"$gt": math.nan}}, {"n": {"$gt": 10**400}}, {"n": {"$lt": "many"}}, {"n": None}):
        assert filter_numbers(condition) == (), condition
    assert filter_numbers(None) == ()
