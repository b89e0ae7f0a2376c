"""Where ``application.as_of.erased_rows`` finds each erased row's record (ADR-0083): on the memory
stream, on the owner's stream, through the receipts naming the rows, and, for an erasure made
before receipts were signed, among the records after the row; over a log held in a list."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from datetime import UTC, datetime, timedelta

import attrs

from fermix_memory.application.as_of import erased_as_of, erased_rows
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.application.streams import RECEIPT_STREAM, conversation_stream, memory_stream, owner_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.erased_rows import LogRow
from fermix_memory.domain.values import Category, ConversationKey, ScopeType, Trust

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
AGENT, OWNER = "ada", "alice"
MINE = memory_stream(AGENT, OWNER)
CONV = ConversationKey("kiosk", "alice")


def t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@attrs.define
class Log:
    """A log in a list: (position, stream, kind, at, event or None once redacted)."""

    entries: list[tuple[int, str, str, datetime, ev.DomainEvent | None]] = attrs.field(factory=list)
    reads: list[str] = attrs.field(factory=list)

    def add(self, stream: str, event: ev.DomainEvent, *, redacted: bool = False) -> int:
        position = len(self.entries) + 1
        self.entries.append((position, stream, event.kind, event.at, None if redacted else event))
        return position

    def _recorded(self, entry: tuple[int, str, str, datetime, ev.DomainEvent | None]) -> RecordedEvent:
        position, stream, _, _, event = entry
        assert event is not None
        return RecordedEvent(position=position, stream=stream, version=1, event=event)

    # the EventStore reads erased_rows makes
    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        self.reads.append(f"stream {stream}")
        return iter([self._recorded(e) for e in self.entries if e[4] is not None and e[0] > after
                     and stream in (None, e[1])])

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        return {e[1]: e[0] for e in self.entries if e[1].startswith(stream_prefix)}

    # the ErasureLog
    def stream_rows(self, stream: str) -> list[LogRow]:
        return [LogRow(position=p, kind=k, recorded_at=at, redacted=e is None)
                for p, s, k, at, e in self.entries if s == stream]

    def events_at(self, positions: Collection[int]) -> list[RecordedEvent]:
        self.reads.append(f"at {sorted(positions)}")
        return [self._recorded(e) for e in self.entries if e[0] in positions and e[4] is not None]

    def records_after(self, position: int, kinds: Collection[str]) -> Iterator[RecordedEvent]:
        self.reads.append(f"after {position}")
        return iter([self._recorded(e) for e in self.entries if e[0] > position and e[2] in kinds
                     and e[4] is not None])


def added(minutes: float, key: str = "pet") -> ev.MemoryAdded:
    return ev.MemoryAdded(at=t(minutes), agent_id=AGENT, owner_id=OWNER, scope_type=ScopeType.OWNER, scope_id=OWNER,
                          category=Category.IDENTITY, key=key, value="v",
                          provenance=ev.Provenance(agent_id=AGENT, owner_id=OWNER))


def prov(source_type: str = "forget", source_id: str = "olga") -> ev.Provenance:
    return ev.Provenance(agent_id=AGENT, owner_id=OWNER, trust=Trust.OPERATOR, source_type=source_type,
                         source_id=source_id)


def conversation_forgotten(minutes: float, rows: tuple[int, ...]) -> ev.ConversationForgotten:
    return ev.ConversationForgotten(at=t(minutes), agent_id=AGENT, conversation=CONV, owners=(OWNER,),
                                    memory_ids=rows, redacted_positions=rows, provenance=prov("retention", "kiosk"))


def receipt(minutes: float, records: tuple[int, ...], erased: list[int]) -> ev.ErasureReceipted:
    body = json.dumps({"erased": [[p, "00"] for p in erased]})
    return ev.ErasureReceipted(at=t(minutes), records=records, receipt=body, signature="00")


def test_no_erased_row_reads_nothing_more() -> None:
    log = Log()
    log.add(MINE, added(1))
    assert erased_rows(log, log, AGENT, OWNER) == []  # type: ignore[arg-type]
    assert log.reads == []


def test_records_on_the_memory_and_owner_streams() -> None:
    log = Log()
    one, two = log.add(MINE, added(1), redacted=True), log.add(MINE, added(2, "city"), redacted=True)
    log.add(MINE, added(3, "kept"))
    record = log.add(MINE, ev.MemoryForgotten(at=t(5), agent_id=AGENT, owner_id=OWNER, memory_id=one,
                                              redacted_positions=(one,), provenance=prov()))
    log.add(owner_stream(AGENT, OWNER), ev.OwnerForgotten(at=t(6), agent_id=AGENT, owner_id=OWNER, erased_events=1,
                                                          redacted_positions=(two,), provenance=prov()))
    rows = erased_rows(log, log, AGENT, OWNER)  # type: ignore[arg-type]
    assert [(r.memory_id, r.erased_at, r.erased_by) for r in rows] == [
        (one, t(5), "operator olga"), (two, t(6), "operator olga (the whole owner)")]
    # The memory stream's record alone is read (not its other events); no record looked for further.
    assert log.reads == [f"at [{record}]", f"stream {owner_stream(AGENT, OWNER)}", f"stream {RECEIPT_STREAM}"]


def test_a_conversations_record_found_through_its_receipt() -> None:
    log = Log()
    row = log.add(MINE, added(1), redacted=True)
    record = log.add(conversation_stream(AGENT, CONV), conversation_forgotten(5, (row,)))
    log.add(RECEIPT_STREAM, receipt(5, (99,), [50]))  # another erasure's receipt: not read
    signed = log.add(RECEIPT_STREAM, receipt(5, (record,), [row]))
    [erased] = erased_rows(log, log, AGENT, OWNER)  # type: ignore[arg-type]
    assert (erased.record, erased.erased_by, erased.receipt) == (record, "retention policy kiosk", signed)
    assert f"at [{record}]" in log.reads and not any(read.startswith("after") for read in log.reads)


def test_an_erasure_without_a_receipt_is_found_among_the_records_after_the_row() -> None:
    log = Log()
    log.add(MINE, added(0.5))
    row = log.add(MINE, added(1), redacted=True)
    record = log.add(conversation_stream(AGENT, CONV), conversation_forgotten(5, (row,)))
    [erased] = erased_rows(log, log, AGENT, OWNER)  # type: ignore[arg-type]
    assert (erased.record, erased.receipt) == (record, None)
    assert log.reads[-1] == f"after {row}"
    assert [r.memory_id for r in erased_as_of(log, log, t(4), agent_id=AGENT)] == [row]  # type: ignore[arg-type]
    assert erased_as_of(log, log, t(5)) == []  # type: ignore[arg-type]
    assert erased_as_of(log, log, t(0.9), owner_id=OWNER) == []  # type: ignore[arg-type]
    assert erased_as_of(log, log, t(4), owner_id="bob") == []  # type: ignore[arg-type]
