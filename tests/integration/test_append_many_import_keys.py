"""A batch of keyed appends reads the keys its conversations hold once per conversation (ADR-0070):
any number of keys, several conversations, keys held before the batch or earlier in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.import_keys import KEYS_PER_STATEMENT
from fermix_memory.domain import events as ev

AGENT, OWNER = "ada", "alice"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home", config={}) as opened:
        yield opened


def keyed(conversation: str, keys: range, text: str) -> list[dict[str, str]]:
    return [{"agent_id": AGENT, "owner_id": OWNER, "conversation": conversation, "role": "user",
             "content": f"{text} {k}", "idempotency_key": f"k{k}"} for k in keys]


@pytest.mark.usefixtures("every_store")
def test_more_keys_than_one_statement_reads_in_several_conversations(memory: MemorySystem) -> None:
    many = KEYS_PER_STATEMENT + 20
    held = memory.append_messages(keyed("t:1", range(0, many, 7), "first") + keyed("t:2", range(3), "first"))
    again = keyed("t:1", range(many), "again") + keyed("t:2", range(5), "again") + keyed("t:1", range(2), "twice")
    ids = memory.append_messages(again)
    assert len(ids) == len(again)
    first_t1 = dict(zip(range(0, many, 7), held, strict=False))
    for k in range(0, many, 7):  # held before the batch: the holder's id, nothing new
        assert ids[k] == first_t1[k]
    t2 = ids[many:many + 5]
    assert t2[:3] == held[-3:] and t2[3] < t2[4]
    assert ids[-2:] == ids[:2], "a key given twice in one batch is recorded once"
    new = [i for k, i in enumerate(ids[:many]) if k % 7]
    assert len(set(new)) == len(new) and min(new) > max(held)
    appended = [r for r in memory.events() if isinstance(r.event, ev.MessageAppended)]
    assert len(appended) == len(held) + len(new) + 2
    assert sorted(m.content for m in memory.history(AGENT, "t:2")) == [
        "again 3", "again 4", "first 0", "first 1", "first 2"]
