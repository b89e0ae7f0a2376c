"""What one erasure covers, found inside its write transaction: the events carrying one
conversation's content (with the rows learnt only from it), or one memory row's. Shared by
``forget`` and the retention runs, which erase the same way."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from fermix_memory.application.store_ports import ErasureTransaction, RecordedEvent, WriteTransaction
from fermix_memory.application.streams import conversation_stream, review_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import RowContentFinder
from fermix_memory.domain.values import ConversationKey, ScopeType


@attrs.frozen(kw_only=True)
class ConversationContent:
    """The events of one conversation to redact and what they are."""

    positions: tuple[int, ...]
    owners: tuple[str, ...]
    messages: int
    checkpoints: int
    review_records: int
    memory_ids: tuple[int, ...]
    revisions: tuple[ev.RedactedRevision, ...]


def _learnt_only_from(candidates: Sequence[RecordedEvent], agent_id: str, conversation: ConversationKey,
                      message_ids: set[int]) -> list[int]:
    """The rows of ``agent_id`` (among the owner's ``candidates``) learnt only from the conversation:
    scoped to it, or whose every statement (add, replaces) names one of its messages as source."""
    sources: dict[int, list[int | None]] = {}
    scoped: set[int] = set()
    for item in candidates:
        e = item.event
        if isinstance(e, ev.MemoryAdded) and e.agent_id == agent_id:
            sources[item.position] = [e.provenance.source_message_id]
            if e.scope_type == ScopeType.CONVERSATION and e.scope_id == conversation.scope_id:
                scoped.add(item.position)
        elif isinstance(e, ev.MemoryReplaced) and e.memory_id in sources:
            sources[e.memory_id].append(e.provenance.source_message_id)
    return sorted(row for row, found in sources.items()
                  if row in scoped or all(s is not None and s in message_ids for s in found))


def conversation_content(tx: WriteTransaction, erasing: ErasureTransaction, agent_id: str,
                          conversation: ConversationKey) -> ConversationContent:
    positions: set[int] = set()
    message_ids: set[int] = set()
    owners: dict[str, None] = {}
    checkpoints = 0
    for item in tx.read_events(stream=conversation_stream(agent_id, conversation)):
        if isinstance(item.event, ev.ConversationForgotten):
            continue  # the record of an earlier erasure stays
        positions.add(item.position)
        if isinstance(item.event, ev.MessageAppended):
            message_ids.add(item.position)
            checkpoints += item.event.message_kind == "checkpoint"
            owners.update(dict.fromkeys((item.event.owner_id, *item.event.quoted_owners)))
    reviews = [item.position for owner in owners
               for item in tx.read_events(stream=review_stream(agent_id, owner, conversation))]
    positions.update(reviews)
    rows: list[int] = []
    revisions: list[ev.RedactedRevision] = []
    for owner in owners:
        candidates = list(erasing.erasure_candidates(owner, ev.REFERRING_KINDS))
        declared: list[tuple[int, ev.Erasure]] = []  # each event's declaration, made once for every row
        for row in _learnt_only_from(candidates, agent_id, conversation, message_ids):
            if tx.by_id(row) is None:
                continue
            finder = RowContentFinder(row)
            declared = declared or [(item.position, item.event.erasure()) for item in candidates]
            for position, decl in declared:
                finder.add_declared(position, decl)
            positions.update(finder.positions())
            revisions += [r for r in finder.revisions() if r not in revisions]
            rows.append(row)
    return ConversationContent(
        positions=tuple(sorted(positions)), owners=tuple(owners), messages=len(message_ids) - checkpoints,
        checkpoints=checkpoints, review_records=len(reviews), memory_ids=tuple(rows), revisions=tuple(revisions))


def row_content(erasing: ErasureTransaction, memory_id: int, owner_id: str) -> RowContentFinder:
    """The finder of memory row ``memory_id`` fed with its owner's candidate events."""
    finder = RowContentFinder(memory_id)
    for item in erasing.erasure_candidates(owner_id, ev.REFERRING_KINDS):
        finder.add(item.position, item.event)
    return finder


def rows_content(erasing: ErasureTransaction, rows: Sequence[tuple[int, str]]) -> dict[int, RowContentFinder]:
    """The finders of several memory rows ``(memory_id, owner_id)``: each owner's candidate
    events are read once and each event's declaration made once, whatever the number of rows."""
    by_owner: dict[str, list[int]] = {}
    for memory_id, owner_id in rows:
        by_owner.setdefault(owner_id, []).append(memory_id)
    finders: dict[int, RowContentFinder] = {}
    for owner_id, ids in by_owner.items():
        mine = [finders.setdefault(memory_id, RowContentFinder(memory_id)) for memory_id in dict.fromkeys(ids)]
        for item in erasing.erasure_candidates(owner_id, ev.REFERRING_KINDS):
            decl = item.event.erasure()
            for finder in mine:
                finder.add_declared(item.position, decl)
    return finders
