"""What a composed prompt shows of an owner's prompt files, read only (ADR-0057).

The files' revisions are recorded by the writer side (:class:`~.prompt_files.PromptFiles`): in
the write that changes their rows, after the commit of an owner's first message, by ``repair``
at open. An owner the writer has not met yet (a prompt composed before their first message)
has no ``MEMORY.md`` revision; the prompt shows what that file would hold, the agent's standing
rules, rendered here and recorded nowhere. So composing a prompt writes nothing, and a
read-only open composes the same prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from fermix_memory.application.caches import PromptFileCache
from fermix_memory.application.log_position import Follows
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.rendering import render_memory_md
from fermix_memory.domain.resources import sha256
from fermix_memory.domain.values import Category, ScopeType, Trust

__all__ = ["ShownPromptFileCache", "ShownRevisions", "may_change_rules_of"]

# A revision number no recorded revision has (they start at 1): shown, never recorded.
UNRECORDED = 0


class RulesReader(Protocol):
    def resource_revision(self, agent_id: str, owner_id: str, name: str) -> ResourceRevision | None: ...

    def agent_rules(self, agent_id: str) -> list[Memory]: ...

    def prompt_files(self, agent_id: str, owner_id: str) -> tuple[dict[str, ResourceRevision], list[Memory]]:
        """In one read: the owner's current ``user_md`` and ``memory_md`` revisions by name (a file
        with none absent), and the agent's standing rules when there is no ``memory_md`` (else none)."""
        ...


# The files a prompt shows, read together.
PROMPT_FILES = ("user_md", "memory_md")


class ShownRevisions:
    """An owner's current revisions; for a ``MEMORY.md`` with none, the agent's standing rules as
    the writer renders them for an owner with no rows of their own (revision 0: unrecorded)."""

    def __init__(self, reader: RulesReader, count_tokens: Callable[[str], int]) -> None:
        self._reader = reader
        self._count = count_tokens

    def resource_revision(self, agent_id: str, owner_id: str, name: str) -> ResourceRevision | None:
        current = self._reader.resource_revision(agent_id, owner_id, name)
        if current is not None or name != "memory_md":
            return current
        return self._shown_rules(agent_id, owner_id, self._reader.agent_rules(agent_id))

    def owner_files(self, agent_id: str, owner_id: str) -> dict[tuple[str, str, str], ResourceRevision | None]:
        """:meth:`resource_revision` of each of the owner's :data:`PROMPT_FILES`, in one read."""
        files, rules = self._reader.prompt_files(agent_id, owner_id)
        memory = files.get("memory_md")
        if memory is None:
            memory = self._shown_rules(agent_id, owner_id, rules)
        return {(agent_id, owner_id, "user_md"): files.get("user_md"), (agent_id, owner_id, "memory_md"): memory}

    def _shown_rules(self, agent_id: str, owner_id: str, rules: list[Memory]) -> ResourceRevision | None:
        """The ``MEMORY.md`` the writer would record for an owner with no rows of their own."""
        if not rules:
            return None
        content = render_memory_md((), self._count, agent_rules=rules)
        return ResourceRevision(agent_id=agent_id, owner_id=owner_id, name="memory_md", revision=UNRECORDED,
                                content=content, content_sha256=sha256(content), reason="rules",
                                created_at=max(r.updated_at for r in rules))


class ShownPromptFileCache(PromptFileCache):
    """The prompt's files, read through :class:`ShownRevisions`. A commit that may change an
    agent's standing rules drops what was kept of its owners' ``MEMORY.md``: an owner the writer
    has not met gets no revision of their own from that commit (a recorded file is dropped by
    its own revision, as in :class:`PromptFileCache`)."""

    def __init__(self, reader: RulesReader, count_tokens: Callable[[str], int], last_position: Callable[[], int],
                 *, follows: Follows | None = None) -> None:
        self._shown = ShownRevisions(reader, count_tokens)
        super().__init__(self._shown, last_position, follows=follows)

    def _load_together(self, key: tuple[str, str, str]) -> dict[tuple[str, str, str], ResourceRevision | None]:
        """A prompt asks for both of the owner's files: a miss reads both, in one statement."""
        agent_id, owner_id, name = key
        if name not in PROMPT_FILES:
            return super()._load_together(key)
        return self._shown.owner_files(agent_id, owner_id)

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        super().on_commit(recorded)
        if all(type(item.event) is ev.MessageAppended for item in recorded):
            return  # the usual commit: messages only, no rule changed
        agents = {agent for item in recorded if (agent := may_change_rules_of(item.event)) is not None}
        if not agents:
            return
        with self._lock:
            for key in [k for k in self._values if k[0] in agents and k[2] == "memory_md"]:
                del self._values[key]


def may_change_rules_of(event: ev.DomainEvent) -> str | None:
    """The agent whose standing rules ``event`` may change, else ``None``. Errs towards yes: a
    change of a row by an operator may be of a rule (only an operator's write can be, by
    admission); erasures empty the cache whole."""
    if isinstance(event, ev.MemoryAdded):
        is_rule = event.category == Category.DIRECTIVE and event.scope_type == ScopeType.AGENT
        return event.agent_id if is_rule else None
    if isinstance(event, ev.MemoryReplaced | ev.MemoryArchived | ev.MemoryRestored):
        return event.provenance.agent_id if event.provenance.trust is Trust.OPERATOR else None
    return None
