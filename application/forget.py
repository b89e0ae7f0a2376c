"""Forgetting an owner (what they left with an agent) or one memory row; a content-free record
of each erasure is kept.

One write transaction redacts the payload of every event that carries the owner's content (the
row's value) and records ``owner.forgotten`` (``memory.forgotten``), whose projection deletes
the rows; then the prompt files are re-rendered or removed and the store is scrubbed so no
deleted byte lingers in the database files. An erasure whose scrub never finished is finished
when the memory opens again (``erasure_finishing.finish_erasures``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

import attrs

from fermix_memory.application.commands import Forget, ForgetMemory
from fermix_memory.application.erasure_content import ErasedContent, erased_content
from fermix_memory.application.erasure_finishing import followed_up
from fermix_memory.application.erasure_targets import ConversationContent, conversation_content, row_content
from fermix_memory.application.errors import NotFound, StorageError
from fermix_memory.application.log_transfer import head_value
from fermix_memory.application.ports import Clock
from fermix_memory.application.privacy_ports import ErasureFollowUp
from fermix_memory.application.store_ports import (
    Erasure,
    ErasureTransaction,
    EventStore,
    ScrubReport,
    WriteTransaction,
)
from fermix_memory.application.streams import (
    conversation_stream,
    memory_stream,
    owner_stream,
    parse_owner_stream,
)
from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import OwnerContentFinder
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.values import ConversationKey, Trust, check_identifier, is_encodable

log = logging.getLogger("fermix_memory")

MAX_REASON_CHARS = 500


@attrs.frozen(kw_only=True)
class ForgetReport:
    """What an erasure did: per agent, how many events were redacted; whether the prompt-file
    folders existed; and whether the database files were fully scrubbed. When nothing was
    found, nothing is rewritten and both byte counts are 0. ``store`` names what was rewritten;
    ``finished`` is False when a later run has something left to do (``remains`` says what);
    ``remains`` also says what keeps erased bytes beyond this store's reach (a PostgreSQL
    server's write-ahead log, for a role that may not checkpoint it)."""

    owner_id: str
    erased_events: dict[str, int]
    prompt_files_removed: list[str]
    wal_truncated: bool
    bytes_before: int
    bytes_after: int
    store: str = ""
    finished: bool = True
    remains: list[str] = attrs.field(factory=list)
    rewrite_pending: bool = False  # another writer held the file: not rewritten yet (ADR-0095)
    receipt: int | None = None  # the log position of the erasure's signed receipt (ADR-0079)
    # ``dry_run``: nothing was changed, this is what would go; ``content``: per agent, what goes.
    dry_run: bool = False
    content: dict[str, ErasedContent] = attrs.field(factory=dict)

    @property
    def agents(self) -> list[str]:
        return sorted(self.erased_events)


@attrs.frozen(kw_only=True)
class MemoryForgetReport:
    """What erasing one memory row did: whose row it was, how many events were redacted (of
    them, how many prompt-file revisions), and whether the database files were fully scrubbed.
    ``erased_events`` is 0 when the row had been erased already and only the scrub was left."""

    memory_id: int
    agent_id: str
    owner_id: str
    erased_events: int
    redacted_revisions: int
    # ``dry_run``: nothing was changed, this is what would go; ``revisions``: which revisions go.
    dry_run: bool = False
    revisions: list[ev.RedactedRevision] = attrs.field(factory=list)
    wal_truncated: bool
    bytes_before: int
    bytes_after: int
    store: str = ""
    finished: bool = True
    remains: list[str] = attrs.field(factory=list)
    rewrite_pending: bool = False  # another writer held the file: not rewritten yet (ADR-0095)
    receipt: int | None = None  # the log position of the erasure's signed receipt (ADR-0079)


@attrs.frozen(kw_only=True)
class ConversationForgetReport:
    """What erasing (or, with ``dry_run``, what would erase) one conversation: its messages and
    checkpoints, the review records of it, the memory rows learnt only from it, the events in
    all; then the scrub's outcome (a dry run, or nothing found: nothing rewritten, 0 bytes)."""

    agent_id: str
    conversation: str
    dry_run: bool
    messages: int
    checkpoints: int
    review_records: int
    memory_ids: list[int]
    erased_events: int
    wal_truncated: bool
    bytes_before: int
    bytes_after: int
    store: str = ""
    finished: bool = True
    remains: list[str] = attrs.field(factory=list)
    rewrite_pending: bool = False  # another writer held the file: not rewritten yet (ADR-0095)
    receipt: int | None = None  # the log position of the erasure's signed receipt (ADR-0079)


class OwnerFiles(Protocol):
    """The prompt files of (agent, owner), removed after their erasure."""

    def remove_files(self, agent_id: str, owner_id: str) -> bool:
        """Delete them unless a current revision exists again; ``True`` when some were deleted."""
        ...

    def record_in(self, tx: WriteTransaction, events: Sequence[ev.DomainEvent], at: datetime) -> None:
        """Re-render, in the erasure's transaction, the files the erasure changes (other owners'
        MEMORY.md lose the forgotten owner's standing rules)."""
        ...


def _check_reason(reason: object) -> None:
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS or "\x00" in reason \
            or not is_encodable(reason):
        raise DomainError(f"reason must be text of at most {MAX_REASON_CHARS} characters, without NUL")


def _outcome(scrub: ScrubReport) -> dict[str, Any]:
    """A report's fields that say what the scrub did."""
    return {"wal_truncated": scrub.wal_truncated, "bytes_before": scrub.bytes_before, "bytes_after": scrub.bytes_after,
            "store": scrub.store, "finished": scrub.finished, "remains": list(scrub.remains),
            "rewrite_pending": scrub.rewrite_pending}


def _is_owner_stream(stream: str, owner_id: str, agent_id: str | None) -> bool:
    try:
        agent, owner = parse_owner_stream(stream)
    except ValueError:
        return False
    return owner == owner_id and agent_id in (None, agent)


class Forgetting:
    def __init__(self, store: EventStore, erasure: Erasure, files: OwnerFiles, clock: Clock,
                 follow_up: ErasureFollowUp | None = None) -> None:
        """``follow_up``: what runs once an erasure is committed and scrubbed (export keys
        destroyed, the receipt signed, ADR-0078)."""
        self._store = store
        self._erasure = erasure
        self._files = files
        self._clock = clock
        self._follow_up = follow_up

    @property
    def follow_up(self) -> ErasureFollowUp | None:
        """What follows every committed erasure (the retention runs share it)."""
        return self._follow_up

    def forget(self, cmd: Forget) -> ForgetReport:
        """:meth:`forget_owner` as the command says."""
        return self.forget_owner(cmd.owner_id, agent_id=cmd.agent_id, dry_run=cmd.dry_run, by=cmd.by,
                                 reason=cmd.reason)

    def forget_row(self, cmd: ForgetMemory) -> MemoryForgetReport:
        """:meth:`forget_memory` as the command says."""
        return self.forget_memory(cmd.memory_id, dry_run=cmd.dry_run, by=cmd.by, reason=cmd.reason)

    def forget_owner(self, owner_id: str, *, agent_id: str | None = None, dry_run: bool = False,
                     by: str = "operator", reason: str = "") -> ForgetReport:
        """Erase ``owner_id``'s messages, memory rows, reviews, prompt files, sources and jobs with
        ``agent_id`` (every agent when ``None``). Idempotent: forgetting twice erases nothing more.
        ``dry_run``: only say what would go (nothing is written, no file touched)."""
        check_identifier(owner_id, "owner_id")
        if agent_id is not None:
            check_identifier(agent_id, "agent_id")
        check_identifier(by, "by")
        _check_reason(reason)
        at = self._clock.now()

        head_before, records = self._head_text(), list[int]()

        def work(tx: WriteTransaction, erasing: ErasureTransaction) -> dict[str, ErasedContent]:
            records.clear()  # a busy store may run the work again
            finder = OwnerContentFinder(owner_id, agent_id)
            read: dict[int, ev.DomainEvent] = {}
            for item in erasing.erasure_candidates(owner_id, ev.REFERRING_KINDS):
                finder.add(item.position, item.event)
                read[item.position] = item.event
            found = finder.positions()
            conversations = finder.conversations()
            # Only agents the owner left something with: nothing found means nothing recorded.
            known = set(erasing.agents_of_owner(owner_id)) | set(found)
            agents = sorted(a for a in known if agent_id is None or a == agent_id)
            erased = {}
            forgotten: list[ev.DomainEvent] = []
            for agent in agents:
                positions = tuple(found.get(agent, ()))
                erased[agent] = erased_content(positions, read)
                if dry_run:
                    continue
                count = erasing.redact(positions)
                forgotten.append(ev.OwnerForgotten(
                    at=at, agent_id=agent, owner_id=owner_id, erased_events=count, redacted_positions=positions,
                    conversations=tuple(conv for of, conv in conversations if of == agent),
                    redacted_revisions=finder.revisions(agent),
                    provenance=ev.Provenance(agent_id=agent, owner_id=owner_id, trust=Trust.OPERATOR,
                                             source_type="forget", source_id=by, reason=reason)))
                records.extend(tx.append(owner_stream(agent, owner_id), forgotten[-1:]))
            if not dry_run:
                self._files.record_in(tx, forgotten, at)
            return erased

        content = self._erasure.erase(work)
        erased = {agent: found.events for agent, found in content.items()}
        if dry_run:
            return ForgetReport(owner_id=owner_id, erased_events=erased, prompt_files_removed=[], wal_truncated=False,
                                bytes_before=0, bytes_after=0, dry_run=True, content=content)
        if not erased and not self._forgotten_before(owner_id, agent_id):
            # Nothing to erase and no earlier erasure left to finish: the files are not rewritten.
            return ForgetReport(owner_id=owner_id, erased_events={}, prompt_files_removed=[],
                                wal_truncated=True, bytes_before=0, bytes_after=0)
        removed = [agent for agent in sorted(erased) if self._files.remove_files(agent, owner_id)]
        scrub = self._scrub(f"owner {owner_id!r}")
        return ForgetReport(owner_id=owner_id, erased_events=erased, prompt_files_removed=removed,
                            content=content, receipt=self._followed(records, head_before), **_outcome(scrub))

    def forget_memory(self, memory_id: int, *, dry_run: bool = False, by: str = "operator",
                      reason: str = "") -> MemoryForgetReport:
        """Erase memory row ``memory_id`` (archived or not) and every event that carried any value
        it had; its owner's prompt files (and every owner's MEMORY.md when it was a standing
        rule) are re-rendered without it. :class:`NotFound` for a row that does not exist;
        forgetting a row again finishes a scrub left pending and erases nothing more.
        ``dry_run``: only say what would go (nothing is written, no file touched)."""
        check_identifier(by, "by")
        _check_reason(reason)
        at = self._clock.now()

        head_before, records = self._head_text(), list[int]()

        def work(tx: WriteTransaction, erasing: ErasureTransaction) -> ev.MemoryForgotten | None:
            records.clear()
            row = tx.by_id(memory_id)
            if row is None:
                return None
            finder = row_content(erasing, memory_id, row.owner_id)
            positions = tuple(finder.positions())
            if not dry_run:
                erasing.redact(positions)
            record = ev.MemoryForgotten(
                at=at, agent_id=row.agent_id, owner_id=row.owner_id, memory_id=memory_id,
                redacted_positions=positions, redacted_revisions=finder.revisions(),
                provenance=ev.Provenance(agent_id=row.agent_id, owner_id=row.owner_id, trust=Trust.OPERATOR,
                                         source_type="forget", source_id=by, reason=reason))
            if not dry_run:
                records.extend(tx.append(memory_stream(row.agent_id, row.owner_id), [record]))
                self._files.record_in(tx, [record], at)
            return record

        record = self._erasure.erase(work)
        if record is None:
            if dry_run or not self._erasure.scrub_pending():
                raise NotFound(f"memory {memory_id} does not exist (or was erased already)")
            scrub = self._scrub(f"memory {memory_id}")
            return MemoryForgetReport(memory_id=memory_id, agent_id="", owner_id="", erased_events=0,
                                      redacted_revisions=0, **_outcome(scrub))
        report = MemoryForgetReport(
            memory_id=memory_id, agent_id=record.agent_id, owner_id=record.owner_id,
            erased_events=len(record.redacted_positions), redacted_revisions=len(record.redacted_revisions),
            dry_run=dry_run, revisions=list(record.redacted_revisions), wal_truncated=False, bytes_before=0,
            bytes_after=0)
        if dry_run:
            return report
        scrub = self._scrub(f"memory {memory_id}")
        return attrs.evolve(report, receipt=self._followed(records, head_before), **_outcome(scrub))

    def forget_conversation(self, agent_id: str, conversation: ConversationKey, *, dry_run: bool = False,
                            by: str = "operator", reason: str = "") -> ConversationForgetReport:
        """Erase one conversation with ``agent_id``: its messages and checkpoints, window and
        compaction records, the reviews of it, and the memory rows learnt only from it (as
        :meth:`forget_memory` erases a row). ``dry_run``: only say what would go."""
        check_identifier(agent_id, "agent_id")
        check_identifier(by, "by")
        _check_reason(reason)
        at = self._clock.now()

        head_before, records = self._head_text(), list[int]()

        def work(tx: WriteTransaction, erasing: ErasureTransaction) -> ConversationContent:
            records.clear()
            found = conversation_content(tx, erasing, agent_id, conversation)
            if dry_run or not found.positions:
                return found
            erasing.redact(found.positions)
            record = ev.ConversationForgotten(
                at=at, agent_id=agent_id, conversation=conversation, owners=found.owners,
                memory_ids=found.memory_ids, redacted_positions=found.positions,
                redacted_revisions=found.revisions,
                provenance=ev.Provenance(agent_id=agent_id, owner_id=by, trust=Trust.OPERATOR,
                                         source_type="forget", source_id=by, reason=reason))
            records.extend(tx.append(conversation_stream(agent_id, conversation), [record]))
            self._files.record_in(tx, [record], at)
            return found

        found = self._erasure.erase(work)
        report = ConversationForgetReport(
            agent_id=agent_id, conversation=str(conversation), dry_run=dry_run, messages=found.messages,
            checkpoints=found.checkpoints, review_records=found.review_records, memory_ids=list(found.memory_ids),
            erased_events=len(found.positions), wal_truncated=not dry_run, bytes_before=0, bytes_after=0)
        if dry_run or not (found.positions or self._erasure.scrub_pending()):
            return report
        scrub = self._scrub(f"conversation {conversation} of {agent_id!r}")
        return attrs.evolve(report, receipt=self._followed(records, head_before), **_outcome(scrub))

    def _head_text(self) -> str:
        """The log's head when an erasure begins, as its receipt names it."""
        return str(head_value(self._store.head())) if self._follow_up is not None else ""

    def _followed(self, records: Sequence[int], head_before: str) -> int | None:
        """Destroy export keys and sign the receipt of a committed, scrubbed erasure (a crash
        before this is made up for when the memory opens again); the receipt's log position."""
        return followed_up(self._follow_up, records, head_before)

    def _scrub(self, what: str) -> ScrubReport:
        try:
            return self._erasure.scrub()
        except StorageError as exc:
            raise StorageError(
                f"{what} is erased from the log and the tables, but the store's files could not be"
                f" rewritten yet ({exc}); run forget again to finish"
            ) from exc

    def _forgotten_before(self, owner_id: str, agent_id: str | None) -> bool:
        """Whether an earlier erasure of this owner was recorded: running forget again finishes
        it (prompt files, file rewrite) if it was interrupted."""
        return any(_is_owner_stream(s, owner_id, agent_id) for s in self._store.last_positions("owner/"))
