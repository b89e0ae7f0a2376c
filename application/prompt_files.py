"""Use case: keep USER.md / MEMORY.md in step with the memory rows (R-PROMPT, R-RES).

Each (agent, owner) has its own pair of files (ADR-0004). A use case that changes memory rows
re-renders the affected pairs INSIDE its own write transaction (:meth:`PromptFiles.record_in`):
a changed rendering is recorded as a new revision of resource ``user_md`` / ``memory_md``
(numbered by ``domain.resources``) in the same commit as the change that caused it. After the
commit, only files whose revision changed are written, atomically (:meth:`PromptFiles.on_commit`):
no second write transaction, no file rewrite when the text is unchanged. Files are derived:
``repair`` makes them match the log again after a crash.

The agent's standing rules (operator directives, ``scopes.is_agent_rule``) are in every
owner's ``MEMORY.md``: a change of one re-renders the ``MEMORY.md`` of every owner of the
agent in the same transaction, and an owner's first message gets the rules rendered for them
(after its commit) if they have no ``MEMORY.md`` yet. Other changes re-render only the owners
they touch. All of this is the writer side: a composed prompt records nothing, and shows an
owner not met yet the rules without recording them (``shown_prompt_files``, ADR-0057).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from fermix_memory.application.errors import NotFound
from fermix_memory.application.ports import Clock, PromptFileSink
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.row_changes import ROW_CHANGES, changes_a_rule, shown_by_no_file
from fermix_memory.application.store_ports import EventStore, RecordedEvent, WriteTransaction
from fermix_memory.application.streams import memory_stream, parse_owner_stream, resource_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain import resources as res
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.rendering import SHOWN_SECTIONS, render_memory_md, render_user_md
from fermix_memory.domain.resources import sha256
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType, preview

__all__ = ["RESOURCE_NAMES", "PromptFiles", "ResourceReader", "check_resource_name", "sha256", "unified_diff"]

log = logging.getLogger("fermix_memory.prompt_files")

RESOURCE_NAMES = ("user_md", "memory_md")
# Owners whose first message was checked for the agent's rules (a bound, not a correctness need).
MAX_WELCOMED = 100_000


class ResourceReader(Protocol):
    """What the prompt-file use case reads outside transactions (the queries adapter)."""

    def resource_revision(self, agent_id: str, owner_id: str, name: str,
                          revision: int | None = None) -> ResourceRevision | None: ...

    def memory_owners(self) -> list[tuple[str, str]]: ...

    def agent_rules(self, agent_id: str) -> list[Memory]: ...

    def agent_owners(self, agent_id: str) -> list[str]: ...

    def agent_rules_changed_at(self) -> dict[str, datetime]: ...


def check_resource_name(name: str) -> str:
    if name not in RESOURCE_NAMES:
        raise NotFound(f"unknown resource {preview(name)}; resources are {', '.join(RESOURCE_NAMES)}")
    return name


class PromptFiles:
    def __init__(self, store: EventStore, reader: ResourceReader, files: PromptFileSink,
                 count_tokens: Callable[[str], int], clock: Clock) -> None:
        self._store = store
        self._reader = reader
        self._files = files
        self._count = count_tokens
        self._clock = clock
        self._welcomed: set[tuple[str, str]] = set()
        # Forgotten owners whose files a commit's reaction deleted, until their erasure asks.
        self._removed_at_commit: dict[tuple[str, str], None] = {}

    def _lock(self, agent_id: str, owner_id: str) -> AbstractContextManager[None]:
        return self._files.syncing(agent_id, owner_id)

    def render(self, rows: Iterable[Memory], agent_rules: Iterable[Memory] = ()) -> dict[str, str]:
        rows = list(rows)
        return {"user_md": render_user_md(rows, self._count),
                "memory_md": render_memory_md(rows, self._count, agent_rules=agent_rules)}

    # --- rebuild -------------------------------------------------------------------------------

    def record_in(self, tx: WriteTransaction, events: Sequence[ev.DomainEvent], at: datetime) -> None:
        """Inside the write that recorded ``events``: re-render the files of every (agent, owner)
        whose rows changed, and every owner's MEMORY.md of an agent whose standing rules changed
        (or who forgot an owner: they may have held rules); record the renderings that changed."""
        pairs: dict[tuple[str, str], None] = {}
        rules_changed: dict[str, None] = {}
        for e in events:
            if isinstance(e, ev.MemoryAdded):
                if e.promote_target is None:
                    continue  # a new row no file shows (a tool's, a job's): nothing to render (ADR-0060)
                pairs[(e.agent_id, e.owner_id)] = None
                if e.category == Category.DIRECTIVE and e.scope_type == ScopeType.AGENT \
                        and e.promote_target == PromoteTarget.MEMORY_MD:
                    rules_changed[e.agent_id] = None
            elif isinstance(e, ROW_CHANGES):
                if shown_by_no_file(tx, e):
                    continue  # a LangGraph item updated or deleted: nothing to render
                pairs[(e.provenance.agent_id, e.provenance.owner_id)] = None
                if changes_a_rule(tx, e):
                    rules_changed[e.provenance.agent_id] = None
            elif isinstance(e, ev.OwnerForgotten):
                rules_changed[e.agent_id] = None  # a forget is rare
            elif isinstance(e, ev.MemoryForgotten | ev.ConversationForgotten):
                owners = (e.owner_id,) if isinstance(e, ev.MemoryForgotten) else e.owners
                pairs.update(dict.fromkeys((e.agent_id, o) for o in owners))
                if any(r.owner_id not in owners for r in e.redacted_revisions):
                    rules_changed[e.agent_id] = None  # a row was a standing rule
        for agent_id, owner_id in pairs:
            if agent_id not in rules_changed:
                self._record(tx, agent_id, owner_id, RESOURCE_NAMES, tx.agent_rules(agent_id), at, "rebuild")
        for agent_id in rules_changed:
            self._record_agent(tx, agent_id, {o for a, o in pairs if a == agent_id}, at, "rules")

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        """After-commit reaction: write the files whose revision this commit recorded, and render
        the agent's rules for an owner who just arrived (their first message)."""
        pairs = []
        for item in recorded:  # the usual commit: messages only, no file revised
            if type(e := item.event) is not ev.MessageAppended:
                break
            pairs.append((e.agent_id, e.owner_id))
        else:
            for pair in pairs:  # welcomed in order, as below; a set lookup once welcomed
                if pair not in self._welcomed:
                    self.welcome(*pair)
            return
        revised: dict[tuple[str, str], None] = {}
        arrivals: dict[tuple[str, str], None] = {}
        forgotten: dict[tuple[str, str], None] = {}
        for item in recorded:
            e = item.event
            if isinstance(e, ev.ResourceRevised | ev.ResourceRolledBack):
                revised[(e.agent_id, e.owner_id)] = None
            elif isinstance(e, ev.OwnerForgotten):
                self._welcomed.discard((e.agent_id, e.owner_id))
                forgotten[(e.agent_id, e.owner_id)] = None
                # Other owners' files that showed the forgotten owner's rules: even when nothing
                # new was rendered for them (their whole MEMORY.md was those rules), they change.
                revised.update(dict.fromkeys((e.agent_id, r.owner_id) for r in e.redacted_revisions))
            elif isinstance(e, ev.MemoryForgotten | ev.ConversationForgotten):
                # Files that showed the rows, re-rendered or not (their revisions may just be gone).
                owners = (e.owner_id,) if isinstance(e, ev.MemoryForgotten) else e.owners
                revised.update(dict.fromkeys((e.agent_id, o) for o in owners))
                revised.update(dict.fromkeys((e.agent_id, r.owner_id) for r in e.redacted_revisions))
            elif isinstance(e, ev.MessageAppended):
                arrivals[(e.agent_id, e.owner_id)] = None
        for agent_id, owner_id in revised:
            with self._lock(agent_id, owner_id):
                self._sync_files(agent_id, owner_id)
        for pair in forgotten:  # here or on another host sharing the database (its change feed)
            if self._remove(*pair):
                if len(self._removed_at_commit) >= MAX_WELCOMED:
                    self._removed_at_commit.clear()
                self._removed_at_commit[pair] = None
        for agent_id, owner_id in arrivals:
            if (agent_id, owner_id) not in revised:
                self.welcome(agent_id, owner_id)

    def welcomed(self, agent_id: str, owner_id: str) -> bool:
        """Whether the owner's next message here needs no :meth:`welcome` (no read, no render)."""
        return (agent_id, owner_id) in self._welcomed

    def welcome(self, agent_id: str, owner_id: str) -> None:
        """An owner new to this process (after the commit of their first message here): record the
        agent's rules for them if they have no MEMORY.md yet. A set lookup after the first call."""
        if (agent_id, owner_id) in self._welcomed:
            return
        if self._reader.resource_revision(agent_id, owner_id, "memory_md") is None \
                and self._reader.agent_rules(agent_id):
            self.rebuild(agent_id, owner_id, reason="rules")
        if len(self._welcomed) >= MAX_WELCOMED:
            self._welcomed.clear()
        self._welcomed.add((agent_id, owner_id))

    def rebuild(self, agent_id: str, owner_id: str, *, reason: str = "rebuild", check_files: bool = False
                ) -> list[str]:
        """Re-render from the rows; record and write what changed. Returns the changed names.

        Files are only touched when a revision was recorded (most memory commits change no
        rendering: tool rows, refusals); ``check_files`` also mends files that drifted on disk.
        """
        at = self._clock.now()

        def work(tx: WriteTransaction) -> list[str]:
            return self._record(tx, agent_id, owner_id, RESOURCE_NAMES, tx.agent_rules(agent_id), at, reason)

        # The transaction alone keeps revisions consistent. The lock only orders file writes:
        # holding it across the write could deadlock, since the thread leading a commit runs
        # the rebuilds of every caller in its batch.
        changed = self._store.write(work)
        if changed or check_files:
            with self._lock(agent_id, owner_id):
                self._sync_files(agent_id, owner_id)
        return changed

    def _record_agent(self, tx: WriteTransaction, agent_id: str, touched: Collection[str], at: datetime,
                      reason: str) -> list[tuple[str, str]]:
        """Render the MEMORY.md of every owner of the agent (both files of the ``touched`` owners)
        and record what changed; returns the changed ``(owner, name)`` pairs."""
        rules = tx.agent_rules(agent_id)
        changed = []
        for owner_id in tx.agent_owners(agent_id):
            names = RESOURCE_NAMES if owner_id in touched else ("memory_md",)
            changed += [(owner_id, n) for n in self._record(tx, agent_id, owner_id, names, rules, at, reason)]
        return changed

    def _record(self, tx: WriteTransaction, agent_id: str, owner_id: str, names: Collection[str],
                rules: list[Memory], at: datetime, reason: str) -> list[str]:
        """Render ``names`` for one owner and record a revision of each that changed."""
        # The rows the files may show, a few per section (ADR-0060): they render as every row does.
        contents = self.render(tx.shown_rows(agent_id, owner_id, SHOWN_SECTIONS), rules)
        changed = []
        for name in names:
            events = res.decide_revise(_resource_state(tx, agent_id, owner_id, name), res.ReviseResource(
                key=res.ResourceKey(agent_id=agent_id, owner_id=owner_id, name=name), at=at,
                content=contents[name], reason=reason))
            if events:
                tx.append(resource_stream(agent_id, owner_id, name), events)
                changed.append(name)
        return changed

    def _sync_files(self, agent_id: str, owner_id: str) -> None:
        """Make the files match their current revisions (caller holds the pair's lock); a file
        without a current revision is never written, so a forgotten owner's folder stays gone,
        and is deleted (its every revision was erased: it showed a forgotten owner's rules)."""
        for name in RESOURCE_NAMES:
            current = self._reader.resource_revision(agent_id, owner_id, name)
            if current is None:
                self._files.discard(agent_id, owner_id, name)
            elif self._files.read(agent_id, owner_id, name) != current.content:
                self._files.write(agent_id, owner_id, name, current.content)

    def repair(self) -> int:
        """On start: re-render pairs whose rows changed after their last revision (a crash between
        commit and rebuild) and rewrite files that differ from their current revision."""
        repaired = 0
        last_memory = self._store.last_positions("memory/")
        last_resource = self._store.last_positions("resource/")
        for agent_id, owner_id in self._reader.memory_owners():
            rendered_at = max(last_resource.get(resource_stream(agent_id, owner_id, n), 0) for n in RESOURCE_NAMES)
            try:
                if last_memory.get(memory_stream(agent_id, owner_id), 0) > rendered_at:
                    self.rebuild(agent_id, owner_id, reason="repair", check_files=True)
                    repaired += 1
                else:
                    with self._lock(agent_id, owner_id):
                        self._sync_files(agent_id, owner_id)
            except OSError:
                # A derived file that cannot be written must not keep the memory from opening.
                log.exception("could not repair the prompt files of %s/%s", agent_id, owner_id)
        repaired += self._repair_rules()
        self._remove_forgotten_files()
        return repaired

    def _repair_rules(self) -> int:
        """Owners whose MEMORY.md is older than the agent's last change of a standing rule (a
        crash between that commit and the re-rendering of every owner): re-render them."""
        repaired = 0
        for agent_id, changed_at in self._reader.agent_rules_changed_at().items():
            live = bool(self._reader.agent_rules(agent_id))
            for owner_id in self._reader.agent_owners(agent_id):
                current = self._reader.resource_revision(agent_id, owner_id, "memory_md")
                if live if current is None else current.created_at < changed_at:
                    try:
                        if self.rebuild(agent_id, owner_id, reason="repair", check_files=True):
                            repaired += 1
                    except OSError:
                        log.exception("could not repair the prompt files of %s/%s", agent_id, owner_id)
        return repaired

    def _remove_forgotten_files(self) -> None:
        """Files of a forgotten owner that a crash left behind (the erasure had committed), and
        other owners' files that still showed the forgotten owner's rules."""
        for stream in self._store.last_positions("owner/"):
            agent_id, owner_id = parse_owner_stream(stream)
            try:
                self.remove_files(agent_id, owner_id)
                for item in self._store.read_events(stream=stream):
                    if isinstance(item.event, ev.OwnerForgotten):
                        for other in dict.fromkeys(r.owner_id for r in item.event.redacted_revisions):
                            with self._lock(agent_id, other):
                                self._sync_files(agent_id, other)
            except OSError:
                log.exception("could not remove the prompt files of forgotten %s/%s", agent_id, owner_id)

    def remove_files(self, agent_id: str, owner_id: str) -> bool:
        """After an erasure: delete the owner's files, unless a current revision exists again (the
        owner came back meanwhile: then the files are made to match it). Holds the same lock as
        every file write, so a write in flight can neither lose its file to the removal nor
        bring back a folder the removal just deleted. ``True`` when files were deleted (here, or
        by the erasure's commit as every host's are)."""
        removed = self._remove(agent_id, owner_id)
        return self._removed_at_commit.pop((agent_id, owner_id), False) is None or removed

    def _remove(self, agent_id: str, owner_id: str) -> bool:
        with self._lock(agent_id, owner_id):
            if any(self._reader.resource_revision(agent_id, owner_id, n) is not None for n in RESOURCE_NAMES):
                self._sync_files(agent_id, owner_id)
                return False
            return self._files.remove(agent_id, owner_id)

    def shown_after_erasure(self, records: Iterable[ev.DomainEvent]) -> list[tuple[str, str, str]]:
        """``(agent, owner, name)`` of each prompt file on this host that an erasure among
        ``records`` changed and that still differs from its current revision (or exists without
        one): it may show erased text (the erasure was made elsewhere and has not reached this
        host yet, or the file was put back)."""
        pairs: dict[tuple[str, str], None] = {}
        for e in records:
            if isinstance(e, ev.OwnerForgotten | ev.MemoryForgotten | ev.ConversationForgotten):
                owners = e.owners if isinstance(e, ev.ConversationForgotten) else (e.owner_id,)
                others = (r.owner_id for r in e.redacted_revisions)
                pairs.update(dict.fromkeys((e.agent_id, o) for o in (*owners, *others)))
        shown = []
        for agent_id, owner_id in pairs:
            with self._lock(agent_id, owner_id):
                for name in RESOURCE_NAMES:
                    text = self._files.read(agent_id, owner_id, name)
                    current = None if text is None else self._reader.resource_revision(agent_id, owner_id, name)
                    if text is not None and (current is None or current.content != text):
                        shown.append((agent_id, owner_id, name))
        return shown

    # --- revisions ------------------------------------------------------------------------------

    def rollback(self, agent_id: str, owner_id: str, name: str, revision: int, *, by: str = "operator"
                 ) -> int | None:
        """Restore an earlier rendering as a new revision and write it; returns the new revision,
        ``None`` when it is the current revision (nothing recorded).

        The rows are not changed: the next rebuild renders the rows again over it
        (reference behaviour). ``ResourceRollback.rows`` restores the rows instead.
        """
        check_resource_name(name)
        target = self._reader.resource_revision(agent_id, owner_id, name, revision)
        if target is None:
            raise NotFound(f"{name} of {agent_id}/{owner_id} has no revision {revision}")
        at = self._clock.now()

        cmd = res.RollBackResource(
            key=res.ResourceKey(agent_id=agent_id, owner_id=owner_id, name=name), at=at, to_revision=revision,
            content=target.content, content_sha256=target.content_sha256,
            provenance=ev.Provenance(agent_id=agent_id, owner_id=owner_id, source_type="operator", source_id=by,
                                     reason=f"rollback to {revision}"))

        def work(tx: WriteTransaction) -> int | None:
            events = res.decide_rollback(_resource_state(tx, agent_id, owner_id, name), cmd)
            if not events:
                return None
            tx.append(resource_stream(agent_id, owner_id, name), events)
            return res.evolve(res.NEVER_RECORDED, events[-1]).revision

        new_revision = self._store.write(work)
        if new_revision is None:
            return None
        with self._lock(agent_id, owner_id):
            self._sync_files(agent_id, owner_id)
        return new_revision


def _resource_state(tx: WriteTransaction, agent_id: str, owner_id: str, name: str) -> res.ResourceState:
    # Each event of a resource's stream is one of its revisions, numbered in order: the stream's
    # version (erased revisions included) is the highest number it ever had.
    numbered = tx.stream_version(resource_stream(agent_id, owner_id, name))
    current = tx.current_resource(agent_id, owner_id, name)
    if current is None:
        return res.ResourceState(numbered=numbered)
    return res.ResourceState(revision=current[0], content=current[1], numbered=numbered)


def unified_diff(a: ResourceRevision, b: ResourceRevision) -> str:
    """A unified diff from revision ``a`` to revision ``b``."""
    return "".join(difflib.unified_diff(
        a.content.splitlines(keepends=True), b.content.splitlines(keepends=True),
        fromfile=f"{a.name}@{a.revision}", tofile=f"{b.name}@{b.revision}",
    ))
