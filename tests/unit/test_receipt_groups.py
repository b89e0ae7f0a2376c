"""Which records one receipt covers when a crash left several without one: a retention run's
records with its ``retention.ran``, one forget of an owner (one record per agent) together,
every other record alone, and the records an erasure names as one."""

from __future__ import annotations

from datetime import UTC, datetime

from fermix_memory.application.receipts import _groups
from fermix_memory.domain import events as ev

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _row(at: datetime = AT, source: str = "retention", by: str = "kiosk") -> ev.MemoryForgotten:
    return ev.MemoryForgotten(at=at, agent_id="ada", owner_id="o", memory_id=1, redacted_positions=(1,),
                              provenance=ev.Provenance(agent_id="ada", owner_id="o", source_type=source, source_id=by))


def _owner(agent: str, owner: str = "alice", at: datetime = AT) -> ev.OwnerForgotten:
    return ev.OwnerForgotten(at=at, agent_id=agent, owner_id=owner, erased_events=1, redacted_positions=(1,),
                             provenance=ev.Provenance(agent_id=agent, owner_id=owner, source_type="forget",
                                                      source_id="cli"))


def _run(records: tuple[int, ...]) -> ev.RetentionRan:
    return ev.RetentionRan(at=AT, policies=("kiosk",), conversations=0, memory_rows=len(records), erased_events=1,
                           head_before="", records=records,
                           provenance=ev.Provenance(agent_id="", owner_id="", source_type="retention",
                                                    source_id="kiosk"))


def test_a_run_an_owner_forget_and_single_records_are_one_erasure_each() -> None:
    later = datetime(2026, 1, 2, tzinfo=UTC)
    erasing = {3: _row(), 4: _row(), 5: _run((3, 4)), 8: _owner("ada"), 9: _owner("max"), 12: _owner("ada", "bob"),
               14: _row(source="forget", by="cli"), 15: _row(source="forget", by="cli"), 20: _owner("ada", at=later)}
    assert _groups(erasing, set(erasing), set()) == [{3, 4, 5}, {8, 9}, {12}, {14}, {15}, {20}]


def test_only_records_without_a_receipt_are_grouped_and_the_named_ones_go_together() -> None:
    erasing = {3: _row(), 4: _row(), 5: _run((3, 4)), 8: _owner("ada"), 9: _owner("max")}
    assert _groups(erasing, {5, 8, 9}, set()) == [{5}, {8, 9}]
    assert _groups(erasing, {3, 4, 5}, {3, 4}) == [{3, 4, 5}]  # the run's items named: the run joins them
    assert _groups(erasing, {3, 8}, {3, 8, 99}) == [{3, 8}]  # a position that is no record is left out
    assert _groups(erasing, set(), set()) == []
