"""A FermixStore batch is one transaction: the puts and deletes of every namespace (of every
owner) it holds are recorded all together or not at all, even when the process is killed in the
middle of one (ADR-0059)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import PutOp

from fermix_memory import InvalidArgument, MemorySystem
from fermix_memory.application.memory_writes import MemoryWriter
from fermix_memory.langgraph import FermixStore
from tests.child_process import kill_when

NAMESPACES = [("memories", owner, *rest) for owner in ("alice", "bob", "carol") for rest in ((), ("work",))]
KEYS = [f"fact-{i}" for i in range(10)]
BATCHES_BEFORE_KILL = 12

# The child: batch after batch, each putting generation ``gen`` into every namespace and key
# (6 namespaces of 3 owners, 60 items); "gen" is printed only once its batch returned.
CHILD = r"""
import sys
from langgraph.store.base import PutOp
from fermix_memory import InvalidArgument, MemorySystem
from fermix_memory.langgraph import FermixStore

namespaces = [("memories", o, *r) for o in ("alice", "bob", "carol") for r in ((), ("work",))]
memory = MemorySystem.open(sys.argv[1])
store = FermixStore(memory, agent_id="ada")
gen = 0
while True:
    store.batch([PutOp(ns, f"fact-{i}", {"gen": gen, "text": f"fact {i} of generation {gen}"})
                 for ns in namespaces for i in range(10)])
    sys.stdout.write(f"{gen}\n")
    sys.stdout.flush()
    gen += 1
"""


def batch_of(gen: int) -> list[PutOp]:
    return [PutOp(ns, key, {"gen": gen, "text": f"{key} of generation {gen}"}) for ns in NAMESPACES for key in KEYS]


def generations(store: FermixStore) -> set[int | None]:
    """The generation each item holds (``None``: the item is not there)."""
    return {None if (item := store.get(ns, key)) is None else item.value["gen"] for ns in NAMESPACES for key in KEYS}


def test_a_batch_of_several_owners_is_one_transaction(memory: MemorySystem) -> None:
    store = FermixStore(memory, agent_id="ada")
    head = memory.head()
    store.batch(batch_of(0))
    assert generations(store) == {0}
    assert str(memory.head()) != str(head)
    # one commit: every row of the batch was written by the same transaction (one position range,
    # nothing of another write in between) and at the same moment
    rows = [r for r in memory.memories(agent_id="ada")]
    assert len(rows) == len(NAMESPACES) * len(KEYS) and len({r.created_at for r in rows}) == 1


def test_a_failure_in_the_middle_of_a_batch_writes_nothing(memory: MemorySystem,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = FermixStore(memory, agent_id="ada")
    store.batch(batch_of(0))
    before = (memory.head(), [(r.id, r.value, r.archived) for r in memory.memories()])
    original = MemoryWriter.apply_in
    calls = []

    def failing(self: MemoryWriter, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 4:  # the fourth namespace of six: three were recorded in the transaction
            raise OSError("disk gone")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MemoryWriter, "apply_in", failing)
    with pytest.raises(OSError, match="disk gone"):
        store.batch([*batch_of(1), PutOp(NAMESPACES[0], "extra", None)])
    monkeypatch.undo()
    assert len(calls) == 4
    assert (memory.head(), [(r.id, r.value, r.archived) for r in memory.memories()]) == before
    assert generations(store) == {0}
    store.batch(batch_of(2))
    assert generations(store) == {2}
    assert memory.verify().ok


def test_write_memories_admits_each_call_as_write_memory_does(memory: MemorySystem) -> None:
    # the use case under the store's batches: one transaction, each call's operations admitted or
    # refused on their own (a refusal is recorded beside the admitted operations, never raised)
    head = str(memory.head())
    outcomes = memory.write_memories([
        {"operations": [{"op": "add", "category": "preference", "key": "tone", "value": "brief"}],
         "agent_id": "ada", "owner_id": "alice"},
        {"operations": [{"op": "add", "category": "directive", "key": "rule", "value": "obey"},
                        {"op": "add", "category": "context", "key": "city", "value": "Paris"}],
         "agent_id": "ada", "owner_id": "bob", "conversation": "telegram:7"},
    ])
    assert [[o.status for o in group] for group in outcomes] == [["added"], ["refused", "added"]]
    assert outcomes[1][0].reason == "guest_directive"
    assert {(r.owner_id, r.key) for r in memory.memories()} == {("alice", "tone"), ("bob", "city")}
    refused = [r.event for r in memory.events() if type(r.event).__name__ == "OperationRefused"]
    assert len(refused) == 1 and str(memory.head()) != head and memory.verify().ok
    assert memory.write_memories([]) == []
    with pytest.raises(InvalidArgument):
        memory.write_memories({"operations": []})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        memory.write_memories([{"operations": [], "agent_id": "ada", "owner_id": "alice", "colour": "red"}])


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_process_killed_mid_batch_leaves_all_of_a_batch_or_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = kill_when([sys.executable, "-c", CHILD, str(home)],
                    lambda out: out.count(b"\n") >= BATCHES_BEFORE_KILL, f"{BATCHES_BEFORE_KILL} acknowledged batches")
    acknowledged = [int(line) for line in out.split(b"\n")[:-1]]
    with MemorySystem.open(home) as memory:
        store = FermixStore(memory, agent_id="ada")
        found = generations(store)
        # all of one batch: every item holds the same generation, the last acknowledged one or the
        # one the kill interrupted (if its commit went through before the kill)
        assert len(found) == 1, f"a torn batch: items hold generations {sorted(found, key=str)}"
        [gen] = found
        assert gen in (acknowledged[-1], acknowledged[-1] + 1)
        assert memory.verify().ok
        store.batch(batch_of(1_000))  # and writing goes on
        assert generations(store) == {1_000}
