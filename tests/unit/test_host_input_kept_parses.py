"""A command's hook keeps each field's last parse of an immutable value (the same agent, owner and
conversation, call after call): a run of calls through one hook gives, call by call, what a hook
that never saw a call before gives, the same command or the same error, whatever comes in
between (bad values, the same object again, a mapping changed in place between two calls)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.application.commands import Recall, WriteMemory
from fermix_memory.application.host_input import command_hook
from fermix_memory.domain.operations import AddOperation
from fermix_memory.domain.values import ConversationKey

KEY = ConversationKey("langgraph-store", "alice.memories")
# Each field's values: the objects themselves are reused from call to call (as a host does).
POOLS: dict[str, list[Any]] = {
    "agent_id": ["ada", "bench", "", "a b", "x" * 300, 7, None, "ada\n", b"ada"],
    "owner_id": ["alice", "bob", "", 3, None, "al:ice"],
    "writer": ["tool", "operator", "reviewer", "bogus", 1, None, "TOOL"],
    "trust": ["guest", "operator", "root", None, 0],
    "conversation": [KEY, {"channel": "tg", "chat_id": "2"}, "tg:1", "bad", ("tg", "1"), ["tg", "3"], 7, None,
                     ConversationKey("slack", "c", "t")],
    "source_type": ["langgraph", "", "api", "a b", 5],
    "source_message_id": [1, True, None, 0, -1, 2**70, "3"],
    "reason": ["", "because", "x" * 2001, 1],
    "operations": [[AddOperation(category="context", key="k", value="v")],
                   ({"op": "add", "category": "fact", "key": "k", "value": "v"},), (), "bad", [{"op": "nope"}]],
}
RECALL_POOLS: dict[str, list[Any]] = {
    "query": ["tea", "", 3, None], "agent_id": POOLS["agent_id"], "owner_id": POOLS["owner_id"],
    "conversation": POOLS["conversation"], "scope": ["current", "all", "bogus", None],
    "limit": [10, True, 1, 0, -1, "5", 2**70],
    "key": [None, "k", 4],
}


def outcome(action: Any) -> object:
    try:
        return action()
    except Exception as exc:  # the outcome compared is the error itself
        return type(exc), str(exc)


def _calls(pools: dict[str, list[Any]]) -> st.SearchStrategy[list[dict[str, int]]]:
    """Calls of good values (the first two of each pool, or the field left out), each with now and
    then one or two fields of any value: most calls reach every field, so each is kept."""
    def one(names: list[str]) -> st.SearchStrategy[dict[str, int]]:
        good = st.fixed_dictionaries({name: st.sampled_from([0, 1]) for name in names})
        anything = st.sampled_from(names).flatmap(lambda name: st.integers(0, len(pools[name]) - 1).map(
            lambda index: {name: index}))
        left_out = st.sets(st.sampled_from([n for n in names if n not in ("operations", "agent_id", "owner_id")]))
        return st.tuples(good, st.lists(anything, max_size=2), left_out).map(
            lambda parts: {n: i for n, i in {**parts[0], **{k: v for d in parts[1] for k, v in d.items()}}.items()
                           if n not in parts[2]})
    return st.lists(one(list(pools)), min_size=1, max_size=12)


def _run(cls: type[Any], pools: dict[str, list[Any]], calls: list[dict[str, int]], mutate: bool) -> None:
    kept = command_hook(cls)
    for number, picks in enumerate(calls):
        data = {name: pools[name][index] for name, index in picks.items()}
        assert outcome(lambda d=data: kept(d, cls)) == outcome(lambda d=data: command_hook(cls)(d, cls))
        if mutate and number % 2:
            # A mapping handed over again after the host changed it is parsed again.
            pools["conversation"][1]["chat_id"] = f"chat {number}" if number % 4 == 1 else "2"


@settings(max_examples=200, deadline=None)
@given(calls=_calls(POOLS), mutate=st.booleans())
def test_a_write_command_is_what_a_fresh_hook_makes_of_each_call(calls: list[dict[str, int]], mutate: bool) -> None:
    pools = {name: list(values) for name, values in POOLS.items()}
    pools["conversation"][1] = {"channel": "tg", "chat_id": "2"}  # this run's own mapping
    _run(WriteMemory, pools, calls, mutate)


@settings(max_examples=100, deadline=None)
@given(calls=_calls(RECALL_POOLS))
def test_a_recall_command_is_what_a_fresh_hook_makes_of_each_call(calls: list[dict[str, int]]) -> None:
    _run(Recall, RECALL_POOLS, calls, False)


def test_the_same_objects_again_give_the_same_command() -> None:
    hook = command_hook(WriteMemory)
    data = {"operations": [AddOperation(category="context", key="k", value="v")], "agent_id": "bench",
            "owner_id": "alice", "writer": "tool", "trust": "guest", "conversation": KEY, "source_type": "langgraph"}
    first, second = hook(data, WriteMemory), hook(data, WriteMemory)
    assert first == second == command_hook(WriteMemory)(data, WriteMemory)
    assert outcome(lambda: hook({**data, "agent_id": "a b"}, WriteMemory)) == \
        outcome(lambda: command_hook(WriteMemory)({**data, "agent_id": "a b"}, WriteMemory))
