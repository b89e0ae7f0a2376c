"""``fermix memory`` (list, show, search, review, restore) and ``fermix forget``."""

from __future__ import annotations

import argparse
from typing import Any

from fermix_memory.adapters.sqlite.codec import CONVERTER
from fermix_memory.application.errors import ModelError, StorageBusy
from fermix_memory.application.ports import MemoryHit
from fermix_memory.domain.memory import Memory
from fermix_memory.entrypoints.api import MemorySystem
from fermix_memory.entrypoints.cli_output import (
    EXIT_ERROR,
    EXIT_OK,
    Output,
    UsageError,
    one_line,
    plural,
    report_error,
)

MEMORY_HEADER = "ID\tAGENT\tOWNER\tSCOPE\tCATEGORY\tKEY = VALUE"


def _memory_line(m: Any) -> str:
    state = f" (archived: {m.archive_reason or 'no reason'})" if m.archived_at else ""
    cells = (str(m.id), m.agent_id, m.owner_id, f"{m.scope_type.value}:{m.scope_id}", m.category.value,
             f"{m.key} = {m.value}{state}")
    return "\t".join(one_line(c) for c in cells)


def cmd_memory_list(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    rows = memory.memories(agent_id=args.agent, owner_id=args.owner, include_archived=not args.active)
    out.emit(rows, lambda rs: [MEMORY_HEADER] + [_memory_line(m) for m in rs] if rs else ["no memory rows"])
    return EXIT_OK


def cmd_memory_show(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    result = memory.explain(args.id)

    def human(r: dict[str, Any]) -> list[str]:
        lines = [_memory_line(CONVERTER.structure(r["memory"], Memory)), "history:"]
        for e in r["events"]:
            by = e.get("by", {})
            lines.append(f"  {e['at']}  #{e['position']} {e['kind']}  value={e.get('value', '')!r}  "
                         f"by={by.get('source_type', '')}/{by.get('trust', '')}"
                         f"{'  reason=' + e['reason'] if e.get('reason') else ''}")
            for m in e.get("source_messages", []):
                lines.append(f"      from #{m['id']} ({m['conversation']}, {m['sender']}): {m['content'][:120]}")
        return lines

    out.emit(result, human)
    return EXIT_OK


def cmd_memory_search(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    result = memory.recall(args.query, agent_id=args.agent, owner_id=args.owner, conversation=args.conversation,
                           scope=args.scope, source=args.source, limit=args.limit)

    def human(r: Any) -> list[str]:
        lines = []
        for h in r.ranked:
            if isinstance(h, MemoryHit):
                lines.append(f"memory {h.memory.id}: {h.memory.key} = {h.memory.value}")
            else:
                reply = f" reply to {h.context_of}" if h.context_of is not None else ""
                lines.append(f"message {h.message.id} ({h.message.conversation}){reply}: {h.snippet}")
        return lines or ["nothing found"]

    out.emit(result, human)
    return EXIT_OK


def cmd_memory_restore(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    current = memory.memory(args.id)
    if current.archived_at is None:  # nothing to undo: say so, and write nothing
        out.emit(current, lambda m: [f"already active: {_memory_line(m)}"])
        return EXIT_OK
    row = memory.restore(args.id, by="cli")
    out.emit(row, lambda m: [f"restored: {_memory_line(m)}"])
    return EXIT_OK


def cmd_forget(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    if not args.yes:
        where = f"agent {args.agent!r}" if args.agent else "every agent"
        raise UsageError(f"forget erases everything of owner {args.owner!r} with {where}, for good;"
                         " add --yes to go ahead")
    report = memory.forget_owner(args.owner, agent_id=args.agent, by="cli", reason=args.reason or "")

    def human(r: Any) -> list[str]:
        if not r.erased_events:
            with_agent = f" with agent {args.agent!r}" if args.agent else ""
            return [f"nothing of owner {r.owner_id!r} was found{with_agent}; nothing to erase, nothing erased"]
        lines = [f"forgot owner {r.owner_id!r} with {agent}: {n} events redacted, their rows deleted"
                 for agent, n in sorted(r.erased_events.items())]
        lines.append(f"memory.db rewritten: {r.bytes_before:,} -> {r.bytes_after:,} bytes")
        return lines

    out.emit(report, human)
    if not report.wal_truncated:
        report_error(out.as_json, StorageBusy("another process holds a read open, so the WAL still has old pages;"
                                        " run forget again once it has closed"))
        return EXIT_ERROR
    return EXIT_OK


def cmd_memory_review(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    if not args.now:
        raise UsageError("background reviews run after turns; use --now to review now")
    results = memory.review_now(agent_id=args.agent, owner_id=args.owner, conversation=args.conversation)

    def human(rs: list[Any]) -> list[str]:
        lines = [f"{r.agent_id}/{r.owner_id} {r.conversation}: {r.status}"
                 f"{' (' + r.reason + ')' if r.reason else ''}: {r.messages_reviewed} messages,"
                 f" {r.applied} applied, {r.refused} refused" for r in rs]
        return lines or ["no conversation has new messages to review"]

    out.emit(results, human)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        report_error(out.as_json, ModelError(f"{plural(len(failed), 'review')} failed; the first: {failed[0].reason}"))
        return EXIT_ERROR
    return EXIT_OK
