"""``fermix resource``: the versioned prompt files (list, history, show, diff, rollback)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fermix_memory.entrypoints.cli.output import EXIT_OK, Output, UsageError, jsonable

if TYPE_CHECKING:
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.reader import MemoryReader


def _resource_owner(memory: MemoryReader | MemorySystem, args: argparse.Namespace) -> tuple[str, str]:
    """The (agent, owner) a resource command is about: as given, or the only one there is."""
    pairs = sorted({(r.agent_id, r.owner_id) for r in memory.resources(agent_id=args.agent, owner_id=args.owner)})
    if args.agent and args.owner:
        return args.agent, args.owner
    if len(pairs) == 1:
        return pairs[0]
    if not pairs:
        raise UsageError("no prompt-file revisions match; give --agent and --owner")
    listed = ", ".join(f"{a}/{o}" for a, o in pairs[:10])
    raise UsageError(f"several agents/owners have prompt files ({listed}); give --agent and --owner")


REVISION_HEADER = "NAME\tAGENT/OWNER\tREVISION\tCREATED\tREASON"


def _revision_line(r: Any) -> str:
    return f"{r.name}\t{r.agent_id}/{r.owner_id}\trev {r.revision}\t{r.created_at.isoformat()}\t{r.reason}"


def _emit_revisions(out: Output, rows: Sequence[Any]) -> None:
    """Revisions as a table, or as JSON without their content (``resource show`` prints that)."""
    out.emit([{k: v for k, v in jsonable(r).items() if k != "content"} for r in rows] if out.as_json else rows,
             lambda rs: [REVISION_HEADER] + [_revision_line(r) for r in rs] if rs else ["no resources"])


def cmd_resource_list(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    rows = memory.resources(agent_id=args.agent, owner_id=args.owner)
    _emit_revisions(out, rows)
    return EXIT_OK


def cmd_resource_history(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    rows = memory.resource_history(args.name, agent_id=agent, owner_id=owner, limit=args.limit)
    if not rows and (args.limit > 0 or not memory.resource_history(args.name, agent_id=agent, owner_id=owner,
                                                                     limit=1)):
        raise UsageError(f"{args.name} of {agent}/{owner} has no revisions")
    _emit_revisions(out, rows)
    return EXIT_OK


def cmd_resource_show(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    if (args.rev is None) == (args.as_of is None):
        raise UsageError("give a revision number or --as-of TIME (one of them)")
    agent, owner = _resource_owner(memory, args)
    if args.as_of is None:
        revision = memory.resource_revision(args.name, args.rev, agent_id=agent, owner_id=owner)
        out.emit(revision, lambda r: r.content.splitlines())
        return EXIT_OK
    found = memory.resource_as_of(args.name, args.as_of, agent_id=agent, owner_id=owner)
    # No revision yet at that moment: the file was empty, as a memory before its first event.
    shown = jsonable(found) if found is not None else {
        "agent_id": agent, "owner_id": owner, "name": args.name, "revision": None, "content": "",
        "content_sha256": None, "reason": None, "created_at": None}
    out.emit({**shown, "as_of": args.as_of},
             lambda r: r["content"].splitlines() if r["revision"] is not None
             else [f"({r['name']} had no revision at {r['as_of']}: empty)"])
    return EXIT_OK


def cmd_resource_diff(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    diff = memory.resource_diff(args.name, args.a, args.b, agent_id=agent, owner_id=owner)
    out.emit({"name": args.name, "from": args.a, "to": args.b, "diff": diff},
             lambda r: r["diff"].splitlines() or ["(no difference)"])
    return EXIT_OK


def cmd_resource_rollback(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    report = memory.roll_back(args.name, args.rev, agent_id=agent, owner_id=owner, rows=args.rows, by="cli")
    path = memory.prompt_file(agent, owner, args.name)
    # rolled_back_to / new_revision: the keys of before, kept for scripts that read them.
    data = {**jsonable(report), "rolled_back_to": report.to_revision, "new_revision": report.revision,
            "file": str(path)}
    out.emit(data,
             lambda r: [r["note"], *(f"  #{o['memory_id']} {o['op']}: {o['status']}"
                                     f"{' (' + o['reason'] + ')' if o['reason'] else ''}" for o in r["rows"])])
    return EXIT_OK
