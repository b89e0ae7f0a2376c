"""The base of every domain event: :class:`DomainEvent`, the :class:`Provenance` of a change
and the :class:`Erasure` each event declares (whose content it carries, ADR-0010).

The event classes themselves live in ``conversation_events``, ``memory_events`` and
``activity_events``; ``events`` gathers them with the registry of kinds.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import attrs

from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, ScopeType, Trust


@attrs.frozen(kw_only=True)
class Provenance:
    """Who caused a change, through what, and why.

    ``source_message_ids``: the exact messages a fact came from, when the writer named them (a
    review's operation that gave ids the review was shown, the rules extractor); ``None`` for
    a change recorded without them, whose source is ``source_message_id`` (for a review: the
    last message of its batch). ``dropped_source_message_ids``: ids the writer gave that were
    not messages it was shown, left out and kept here as a record (ADR-0034). Both are left
    out of the stored payload when unset, so every other event is stored as before.
    """

    agent_id: str
    owner_id: str
    trust: Trust = Trust.GUEST
    source_type: str = ""
    source_id: str = ""
    session_id: str = ""
    run_id: str = ""
    source_message_id: int | None = None
    reason: str = ""
    source_message_ids: tuple[int, ...] | None = None
    dropped_source_message_ids: tuple[int, ...] = ()


OwnerRef = tuple[str, str]  # (agent_id, owner_id)
RevisionRef = tuple[str, str, str, int]  # (agent_id, owner_id, resource name, revision)


@attrs.frozen(kw_only=True)
class RowStatement:
    """What a memory row states after the event that adds or replaces it, as far as the prompt
    files go: which file may show it, and the value it would show. ``scope_type`` is ``None``
    for a replace (a row keeps its scope)."""

    category: Category
    promote_target: PromoteTarget | None
    value: str
    scope_type: ScopeType | None = None


@attrs.frozen(kw_only=True)
class Erasure:
    """Whose content an event carries: what forgetting an owner must redact (ADR-0010).

    ``owners``: (agent, owner) pairs whose words or data the event carries. ``memory_row`` /
    ``job``: it also carries content of the owner of that memory row / scheduled job.
    ``conversation``: it carries text of the conversation (model output quoting anyone), so it
    belongs to every owner who takes part in it. The ``creates_*`` / ``takes_part`` facts let
    those references be resolved from the log alone: this event creates memory row
    <its position> / job ``creates_job`` for ``owners[0]``; its owners take part in
    ``conversation``.

    The agent's standing rules (operator directives) are rendered into every owner's MEMORY.md,
    so a revision of one owner's file can carry another owner's words: ``shared_row`` says the
    row this event creates is such a rule, ``row_live`` whether ``memory_row`` is live after
    this event (archived: ``False``); ``revision`` names the prompt-file revision this event
    records, ``shows_rules`` that its text holds the agent's live rules, ``copies`` the earlier
    revision of the same file whose text it repeats (a rollback).
    """

    owners: tuple[OwnerRef, ...] = ()
    memory_row: int | None = None
    job: str = ""
    conversation: tuple[str, ConversationKey] | None = None
    creates_row: bool = False
    creates_job: str = ""
    takes_part: bool = False
    shared_row: bool = False
    row_live: bool | None = None
    revision: RevisionRef | None = None
    shows_rules: bool = False
    copies: int | None = None
    text: str = ""
    statement: RowStatement | None = None


NO_OWNER_CONTENT = Erasure()


@attrs.frozen(kw_only=True)
class DomainEvent:
    """Base of all events; ``at`` is when the change happened (passed in, never read here).

    Every event class declares :meth:`erasure` itself (no default: a new kind must decide
    whose content it carries)."""

    kind: ClassVar[str] = ""
    schema: ClassVar[int] = 1
    # True when ``erasure()`` can name an owner's content by reference (a memory row, a job, a
    # conversation) instead of by the owner ids in the event itself. Declared by every class.
    refers_to_others: ClassVar[bool]
    at: datetime

    def erasure(self) -> Erasure:
        raise NotImplementedError(f"{type(self).__name__} does not declare whose content it carries")
