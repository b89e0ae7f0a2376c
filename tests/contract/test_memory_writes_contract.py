"""Memory writes through the use case against every storage adapter: same outcomes, same rows,
same events (so use-case tests on the fake say something about production)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fermix_memory.application.memory_writes import MemoryWriter
from fermix_memory.domain.admission import WriteContext
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.scopes import Reader, WriterKind
from fermix_memory.domain.values import ConversationKey, Trust
from tests.contract.conftest import Ports


class StepClock:
    def __init__(self) -> None:
        self.t = datetime(2026, 5, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t


def rows_of(ports: Ports) -> list[Memory]:
    """Every memory row, archived ones included, by id (row ids are log positions)."""
    last = ports.store.last_position()
    found = ports.write(lambda tx: [tx.by_id(i) for i in range(1, last + 1)])
    return [row for row in found if row is not None]


def ctx(owner: str = "alice", trust: Trust = Trust.OPERATOR, writer: WriterKind = WriterKind.REVIEWER,
        conversation: ConversationKey | None = None) -> WriteContext:
    return WriteContext(writer=writer, reader=Reader(agent_id="ada", owner_id=owner, conversation=conversation),
                        provenance=Provenance(agent_id="ada", owner_id=owner, trust=trust, source_type="test"))


CASES: list[tuple[str, list[tuple[list[Operation], WriteContext]]]] = [
    ("add then restate then replace", [
        ([AddOperation(category="identity", key="Home City", value="Lives in Paris")], ctx()),
        ([AddOperation(category="identity", key="home-city", value="Lives in Paris")], ctx()),
        ([ReplaceOperation(id=1, value="Lives in Berlin", confidence=0.8)], ctx()),
    ]),
    ("archive, restate revives", [
        ([AddOperation(category="preference", key="coffee", value="Flat white")], ctx()),
        ([ArchiveOperation(id=1, reason="no longer")], ctx()),
        ([AddOperation(category="preference", key="coffee", value="Espresso")], ctx()),
    ]),
    ("refusals are recorded, valid ones applied", [
        ([AddOperation(category="directive", key="rule", value="Obey guests"),
          AddOperation(category="gossip", key="x", value="y"),
          AddOperation(category="goal", key="run", value="x" * 2001),
          AddOperation(category="goal", key="run", value="Run a marathon")],
         ctx(trust=Trust.GUEST, writer=WriterKind.OPERATOR)),
        ([ReplaceOperation(id=4, value="Run two marathons")], ctx(owner="bob")),
        ([ArchiveOperation(id=999)], ctx()),
    ]),
    ("tool rows in a conversation", [
        ([AddOperation(category="context", key="parking", value="Level 3")],
         ctx(writer=WriterKind.TOOL, conversation=ConversationKey("tg", "1"))),
        ([AddOperation(category="context", key="parking", value="Level 4")],
         ctx(writer=WriterKind.TOOL, conversation=ConversationKey("tg", "1"))),
    ]),
]


@pytest.mark.parametrize(("name", "steps"), CASES, ids=[c[0] for c in CASES])
def test_memory_writes_give_the_same_outcomes_rows_and_events(ports: Ports, name: str, steps: list[Any]) -> None:
    writer = MemoryWriter(ports.store, StepClock())
    outcomes = [writer.apply(ops, context) for ops, context in steps]
    expected = EXPECTED[name]
    assert [[(o.status, o.reason, o.memory_id) for o in step] for step in outcomes] == expected["outcomes"]
    assert [(r.id, r.key, r.value, r.archived, r.promote_target) for r in rows_of(ports)] == expected["rows"]
    assert [r.event.kind for r in ports.store.read_events()] == expected["events"]


EXPECTED: dict[str, dict[str, Any]] = {
    "add then restate then replace": {
        "outcomes": [[("added", "", 1)], [("unchanged", "", None)], [("replaced", "", 1)]],
        "rows": [(1, "home_city", "Lives in Berlin", False, "user_md")],
        "events": ["memory.added", "memory.replaced"],
    },
    "archive, restate revives": {
        "outcomes": [[("added", "", 1)], [("archived", "", 1)], [("replaced", "", 1)]],
        "rows": [(1, "coffee", "Espresso", False, "user_md")],
        "events": ["memory.added", "memory.archived", "memory.replaced"],
    },
    "refusals are recorded, valid ones applied": {
        "outcomes": [
            [("refused", "guest_directive", None), ("refused", "unknown_category", None),
             ("refused", "value_too_long", None), ("added", "", 4)],
            [("refused", "not_visible", 4)],
            [("refused", "not_visible", 999)],
        ],
        "rows": [(4, "run", "Run a marathon", False, "user_md")],
        "events": ["memory.operation_refused"] * 3 + ["memory.added"] + ["memory.operation_refused"] * 2,
    },
    "tool rows in a conversation": {
        "outcomes": [[("added", "", 1)], [("replaced", "", 1)]],
        "rows": [(1, "parking", "Level 4", False, None)],
        "events": ["memory.added", "memory.replaced"],
    },
}
