"""What an erasure takes, or in a dry run would take, described from the events it redacts:
how many, and among them the messages, memory rows and prompt-file revisions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from fermix_memory.domain import events as ev


@attrs.frozen(kw_only=True)
class ErasedContent:
    """The events an erasure redacts with one agent: their number; of them, the messages (ids,
    and the conversations they are in), the memory rows (ids) and the prompt-file revisions."""

    events: int
    messages: list[int]
    conversations: list[str]
    memory_ids: list[int]
    revisions: list[ev.RedactedRevision]


def erased_content(positions: Sequence[int], events: Mapping[int, ev.DomainEvent]) -> ErasedContent:
    """Describe the events at ``positions`` (``events``: every candidate read, by position)."""
    messages: list[int] = []
    conversations: dict[str, None] = {}
    rows: list[int] = []
    revisions: list[ev.RedactedRevision] = []
    for position in positions:
        e = events.get(position)
        if isinstance(e, ev.MessageAppended):
            messages.append(position)
            conversations[str(e.conversation)] = None
        elif isinstance(e, ev.MemoryAdded):
            rows.append(position)
        elif isinstance(e, ev.ResourceRevised | ev.ResourceRolledBack):
            number = e.revision if isinstance(e, ev.ResourceRevised) else e.new_revision
            revisions.append(ev.RedactedRevision(owner_id=e.owner_id, name=e.name, revision=number))
    return ErasedContent(events=len(positions), messages=messages, conversations=sorted(conversations),
                         memory_ids=rows, revisions=revisions)
