"""The fold of erasure records into erased rows (domain/erased_rows.py, ADR-0083): which rows of a
memory stream were erased, by which record and receipt, and which stood at a moment."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from fermix_memory.domain import events as ev
from fermix_memory.domain.erased_rows import (
    EXPIRY_POLICY,
    ErasedRow,
    ErasedRowsFold,
    LogRow,
    erased_at,
    erased_by,
)
from fermix_memory.domain.values import ConversationKey, Trust

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
AGENT, OWNER = "ada", "alice"


def t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def provenance(source_type: str = "forget", source_id: str = "olga") -> ev.Provenance:
    return ev.Provenance(agent_id=AGENT, owner_id=OWNER, trust=Trust.OPERATOR, source_type=source_type,
                         source_id=source_id)


def row(position: int, minutes: float, *, redacted: bool = True, kind: str = "memory.added") -> LogRow:
    return LogRow(position=position, kind=kind, recorded_at=t(minutes), redacted=redacted)


def forgot_row(memory_id: int, minutes: float, positions: tuple[int, ...] = (), **prov: str) -> ev.MemoryForgotten:
    return ev.MemoryForgotten(at=t(minutes), agent_id=AGENT, owner_id=OWNER, memory_id=memory_id,
                              redacted_positions=positions, provenance=provenance(**prov))


def forgot_owner(minutes: float, positions: tuple[int, ...] | None, *, agent: str = AGENT,
                 owner: str = OWNER) -> ev.OwnerForgotten:
    return ev.OwnerForgotten(at=t(minutes), agent_id=agent, owner_id=owner, erased_events=len(positions or ()),
                             redacted_positions=positions, provenance=provenance())


def forgot_conversation(minutes: float, memory_ids: tuple[int, ...], positions: tuple[int, ...] = (),
                        **prov: str) -> ev.ConversationForgotten:
    return ev.ConversationForgotten(at=t(minutes), agent_id=AGENT, conversation=ConversationKey("kiosk", "alice"),
                                    owners=(OWNER,), memory_ids=memory_ids, redacted_positions=positions,
                                    provenance=provenance(**prov))


def receipted(minutes: float, records: tuple[int, ...], erased: list[int] | str) -> ev.ErasureReceipted:
    body = erased if isinstance(erased, str) else json.dumps({"erased": [[p, "ab"] for p in erased]})
    return ev.ErasureReceipted(at=t(minutes), records=records, receipt=body, signature="00")


def test_only_redacted_memory_adds_are_erased_rows() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_row(row(1, 1))
    fold.add_row(row(2, 1, redacted=False))
    fold.add_row(row(3, 2, kind="memory.replaced"))
    fold.add_row(row(5, 3))
    assert fold.candidates() == [1, 5]
    assert fold.unexplained() == [1, 5]
    assert fold.rows() == [ErasedRow(memory_id=1, agent_id=AGENT, owner_id=OWNER, recorded_at=t(1)),
                           ErasedRow(memory_id=5, agent_id=AGENT, owner_id=OWNER, recorded_at=t(3))]
    assert fold.rows()[0].erased_by == "an erasure not on record"


def test_a_row_record_names_when_and_by_whom_and_its_receipt() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_row(row(4, 1))
    fold.add_record(9, forgot_row(4, 20, (4, 6)))
    fold.add_receipt(11, receipted(21, (9,), [4, 6]))
    [erased] = fold.rows()
    assert erased == ErasedRow(memory_id=4, agent_id=AGENT, owner_id=OWNER, recorded_at=t(1), erased_at=t(20),
                               record=9, record_kind="memory.forgotten", source_type="forget", source_id="olga",
                               receipt=11)
    assert erased.erased_by == "operator olga"
    assert fold.unexplained() == []


def test_a_record_naming_the_row_only_by_its_positions_counts_too() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_row(row(4, 1))
    fold.add_record(9, forgot_owner(20, (3, 4, 5)))
    fold.add_record(12, forgot_conversation(30, (), (4,)))
    [erased] = fold.rows()
    assert (erased.record, erased.record_kind, erased.erased_by) == (9, "owner.forgotten",
                                                                     "operator olga (the whole owner)")


def test_the_first_record_naming_a_row_is_its_erasure_whatever_the_order_fed() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_row(row(4, 1))
    fold.add_record(30, forgot_owner(40, (4,)))
    fold.add_record(20, forgot_conversation(30, (4,), source_type="retention", source_id="kiosk"))
    [erased] = fold.rows()
    assert (erased.record, erased.erased_at, erased.erased_by) == (20, t(30), "retention policy kiosk")


def test_records_of_other_rows_or_kinds_are_ignored() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_row(row(4, 1))
    fold.add_record(9, forgot_row(5, 20, (5, 6)))
    fold.add_record(10, ev.RetentionRan(at=t(20), policies=("kiosk",), conversations=0, memory_rows=1,
                                        erased_events=1, head_before="1:ab", records=(4,), provenance=provenance()))
    assert fold.unexplained() == [4]
    assert fold.rows()[0].record is None


def test_a_conversation_record_names_the_rows_learnt_from_it() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_row(row(4, 1))
    fold.add_record(9, forgot_conversation(20, (4,), source_type="retention", source_id=EXPIRY_POLICY))
    [erased] = fold.rows()
    assert (erased.record_kind, erased.erased_by) == ("conversation.forgotten", "its own expiry")


def test_an_older_owner_record_without_positions_takes_the_rows_before_it() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    for position in (2, 6, 12):
        fold.add_row(row(position, position))
    fold.add_record(5, forgot_owner(5, None))
    fold.add_record(10, forgot_owner(10, None))
    fold.add_record(8, forgot_owner(8, None, owner="bob"))  # another owner's: not this stream's
    fold.add_record(7, forgot_owner(7, None, agent="max"))
    assert {r.memory_id: r.record for r in fold.rows()} == {2: 5, 6: 10, 12: None}
    assert fold.unexplained() == [12]


def test_an_older_owner_record_gives_way_to_a_record_naming_the_row() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_row(row(2, 2))
    fold.add_record(8, forgot_owner(8, None))
    fold.add_record(9, forgot_row(2, 9))
    assert fold.rows()[0].record == 9


def test_receipts_say_which_records_they_cover_and_which_rows_they_name() -> None:
    fold = ErasedRowsFold(AGENT, OWNER)
    fold.add_receipt(20, receipted(20, (9, 10), [4, 6]))
    fold.add_receipt(21, receipted(21, (12,), [7]))
    fold.add_receipt(22, receipted(22, (9,), [8]))  # a record covered twice keeps its first receipt
    fold.add_receipt(23, receipted(23, (13,), "not json"))
    fold.add_receipt(24, receipted(24, (14,), json.dumps([1, 2])))
    fold.add_receipt(25, receipted(25, (15,), json.dumps({"erased": [["x", "ab"]]})))
    fold.add_receipt(26, receipted(26, (16,), json.dumps({"erased": [[]]})))
    fold.add_receipt(27, receipted(27, (17,), json.dumps({"records": []})))
    assert fold.receipts_naming([6, 7]) == [20, 21]
    assert fold.receipts_naming([8]) == [22]
    assert fold.receipts_naming([5]) == []
    assert fold.receipt_records(20) == [9, 10]
    assert fold.receipt_records(22) == []
    fold.add_row(row(6, 1))
    fold.add_record(9, forgot_row(6, 20))
    assert fold.rows()[0].receipt == 20


def test_erased_by_in_words() -> None:
    assert erased_by("retention", "kiosk") == "retention policy kiosk"
    assert erased_by("retention", EXPIRY_POLICY, "memory.forgotten") == "its own expiry"
    assert erased_by("forget", "olga") == "operator olga"
    assert erased_by("forget", "olga", "memory.forgotten") == "operator olga"
    assert erased_by("forget", "olga", "conversation.forgotten") == "operator olga (a conversation)"
    assert erased_by("import", "", "owner.forgotten") == "import (the whole owner)"
    assert erased_by("import", "home-b") == "import home-b"
    assert erased_by("", "olga") == "an erasure not on record"


@pytest.mark.parametrize(("minutes", "standing"), [(0.5, []), (1, [4]), (5, [4, 6]), (9.9, [4, 6]), (10, [6]),
                                                    (20, [6])])
def test_a_row_stands_from_its_recording_until_its_erasure(minutes: float, standing: list[int]) -> None:
    rows = [ErasedRow(memory_id=4, agent_id=AGENT, owner_id=OWNER, recorded_at=t(1), erased_at=t(10)),
            ErasedRow(memory_id=6, agent_id=AGENT, owner_id=OWNER, recorded_at=t(5))]
    assert [r.memory_id for r in erased_at(rows, t(minutes))] == standing
