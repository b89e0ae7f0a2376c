"""Use case: the retention policies (ADR-0080) — what is due and when, and the run that erases it.

A run is one erase transaction: each due conversation or memory row is checked again inside it
(still there, still due), erased as ``forget --conversation`` / ``forget --memory`` erases it, with
the same record (provenance ``retention`` and the policy's name), and one ``retention.ran`` closes
the run. Then the prompt files are re-rendered (in the transaction), the store scrubbed, and the
erasure followed up (export keys, receipt) with every record's position. A second host running
the same policies at the same time finds nothing left and records nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Protocol

import attrs

from fermix_memory.application.erasure_finishing import followed_up
from fermix_memory.application.erasure_targets import conversation_content, rows_content
from fermix_memory.application.errors import StorageError
from fermix_memory.application.forget import OwnerFiles
from fermix_memory.application.log_transfer import head_value
from fermix_memory.application.privacy_ports import ErasureFollowUp
from fermix_memory.application.store_ports import Erasure, ErasureTransaction, EventStore, WriteTransaction
from fermix_memory.application.streams import RETENTION_STREAM, conversation_stream, memory_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.privacy_events import RetentionRan
from fermix_memory.domain.retention import (
    EXPIRES_AT,
    ConversationSummary,
    Outlook,
    RetentionPolicy,
    RowSummary,
    outlook,
    row_due,
)
from fermix_memory.domain.values import Trust

log = logging.getLogger("fermix_memory")


class RetentionCandidates(Protocol):
    """What retention reads to decide what is due (the store's projections, committed state)."""

    def conversations(self) -> list[ConversationSummary]:
        """Every conversation that holds messages, with its newest message and its trusts."""
        ...

    def rows(self, categories: Collection[str]) -> list[RowSummary]:
        """The memory rows (archived ones too) of ``categories``, and every row with its own expiry."""
        ...


@attrs.frozen(kw_only=True)
class PolicyStatus:
    """One policy now: what it covers, how much is due, when the next item falls due, and when
    a run last erased something under it."""

    name: str
    selector: str
    value: str
    after: str
    agent_id: str | None
    due_conversations: int
    due_rows: int
    next_due: datetime | None
    last_run: datetime | None


@attrs.frozen(kw_only=True)
class RetentionStatus:
    """Every policy (a row's own expiry last, named ``expires_at``) and when the next item falls due."""

    at: datetime
    policies: list[PolicyStatus]
    next_due: datetime | None

    @property
    def due(self) -> int:
        return sum(p.due_conversations + p.due_rows for p in self.policies)


@attrs.frozen(kw_only=True)
class RetentionItem:
    """An item a run erases (or, in a dry run, would erase): a conversation (its key) or a row."""

    policy: str
    agent_id: str
    conversation: str = ""
    memory_id: int = 0


@attrs.frozen(kw_only=True)
class RetentionReport:
    """What a run erased (``dry_run``: what it would erase now): the items, the events redacted,
    the position of its ``retention.ran`` (0: nothing recorded), the scrub's outcome and the
    position of the run's signed receipt (``None``: none was made)."""

    at: datetime
    dry_run: bool
    items: list[RetentionItem]
    erased_events: int = 0
    record: int = 0
    records: list[int] = attrs.field(factory=list)
    finished: bool = True
    remains: list[str] = attrs.field(factory=list)
    receipt: int | None = None
    rewrite_pending: bool = False  # another writer held the file: not rewritten yet (ADR-0095)

    @property
    def policies(self) -> list[str]:
        return list(dict.fromkeys(item.policy for item in self.items))


def _items(seen: Outlook) -> list[RetentionItem]:
    items: list[RetentionItem] = []
    for policy in seen.policies:
        items += [RetentionItem(policy=policy.name, agent_id=c.agent_id, conversation=str(c.conversation))
                  for c in policy.conversations]
        items += [RetentionItem(policy=policy.name, agent_id=r.agent_id, memory_id=r.memory_id) for r in policy.rows]
    return items


def _provenance(agent_id: str, owner_id: str, policy: str) -> ev.Provenance:
    return ev.Provenance(agent_id=agent_id, owner_id=owner_id, trust=Trust.OPERATOR, source_type="retention",
                         source_id=policy, reason=f"retention policy {policy}")


def _still_due(policies: Sequence[RetentionPolicy], row: Any, at: datetime) -> bool:
    """Whether a row read inside the run is due still (it may have been restated since)."""
    summary = RowSummary(memory_id=row.id, agent_id=row.agent_id, owner_id=row.owner_id, category=row.category,
                         updated_at=row.updated_at, expires_at=getattr(row, "expires_at", None))
    found = row_due(policies, summary)
    return found is not None and found.at <= at


class Retention:
    """The retention policies over one store. ``files``: the prompt files (re-rendered in the run's
    transaction, as a forget's are); ``follow_up``: what follows every committed erasure."""

    def __init__(self, store: EventStore, erasure: Erasure, candidates: RetentionCandidates, files: OwnerFiles,
                 policies: Sequence[RetentionPolicy], follow_up: ErasureFollowUp | None = None) -> None:
        self._store = store
        self._erasure = erasure
        self._candidates = candidates
        self._files = files
        self.policies = tuple(policies)
        self._follow_up = follow_up

    def outlook(self, now: datetime) -> Outlook:
        """What every policy covers now, read from the committed projections."""
        categories = {p.value for p in self.policies if p.covers_rows}
        conversations = self._candidates.conversations() if any(not p.covers_rows for p in self.policies) else []
        return outlook(self.policies, conversations, self._candidates.rows(categories), now)

    def status(self, now: datetime) -> RetentionStatus:
        """Per policy: due counts, the next due time and the last run that erased under it."""
        seen = self.outlook(now)
        last = self._last_runs()
        by_name = {p.name: p for p in self.policies}
        found: list[PolicyStatus] = []
        for item in seen.policies:
            policy = by_name.get(item.name)
            found.append(PolicyStatus(
                name=item.name, selector="expires_at" if policy is None else policy.selector,
                value="" if policy is None else policy.value, after="" if policy is None else policy.after,
                agent_id=None if policy is None else policy.agent_id, due_conversations=len(item.conversations),
                due_rows=len(item.rows), next_due=item.next_due, last_run=last.get(item.name)))
        return RetentionStatus(at=now, policies=found, next_due=seen.next_due)

    def due_now(self, now: datetime) -> bool:
        """Whether a run now would erase something."""
        return self.outlook(now).due_count > 0

    def _last_runs(self) -> dict[str, datetime]:
        last: dict[str, datetime] = {}
        for item in self._store.read_events(stream=RETENTION_STREAM):
            if isinstance(item.event, RetentionRan):
                last.update(dict.fromkeys(item.event.policies, item.event.at))
        return last

    def run(self, now: datetime, *, dry_run: bool = False) -> RetentionReport:
        """Erase what is due at ``now`` in one erase transaction (``dry_run``: only say what)."""
        seen = self.outlook(now)
        if dry_run:
            return RetentionReport(at=now, dry_run=True, items=_items(seen))
        if not seen.due_count:
            return RetentionReport(at=now, dry_run=False, items=[], **self._finish_pending())
        head_before = str(head_value(self._store.head()))
        done = _Run(self.policies, now, head_before, self._files)
        self._erasure.erase(lambda tx, erasing: done.work(tx, erasing, seen))
        if not done.records:  # another host erased it all first: nothing recorded here
            return RetentionReport(at=now, dry_run=False, items=[], **self._finish_pending())
        outcome = self._scrub()
        receipt = followed_up(self._follow_up, done.records, head_before)
        return RetentionReport(at=now, dry_run=False, items=done.items, erased_events=done.erased,
                               record=done.records[-1], records=list(done.records), receipt=receipt, **outcome)

    def _finish_pending(self) -> dict[str, Any]:
        return self._scrub() if self._erasure.scrub_pending() else {}

    def _scrub(self) -> dict[str, Any]:
        try:
            report = self._erasure.scrub()
        except StorageError as exc:
            raise StorageError(
                f"what retention erased is gone from the log and the tables, but the store's files could not be"
                f" rewritten yet ({exc}); it is finished when the memory opens again") from exc
        return {"finished": report.finished, "remains": list(report.remains), "rewrite_pending": report.rewrite_pending}


class _Run:
    """One run's work inside its erase transaction (run again from the start on a busy store)."""

    def __init__(self, policies: Sequence[RetentionPolicy], at: datetime, head_before: str,
                 files: OwnerFiles) -> None:
        self._policies, self._at, self._head_before, self._files = policies, at, head_before, files
        self.records: list[int] = []
        self.items: list[RetentionItem] = []
        self.erased = 0
        self._events: list[ev.DomainEvent] = []
        self._counts = {"conversations": 0, "rows": 0}

    def work(self, tx: WriteTransaction, erasing: ErasureTransaction, seen: Outlook) -> None:
        self.records, self.items, self._events, self.erased = [], [], [], 0
        self._counts = {"conversations": 0, "rows": 0}
        for policy in seen.policies:
            for summary in policy.conversations:
                self._conversation(tx, erasing, policy.name, summary)
        self._rows(tx, erasing, [(policy.name, row) for policy in seen.policies for row in policy.rows])
        if not self.records:
            return
        ran = RetentionRan(
            at=self._at, policies=tuple(dict.fromkeys(item.policy for item in self.items)),
            conversations=self._counts["conversations"], memory_rows=self._counts["rows"],
            erased_events=self.erased, head_before=self._head_before, records=tuple(self.records),
            provenance=ev.Provenance(agent_id="retention", owner_id="retention", trust=Trust.OPERATOR,
                                     source_type="retention", source_id=",".join(
                                         dict.fromkeys(item.policy for item in self.items))))
        self._files.record_in(tx, self._events, self._at)
        self.records.extend(tx.append(RETENTION_STREAM, [ran]))

    def _conversation(self, tx: WriteTransaction, erasing: ErasureTransaction, policy: str,
                      summary: ConversationSummary) -> None:
        """Erased when its newest message is still the one that made it due (none: gone already)."""
        agent, key = summary.agent_id, summary.conversation
        if tx.last_message_id(agent, key) != summary.last_message_id:
            return
        found = conversation_content(tx, erasing, agent, key)
        if not found.positions:
            return
        erasing.redact(found.positions)
        record = ev.ConversationForgotten(
            at=self._at, agent_id=agent, conversation=key, owners=found.owners, memory_ids=found.memory_ids,
            redacted_positions=found.positions, redacted_revisions=found.revisions,
            provenance=_provenance(agent, policy, policy))
        self._recorded(tx.append(conversation_stream(agent, key), [record]), record, len(found.positions))
        self._counts["conversations"] += 1
        self.items.append(RetentionItem(policy=policy, agent_id=agent, conversation=str(key)))

    def _rows(self, tx: WriteTransaction, erasing: ErasureTransaction, due: Sequence[tuple[str, RowSummary]]) -> None:
        """Each erased when it is still there and still due (not restated since it was read, nor
        erased with a conversation above); the owners' events are read once for all of them."""
        first: dict[int, str] = {}
        for policy, summary in due:  # a row due under two policies goes once, under the first
            first.setdefault(summary.memory_id, policy)
        rows = [(policy, row) for memory_id, policy in first.items()
                if (row := tx.by_id(memory_id)) is not None and _still_due(self._policies, row, self._at)]
        finders = rows_content(erasing, [(row.id, row.owner_id) for _, row in rows])
        taken: set[int] = set()  # each redacted event is recorded by one record
        for policy, row in rows:
            positions, revisions = finders[row.id].left_after(taken)
            taken.update(positions)
            erasing.redact(positions)
            record = ev.MemoryForgotten(
                at=self._at, agent_id=row.agent_id, owner_id=row.owner_id, memory_id=row.id,
                redacted_positions=positions, redacted_revisions=revisions,
                provenance=_provenance(row.agent_id, row.owner_id, policy))
            self._recorded(tx.append(memory_stream(row.agent_id, row.owner_id), [record]), record, len(positions))
            self._counts["rows"] += 1
            self.items.append(RetentionItem(policy=policy, agent_id=row.agent_id, memory_id=row.id))

    def _recorded(self, positions: list[int], record: ev.DomainEvent, erased: int) -> None:
        self.records.extend(positions)
        self._events.append(record)
        self.erased += erased


__all__ = ["EXPIRES_AT", "PolicyStatus", "Retention", "RetentionCandidates", "RetentionItem", "RetentionReport",
           "RetentionStatus"]
