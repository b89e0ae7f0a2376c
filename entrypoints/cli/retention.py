"""``fermix retention``: what the retention policies make due and when, and a run now (ADR-0080).
Items are named by conversation key and memory row id, never by content."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from fermix_memory import MemorySystem
from fermix_memory.application.retention import RetentionItem, RetentionReport, RetentionStatus
from fermix_memory.entrypoints.cli.output import EXIT_ERROR, EXIT_OK, Output, one_line, plural, report_error


def _when(moment: datetime | None) -> str:
    return "never" if moment is None else moment.isoformat(timespec="seconds")


def _item(item: RetentionItem) -> str:
    what = f"conversation {one_line(item.conversation)}" if item.conversation else f"memory {item.memory_id}"
    return f"  {item.policy}: {what} (agent {one_line(item.agent_id)})"


def _status_lines(status: RetentionStatus) -> list[str]:
    lines = []
    for p in status.policies:
        covers = "rows' own expiry" if p.name == "expires_at" else f"{p.selector} {p.value!r} after {p.after}" + (
            f" (agent {p.agent_id})" if p.agent_id else "")
        lines.append(f"{p.name}: {covers}; due now: {plural(p.due_conversations, 'conversation')},"
                     f" {plural(p.due_rows, 'row')}; next due: {_when(p.next_due)}; last run: {_when(p.last_run)}")
    lines.append(f"due now: {plural(status.due, 'item')}; next due after that: {_when(status.next_due)}")
    return lines


def cmd_retention_status(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    status = memory.retention_status()
    if not args.dry_run:
        out.emit(status, _status_lines)
        return EXIT_OK
    preview = memory.run_retention(dry_run=True)
    out.emit({"status": status, "would_erase": preview.items},
             lambda _: [*_status_lines(status), "a run now would erase:", *map(_item, preview.items)]
             if preview.items else [*_status_lines(status), "a run now would erase nothing"])
    return EXIT_OK


def cmd_retention_run(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    report = memory.run_retention(dry_run=args.dry_run)

    def human(r: RetentionReport) -> list[str]:
        if r.dry_run:
            return ["a run now would erase:", *map(_item, r.items)] if r.items else ["a run now would erase nothing"]
        if not r.items:
            return ["nothing is due: nothing erased"]
        return [f"erased {plural(len(r.items), 'item')} ({plural(r.erased_events, 'event')} redacted),"
                f" recorded at position {r.record}:", *map(_item, r.items)]

    out.emit(report, human)
    return _finished(report, out)


def _finished(report: RetentionReport, out: Output) -> int:
    """A run whose files could not all be rewritten is an error (the next open finishes it)."""
    from fermix_memory.application.errors import StorageBusy

    if not report.finished:
        report_error(out.as_json, StorageBusy("; ".join(report.remains) or "the store still holds erased bytes"))
        return EXIT_ERROR
    for line in report.remains:
        sys.stderr.write(f"fermix: warning: {one_line(line)}\n")
    return EXIT_OK


__all__ = ["cmd_retention_run", "cmd_retention_status"]
