"""Versioned resources (USER.md / MEMORY.md of an agent and owner) as decide/evolve (R-RES).

A resource is the fold of its stream: its current revision number, content and digest.
Revisions are numbered 1, 2, … per (agent, owner, name), and a number is never used twice: after
an erasure took revisions away, the next one still follows the highest number the resource ever
had. A rollback is a new revision holding an earlier content. Rendering the same text again
records nothing, and an empty rendering of a resource that never had one records no empty
revision 1. Times are passed in.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import attrs

from fermix_memory.domain import events as ev


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@attrs.frozen(kw_only=True)
class ResourceState:
    """The current revision of one resource (revision 0: never recorded, or none left after an
    erasure). ``numbered``: the highest revision number it ever had, erased ones included."""

    revision: int = 0
    content: str = ""
    content_sha256: str = ""
    updated_at: datetime | None = None
    numbered: int = 0

    @property
    def next_revision(self) -> int:
        return max(self.revision, self.numbered) + 1


NEVER_RECORDED = ResourceState()


@attrs.frozen(kw_only=True)
class ResourceKey:
    agent_id: str
    owner_id: str
    name: str


@attrs.frozen(kw_only=True)
class ReviseResource:
    """Record ``content`` (a fresh rendering) as the resource's text."""

    key: ResourceKey
    at: datetime
    content: str
    reason: str = "rebuild"


@attrs.frozen(kw_only=True)
class RollBackResource:
    """Make an earlier revision's content current again, as a new revision."""

    key: ResourceKey
    at: datetime
    to_revision: int
    content: str
    content_sha256: str
    provenance: ev.Provenance


def decide_revise(state: ResourceState, cmd: ReviseResource) -> list[ev.DomainEvent]:
    if state.revision and state.content == cmd.content:
        return []
    if not state.revision and not cmd.content:
        return []  # nothing to render, nothing rendered before: no empty revision 1
    k = cmd.key
    return [ev.ResourceRevised(at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, name=k.name,
                               revision=state.next_revision, content=cmd.content,
                               content_sha256=sha256(cmd.content), reason=cmd.reason)]


def decide_rollback(state: ResourceState, cmd: RollBackResource) -> list[ev.DomainEvent]:
    """A new revision holding the earlier content; nothing when the target is the current
    revision (an earlier revision with the same text is still recorded: the log says it was
    asked for)."""
    if cmd.to_revision == state.revision:
        return []
    k = cmd.key
    return [ev.ResourceRolledBack(at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, name=k.name,
                                  to_revision=cmd.to_revision, new_revision=state.next_revision,
                                  content=cmd.content, content_sha256=cmd.content_sha256,
                                  provenance=cmd.provenance)]


def evolve(state: ResourceState, event: ev.DomainEvent) -> ResourceState:
    if isinstance(event, ev.ResourceRevised):
        return ResourceState(revision=event.revision, content=event.content, content_sha256=event.content_sha256,
                             updated_at=event.at, numbered=max(state.numbered, event.revision))
    if isinstance(event, ev.ResourceRolledBack):
        return ResourceState(revision=event.new_revision, content=event.content,
                             content_sha256=event.content_sha256, updated_at=event.at,
                             numbered=max(state.numbered, event.new_revision))
    return state


def revision_reason(event: ev.ResourceRevised | ev.ResourceRolledBack) -> str:
    """The reason a revision row shows."""
    if isinstance(event, ev.ResourceRolledBack):
        return f"rollback to {event.to_revision}"
    return event.reason
