"""Use case: keep USER.md / MEMORY.md in step with the memory rows (R-PROMPT, R-RES).

Each (agent, owner) has its own pair of files (ADR-0004). After every commit that touches
memory rows, the affected pairs are re-rendered INSIDE a write transaction (so the rendering
always matches the rows it was made from, across threads and processes); a changed file is
recorded as a new revision of resource ``user_md`` / ``memory_md`` and only then written to
disk, atomically. Files are derived: ``repair`` makes them match the log again after a crash.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from fermix_memory.application.errors import NotFound
from fermix_memory.application.ports import (
    Clock,
    EventStore,
    PromptFileSink,
    RecordedEvent,
    ResourceRevision,
    WriteTransaction,
)
from fermix_memory.application.streams import memory_stream, parse_owner_stream, resource_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.rendering import render_memory_md, render_user_md
from fermix_memory.domain.values import preview

log = logging.getLogger("fermix_memory.prompt_files")

RESOURCE_NAMES = ("user_md", "memory_md")
_MEMORY_EVENTS = (ev.MemoryAdded, ev.MemoryReplaced, ev.MemoryArchived, ev.MemoryRestored)


class ResourceReader(Protocol):
    """What the prompt-file use case reads outside transactions (the queries adapter)."""

    def resource_revision(self, agent_id: str, owner_id: str, name: str,
                          revision: int | None = None) -> ResourceRevision | None: ...

    def memory_owners(self) -> list[tuple[str, str]]: ...


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _lock(self, agent_id: str, owner_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault((agent_id, owner_id), threading.Lock())

    def render(self, rows: Iterable[Memory]) -> dict[str, str]:
        rows = list(rows)
        return {"user_md": render_user_md(rows, self._count), "memory_md": render_memory_md(rows, self._count)}

    # --- rebuild -------------------------------------------------------------------------------

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        """After-commit reaction: rebuild the files of every (agent, owner) whose rows changed."""
        pairs: dict[tuple[str, str], None] = {}
        for item in recorded:
            e = item.event
            if isinstance(e, ev.MemoryAdded):
                pairs[(e.agent_id, e.owner_id)] = None
            elif isinstance(e, _MEMORY_EVENTS):
                pairs[(e.provenance.agent_id, e.provenance.owner_id)] = None
        for agent_id, owner_id in pairs:
            self.rebuild(agent_id, owner_id)

    def rebuild(self, agent_id: str, owner_id: str, *, reason: str = "rebuild", check_files: bool = False
                ) -> list[str]:
        """Re-render from the rows; record and write what changed. Returns the changed names.

        Files are only touched when a revision was recorded (most memory commits change no
        rendering: tool rows, refusals); ``check_files`` also mends files that drifted on disk.
        """
        at = self._clock.now()

        def work(tx: WriteTransaction) -> list[str]:
            contents = self.render(tx.memories_of(agent_id, owner_id))
            changed = []
            for name, content in contents.items():
                current = tx.current_resource(agent_id, owner_id, name)
                if current is not None and current[1] == content:
                    continue
                if current is None and not content:
                    continue  # nothing to render, nothing rendered before: no empty revision 1
                revision = (current[0] if current else 0) + 1
                tx.append(resource_stream(agent_id, owner_id, name), [ev.ResourceRevised(
                    at=at, agent_id=agent_id, owner_id=owner_id, name=name, revision=revision,
                    content=content, content_sha256=sha256(content), reason=reason)])
                changed.append(name)
            return changed

        # The transaction alone keeps revisions consistent. The lock only orders file writes:
        # holding it across the write could deadlock, since the thread leading a commit runs
        # the rebuilds of every caller in its batch.
        changed = self._store.write(work)
        if changed or check_files:
            with self._lock(agent_id, owner_id):
                self._sync_files(agent_id, owner_id)
        return changed

    def _sync_files(self, agent_id: str, owner_id: str) -> None:
        for name in RESOURCE_NAMES:
            current = self._reader.resource_revision(agent_id, owner_id, name)
            if current is not None and self._files.read(agent_id, owner_id, name) != current.content:
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
        self._remove_forgotten_files()
        return repaired

    def _remove_forgotten_files(self) -> None:
        """Files of a forgotten owner that a crash left behind (the erasure had committed)."""
        for stream in self._store.last_positions("owner/"):
            agent_id, owner_id = parse_owner_stream(stream)
            if all(self._reader.resource_revision(agent_id, owner_id, n) is None for n in RESOURCE_NAMES):
                try:
                    self._files.remove(agent_id, owner_id)
                except OSError:
                    log.exception("could not remove the prompt files of forgotten %s/%s", agent_id, owner_id)

    # --- revisions ------------------------------------------------------------------------------

    def rollback(self, agent_id: str, owner_id: str, name: str, revision: int, *, by: str = "operator") -> int:
        """Restore an earlier rendering as a new revision and write it; returns the new revision.

        The next rebuild from changed rows renders the rows again (reference behaviour).
        """
        check_resource_name(name)
        target = self._reader.resource_revision(agent_id, owner_id, name, revision)
        if target is None:
            raise NotFound(f"{name} of {agent_id}/{owner_id} has no revision {revision}")
        at = self._clock.now()

        def work(tx: WriteTransaction) -> int:
            current = tx.current_resource(agent_id, owner_id, name)
            new_revision = (current[0] if current else 0) + 1
            tx.append(resource_stream(agent_id, owner_id, name), [ev.ResourceRolledBack(
                at=at, agent_id=agent_id, owner_id=owner_id, name=name, to_revision=revision,
                new_revision=new_revision, content=target.content, content_sha256=target.content_sha256,
                provenance=ev.Provenance(agent_id=agent_id, owner_id=owner_id, source_type="operator",
                                         source_id=by, reason=f"rollback to {revision}"))])
            return new_revision

        new_revision = self._store.write(work)
        with self._lock(agent_id, owner_id):
            self._sync_files(agent_id, owner_id)
        return new_revision


def unified_diff(a: ResourceRevision, b: ResourceRevision) -> str:
    """A unified diff from revision ``a`` to revision ``b``."""
    return "".join(difflib.unified_diff(
        a.content.splitlines(keepends=True), b.content.splitlines(keepends=True),
        fromfile=f"{a.name}@{a.revision}", tofile=f"{b.name}@{b.revision}",
    ))
