"""Which logged events carry one owner's content: each event declares it (``erasure()``),
this folds those declarations over the log and resolves the references they make
(the owner of a memory row or job, the participants of a conversation). Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection

from fermix_memory.domain.event_base import DomainEvent, Erasure, OwnerRef, RevisionRef, RowStatement
from fermix_memory.domain.memory_events import RedactedRevision
from fermix_memory.domain.rendering import one_line, shown_in
from fermix_memory.domain.values import MAX_RENDERED_VALUE_CHARS, ConversationKey, ScopeType

ConversationRef = tuple[str, ConversationKey]


class OwnerContentFinder:
    """Feed it every readable event in log order; ask which positions carry ``owner_id``'s
    content, per agent (only ``agent_id``'s when given)."""

    def __init__(self, owner_id: str, agent_id: str | None = None) -> None:
        self.owner_id = owner_id
        self.agent_id = agent_id
        self._hits: dict[str, set[int]] = defaultdict(set)
        self._row_owner: dict[int, OwnerRef] = {}
        self._job_owner: dict[str, OwnerRef] = {}
        self._row_refs: list[tuple[int, int]] = []  # (memory row, position)
        self._job_refs: list[tuple[str, int]] = []
        self._participants: dict[ConversationRef, set[str]] = defaultdict(set)
        self._conversation_events: dict[ConversationRef, list[int]] = defaultdict(list)
        self._rules: dict[int, tuple[str, bool]] = {}  # the owner's standing rules: row -> (agent, live)
        self._quoting: set[RevisionRef] = set()  # prompt-file revisions showing the owner's rules
        self._revisions: dict[str, list[RedactedRevision]] = defaultdict(list)  # other owners' ones

    def _mine(self, ref: OwnerRef | None) -> bool:
        return ref is not None and ref[1] == self.owner_id and self.agent_id in (None, ref[0])

    def add(self, position: int, event: DomainEvent) -> None:
        decl = event.erasure()
        for ref in decl.owners:
            if self._mine(ref):
                self._hits[ref[0]].add(position)
        if decl.creates_row and decl.owners:
            self._row_owner[position] = decl.owners[0]
            if decl.shared_row and self._mine(decl.owners[0]):
                self._rules[position] = (decl.owners[0][0], True)
        if decl.memory_row in self._rules and decl.row_live is not None:
            self._rules[decl.memory_row] = (self._rules[decl.memory_row][0], decl.row_live)
        if decl.revision is not None:
            self._revision(position, decl.revision, decl)
        if decl.creates_job and decl.owners:
            self._job_owner[decl.creates_job] = decl.owners[0]
        if decl.memory_row is not None:
            self._row_refs.append((decl.memory_row, position))
        if decl.job:
            self._job_refs.append((decl.job, position))
        if decl.conversation is not None:
            if decl.takes_part:
                self._participants[decl.conversation].update(owner for _, owner in decl.owners)
            else:
                self._conversation_events[decl.conversation].append(position)

    def _revision(self, position: int, ref: RevisionRef, decl: Erasure) -> None:
        """A prompt-file revision carries the owner's words when it showed one of their live
        rules, or repeats (a rollback) a revision that did."""
        agent, owner, name, number = ref
        quoting = (decl.shows_rules and (agent, True) in self._rules.values()) \
            or (decl.copies is not None and (agent, owner, name, decl.copies) in self._quoting)
        if not quoting:
            self._quoting.discard(ref)  # a number used again after an earlier erasure
            return
        self._quoting.add(ref)
        if owner != self.owner_id and self.agent_id in (None, agent):
            self._hits[agent].add(position)
            self._revisions[agent].append(RedactedRevision(owner_id=owner, name=name, revision=number))

    def revisions(self, agent_id: str) -> tuple[RedactedRevision, ...]:
        """Other owners' prompt-file revisions with ``agent_id`` among the positions to redact."""
        return tuple(self._revisions.get(agent_id, ()))

    def positions(self) -> dict[str, list[int]]:
        """Per agent, the sorted positions to redact (agents with nothing are left out)."""
        hits = {agent: set(found) for agent, found in self._hits.items()}
        resolved = [(self._row_owner.get(row), p) for row, p in self._row_refs]
        resolved += [(self._job_owner.get(job), p) for job, p in self._job_refs]
        for ref, position in resolved:
            if ref is not None and self._mine(ref):
                hits.setdefault(ref[0], set()).add(position)
        for agent, conversation in self.conversations():
            hits.setdefault(agent, set()).update(self._conversation_events[(agent, conversation)])
        return {agent: sorted(found) for agent, found in hits.items() if found}

    def conversations(self) -> list[ConversationRef]:
        """Conversations the owner took part in that have conversation-level events to redact."""
        return sorted(
            (ref for ref, owners in self._participants.items()
             if self.owner_id in owners and self.agent_id in (None, ref[0]) and self._conversation_events.get(ref)),
            key=lambda ref: (ref[0], ref[1].scope_id),
        )


# A revision that showed a row holds at least this much of the row's rendered value: a rendering
# cuts a long value after no fewer than half of MAX_RENDERED_VALUE_CHARS characters.
SHOWN_PREFIX_CHARS = MAX_RENDERED_VALUE_CHARS // 2 - 1


def shown_text(value: str) -> str:
    """The start of ``value`` that every prompt-file revision showing it holds."""
    return one_line(value, MAX_RENDERED_VALUE_CHARS)[:SHOWN_PREFIX_CHARS]


class RowContentFinder:
    """Feed it every readable event in log order; ask which positions carry the value of memory
    row ``memory_id`` (any value it ever had): the event that created it, every event naming the
    row (replaces, archive and restore records, refusals), and the prompt-file revisions that
    showed it: recorded while it was live, of the file its statement renders into (its owner's;
    every owner's MEMORY.md of the agent when the row is a standing rule) and holding its value's
    text, with the rollbacks repeating one of those. Every other revision stays readable."""

    def __init__(self, memory_id: int) -> None:
        self.memory_id = memory_id
        self.owner: OwnerRef | None = None
        self._shared = False
        self._live = False
        self._scope: ScopeType | None = None
        self._statement: RowStatement | None = None  # None: unknown, so every file may show it
        self._hits: set[int] = set()
        self._quoting: set[RevisionRef] = set()
        self._revisions: list[tuple[int, RedactedRevision]] = []  # (position, revision)

    def add(self, position: int, event: DomainEvent) -> None:
        self.add_declared(position, event.erasure())

    def add_declared(self, position: int, decl: Erasure) -> None:
        """:meth:`add` of an event whose declaration was read already (several finders share it)."""
        if position == self.memory_id and decl.creates_row and decl.owners:
            self.owner, self._shared, self._live = decl.owners[0], decl.shared_row, True
            self._statement = decl.statement
            self._scope = None if decl.statement is None else decl.statement.scope_type
            self._hits.add(position)
            return
        if self.owner is None:  # nothing before the row was made can carry its value
            return
        if decl.memory_row == self.memory_id:
            self._hits.add(position)
            if decl.row_live is not None:
                self._live = decl.row_live
            if decl.statement is not None and self._scope is not None:
                self._statement = decl.statement
        if decl.revision is not None:
            self._revision(position, decl.revision, decl)

    def _shows(self, name: str, text: str) -> bool:
        """Whether a revision of file ``name`` with ``text`` shows the row as it stands now."""
        if self._statement is None or self._scope is None:
            return True
        s = self._statement
        shown = shown_in(self._scope, s.category, s.promote_target)
        return shown is not None and shown.value == name and shown_text(s.value) in text

    def _revision(self, position: int, ref: RevisionRef, decl: Erasure) -> None:
        assert self.owner is not None
        agent, owner, name, number = ref
        if agent != self.owner[0]:
            return
        showing = self._live and (owner == self.owner[1] or (self._shared and decl.shows_rules)) \
            and self._shows(name, decl.text)
        if not (showing or (decl.copies is not None and (agent, owner, name, decl.copies) in self._quoting)):
            self._quoting.discard(ref)  # a number used again after an earlier erasure (older logs)
            return
        self._quoting.add(ref)
        self._hits.add(position)
        self._revisions.append((position, RedactedRevision(owner_id=owner, name=name, revision=number)))

    def positions(self) -> list[int]:
        """The sorted positions to redact (none when the row was never seen)."""
        return sorted(self._hits)

    def revisions(self) -> tuple[RedactedRevision, ...]:
        """The prompt-file revisions among :meth:`positions`."""
        return tuple(revision for _, revision in self._revisions)

    def left_after(self, taken: Collection[int]) -> tuple[tuple[int, ...], tuple[RedactedRevision, ...]]:
        """:meth:`positions` and :meth:`revisions` without the events at ``taken``: those another
        erasure of the same transaction redacts and records (a revision showing two rows)."""
        return (tuple(p for p in self.positions() if p not in taken),
                tuple(revision for p, revision in self._revisions if p not in taken))
