"""Use case: roll a prompt file back to one of its revisions, saying what that does (R-RES).

Two ways, told apart because they last differently (ADR-0034):
- **the text** (reference behaviour): the revision's rendered text becomes a new revision and
  the file; the rows stay as they are, so the next rebuild renders the rows
  again and overwrites it;
- **the rows**: the owner's rows the revision was rendered from come back as ordinary operator
  memory events (replace, restore, archive through admission), and the file is rendered from
  them in the same commit, so file and rows agree and every later rebuild keeps it.
Rolling back to the current revision (or to rows that are already that revision's) changes nothing, and says so.
"""

from __future__ import annotations

import attrs

from fermix_memory.application.errors import NotFound
from fermix_memory.application.memory_writes import MemoryWriter, OperationOutcome
from fermix_memory.application.ports import Clock
from fermix_memory.application.prompt_files import PromptFiles, ResourceReader, check_resource_name
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.store_ports import EventStore, WriteTransaction
from fermix_memory.application.streams import memory_stream, resource_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.admission import WriteContext
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.row_rollback import plan_rows_rollback
from fermix_memory.domain.scopes import Reader, WriterKind
from fermix_memory.domain.values import PromoteTarget, Trust

TARGETS = {"user_md": PromoteTarget.USER_MD, "memory_md": PromoteTarget.MEMORY_MD}


@attrs.frozen(kw_only=True)
class RollbackReport:
    """What a rollback did. ``restored``: ``"text"`` or ``"rows"``; ``changed``: whether anything
    was recorded; ``revision``: the file's current revision after it; ``matches``: whether the
    file now holds exactly the text of ``to_revision``; ``rows``: each row change's outcome."""

    agent_id: str
    owner_id: str
    name: str
    to_revision: int
    restored: str
    changed: bool
    revision: int
    matches: bool
    rows: tuple[OperationOutcome, ...] = ()
    note: str = ""


class ResourceRollback:
    def __init__(self, store: EventStore, reader: ResourceReader, prompt_files: PromptFiles, writer: MemoryWriter,
                 clock: Clock) -> None:
        self._store = store
        self._reader = reader
        self._files = prompt_files
        self._writer = writer
        self._clock = clock

    def text(self, agent_id: str, owner_id: str, name: str, revision: int, *, by: str) -> RollbackReport:
        """The revision's text as a new revision (the rows untouched)."""
        target = self._target(agent_id, owner_id, name, revision)
        new = self._files.rollback(agent_id, owner_id, name, revision, by=by)
        report = self._report(agent_id, owner_id, name, revision, "text", changed=new is not None,
                              content=target.content)
        if new is None:
            return attrs.evolve(report, note=f"revision {revision} is the current revision of {name}: nothing to do")
        return attrs.evolve(report, note=(
            f"{name}: the text of revision {revision} restored as revision {new}; the memory rows are unchanged,"
            " so the next rebuild renders them again over it (--rows restores the rows instead)"))

    def rows(self, agent_id: str, owner_id: str, name: str, revision: int, *, by: str) -> RollbackReport:
        """The rows revision ``revision`` was rendered from, restored through admission."""
        target = self._target(agent_id, owner_id, name, revision)
        then = self._rows_at(agent_id, owner_id, self._rendered_at(agent_id, owner_id, name, revision))
        ctx = WriteContext(writer=WriterKind.OPERATOR, reader=Reader(agent_id=agent_id, owner_id=owner_id),
                           provenance=ev.Provenance(agent_id=agent_id, owner_id=owner_id, trust=Trust.OPERATOR,
                                                    source_type="rollback", source_id=by,
                                                    reason=f"rows of {name} revision {revision}"))
        at = self._clock.now()

        def work(tx: WriteTransaction) -> list[OperationOutcome]:
            now = {row.id: row for row in tx.memories_of(agent_id, owner_id)}
            for memory_id in then.keys() - now.keys():
                row = tx.by_id(memory_id)
                if row is not None:
                    now[memory_id] = row
            changes = plan_rows_rollback(then, now, TARGETS[name], f"not in {name} revision {revision} (rollback)")
            return self._writer.apply_changes_in(tx, changes, ctx, at) if changes else []

        outcomes = self._store.write(work)
        changed = any(o.status not in ("unchanged", "refused") for o in outcomes)
        report = self._report(agent_id, owner_id, name, revision, "rows", changed=changed, content=target.content)
        report = attrs.evolve(report, rows=tuple(outcomes))
        if not changed:
            return attrs.evolve(report, note=f"the rows of {name} are already those of revision {revision}:"
                                             " nothing to do" + _refusals(outcomes))
        same = "" if report.matches else (
            " (its text differs from that revision's: the rows now read in a new order, or show rules of other"
            " owners that changed since)")
        done = sum(o.status not in ("unchanged", "refused") for o in outcomes)
        return attrs.evolve(report, note=(
            f"{name}: {done} row change{'' if done == 1 else 's'} restore the rows of revision {revision}; the"
            f" file, now revision {report.revision}, is rendered from them{same}, and rebuilds keep it"
            f"{_refusals(outcomes)}"))

    # --- reads -----------------------------------------------------------------------------------

    def _target(self, agent_id: str, owner_id: str, name: str, revision: int) -> ResourceRevision:
        check_resource_name(name)
        found = self._reader.resource_revision(agent_id, owner_id, name, revision)
        if found is None:
            raise NotFound(f"{name} of {agent_id}/{owner_id} has no revision {revision}")
        return found

    def _rendered_at(self, agent_id: str, owner_id: str, name: str, revision: int) -> int:
        """The log position of the rendering revision ``revision`` shows (a rollback of the text
        shows an earlier rendering: followed back to it)."""
        recorded: dict[int, tuple[int, ev.DomainEvent]] = {}
        for item in self._store.read_events(stream=resource_stream(agent_id, owner_id, name)):
            e = item.event
            if isinstance(e, ev.ResourceRevised):
                recorded[e.revision] = (item.position, e)
            elif isinstance(e, ev.ResourceRolledBack):
                recorded[e.new_revision] = (item.position, e)
        seen = set()
        while revision in recorded and revision not in seen:
            seen.add(revision)
            position, e = recorded[revision]
            if not isinstance(e, ev.ResourceRolledBack):
                return position
            revision = e.to_revision
        raise NotFound(f"the rendering behind {name} revision {revision} of {agent_id}/{owner_id} is not in the log")

    def _rows_at(self, agent_id: str, owner_id: str, position: int) -> dict[int, Memory]:
        """The owner's rows (archived ones too) just before log ``position``: a fold of their
        memory stream, which shares the revision's chain (so positions order them)."""
        rows: dict[int, Memory] = {}
        for item in self._store.read_events(stream=memory_stream(agent_id, owner_id)):
            if item.position >= position:
                break
            e = item.event
            memory_id = item.position if isinstance(e, ev.MemoryAdded) else getattr(e, "memory_id", None)
            if memory_id is None:
                continue
            row = evolve_memory(rows.get(memory_id), item.position, e)
            if row is not None:
                rows[memory_id] = row
        return rows

    def _report(self, agent_id: str, owner_id: str, name: str, revision: int, restored: str, *, changed: bool,
                content: str) -> RollbackReport:
        current = self._reader.resource_revision(agent_id, owner_id, name)
        return RollbackReport(agent_id=agent_id, owner_id=owner_id, name=name, to_revision=revision,
                              restored=restored, changed=changed, revision=current.revision if current else 0,
                              matches=current is not None and current.content == content)


def _refusals(outcomes: list[OperationOutcome]) -> str:
    refused = [o for o in outcomes if o.status == "refused"]
    return "; refused: " + ", ".join(f"#{o.memory_id} ({o.reason})" for o in refused) if refused else ""
