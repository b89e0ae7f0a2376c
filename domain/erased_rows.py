"""Memory rows an erasure took, as the as-of answers show them (ADR-0083). Pure.

An erasure redacts every event that carried a row's value, so a fold of the log no longer sees
the row at any moment. What the log keeps says that it existed and was erased, without a word
of what it said: the row's own log entry (its position is the row's id; its kind and time stay,
its payload is gone) and the content-free record of the erasure (``memory.forgotten``,
``owner.forgotten``, ``conversation.forgotten``: when, on whose request or by which retention
policy, which positions), followed by the signed receipt naming that record. Feed an
:class:`ErasedRowsFold` the log entries of one owner's memory stream and the records and
receipts that may name them; :func:`erased_at` keeps those that stood at a moment: recorded
then, erased after.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

import attrs

from fermix_memory.domain.event_base import DomainEvent
from fermix_memory.domain.memory_events import ConversationForgotten, MemoryAdded, MemoryForgotten, OwnerForgotten
from fermix_memory.domain.privacy_events import ErasureReceipted, SealedPayloadsLost

# The policy name of a row erased at its own ``expires_at`` (ADR-0082).
EXPIRY_POLICY = "expires_at"

ErasureRecord = MemoryForgotten | ConversationForgotten | OwnerForgotten | SealedPayloadsLost


@attrs.frozen(kw_only=True)
class LogRow:
    """One entry of the log as it stays after an erasure: position, kind, time, redacted or not."""

    position: int
    kind: str
    recorded_at: datetime
    redacted: bool


@attrs.frozen(kw_only=True)
class ErasedRow:
    """A memory row that an erasure took: which row, whose, when it was recorded, and when and by
    what it was erased (``record``: the erasure record's position, ``None`` when no record names
    it; ``receipt``: the position of the signed receipt of that erasure, when there is one).
    Never anything the row said: no key, value, category or scope."""

    memory_id: int
    agent_id: str
    owner_id: str
    recorded_at: datetime
    erased_at: datetime | None = None
    record: int | None = None
    record_kind: str = ""
    source_type: str = ""
    source_id: str = ""
    receipt: int | None = None

    @property
    def erased_by(self) -> str:
        """Who or what asked for the erasure, in words (see :func:`erased_by`)."""
        return erased_by(self.source_type, self.source_id, self.record_kind)


_WHAT = {OwnerForgotten.kind: " (the whole owner)", ConversationForgotten.kind: " (a conversation)"}


def erased_by(source_type: str, source_id: str, record_kind: str = "") -> str:
    """``retention policy kiosk``, ``its own expiry``, ``operator olga (a conversation)``; an
    erasure no record names is ``an erasure not on record``."""
    if source_type == "retention":
        return "its own expiry" if source_id == EXPIRY_POLICY else f"retention policy {source_id}"
    if not source_type:
        return "an erasure not on record"
    who = f"operator {source_id}" if source_type == "forget" else f"{source_type} {source_id}".rstrip()
    return who + _WHAT.get(record_kind, "")


def _receipt_erased(body: str) -> frozenset[int]:
    """The positions a receipt's body names as erased (none when it cannot be read)."""
    try:
        erased = json.loads(body).get("erased", [])
        return frozenset(int(entry[0]) for entry in erased)
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        return frozenset()


def _named(event: ErasureRecord) -> Iterable[int]:
    """The positions an erasure record says it erased (rows and their events)."""
    if isinstance(event, MemoryForgotten):
        return (event.memory_id, *event.redacted_positions)
    if isinstance(event, ConversationForgotten):
        return (*event.memory_ids, *event.redacted_positions)
    return event.redacted_positions or ()


class ErasedRowsFold:
    """The erased rows of one agent's memory with one owner. Feed :meth:`add_row` the log
    entries of their memory stream (redacted ones included), :meth:`add_record` erasure records
    and :meth:`add_receipt` receipts, in any order; then read :meth:`rows`."""

    def __init__(self, agent_id: str, owner_id: str) -> None:
        self.agent_id = agent_id
        self.owner_id = owner_id
        self._erased: dict[int, datetime] = {}  # row -> when it was recorded
        self._records: dict[int, ErasureRecord] = {}
        self._owner_records: list[int] = []  # records of an owner's erasure that name no position
        self._receipts: dict[int, int] = {}  # record -> receipt
        self._receipt_erased: dict[int, frozenset[int]] = {}  # receipt -> the positions it names

    def add_row(self, row: LogRow) -> None:
        if row.kind == MemoryAdded.kind and row.redacted:
            self._erased[row.position] = row.recorded_at

    def add_record(self, position: int, event: DomainEvent) -> None:
        if isinstance(event, OwnerForgotten) and event.redacted_positions is None:
            if event.agent_id == self.agent_id and event.owner_id == self.owner_id:
                self._owner_records.append(position)
                self._records[position] = event
            return
        if isinstance(event, MemoryForgotten | ConversationForgotten | OwnerForgotten | SealedPayloadsLost):
            self._records[position] = event

    def add_receipt(self, position: int, event: ErasureReceipted) -> None:
        for record in event.records:
            self._receipts.setdefault(record, position)
        self._receipt_erased[position] = _receipt_erased(event.receipt)

    def candidates(self) -> list[int]:
        """Every erased row of the stream, by id."""
        return sorted(self._erased)

    def _record_of(self) -> dict[int, int]:
        """Each erased row's record: the first one naming it, else the first owner erasure after it
        that names no positions (an older record kind, which only counted them)."""
        found: dict[int, int] = {}
        for position in sorted(self._records):
            for named in _named(self._records[position]):
                if named in self._erased:
                    found.setdefault(named, position)
        for row in self._erased:
            if row not in found:
                later = [p for p in sorted(self._owner_records) if p > row]
                if later:
                    found[row] = later[0]
        return found

    def unexplained(self) -> list[int]:
        """The erased rows no record fed so far names."""
        found = self._record_of()
        return [row for row in self.candidates() if row not in found]

    def receipts_naming(self, rows: Iterable[int]) -> list[int]:
        """The receipts (of those fed) whose body names one of ``rows`` as erased."""
        wanted = set(rows)
        return sorted(p for p, erased in self._receipt_erased.items() if erased & wanted)

    def receipt_records(self, receipt: int) -> list[int]:
        """The erasure records a receipt covers."""
        return sorted(record for record, of in self._receipts.items() if of == receipt)

    def rows(self) -> list[ErasedRow]:
        found = self._record_of()
        rows = []
        for memory_id in self.candidates():
            row = ErasedRow(memory_id=memory_id, agent_id=self.agent_id, owner_id=self.owner_id,
                            recorded_at=self._erased[memory_id])
            record = found.get(memory_id)
            if record is not None:
                event = self._records[record]
                row = attrs.evolve(row, erased_at=event.at, record=record, record_kind=event.kind,
                                   source_type=event.provenance.source_type, source_id=event.provenance.source_id,
                                   receipt=self._receipts.get(record))
            rows.append(row)
        return rows


def erased_at(rows: Iterable[ErasedRow], moment: datetime) -> list[ErasedRow]:
    """The rows that stood at ``moment``: recorded at or before it, erased after it (a row whose
    erasure no record names stands from its recording on)."""
    return [r for r in rows if r.recorded_at <= moment and (r.erased_at is None or moment < r.erased_at)]
