"""``fermix events``: verify the hash chain and projections, print the head, replay, list the log
(export and import, which move a home, live in :mod:`moving`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_memory.application.errors import IntegrityError
from fermix_memory.entrypoints.cli.moving import cmd_events_export as cmd_events_export
from fermix_memory.entrypoints.cli.moving import cmd_events_import as cmd_events_import
from fermix_memory.entrypoints.cli.output import (
    EXIT_ERROR,
    EXIT_OK,
    Output,
    jsonable,
    one_line,
    plural,
    progress_bars,
    report_error,
)

if TYPE_CHECKING:
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.reader import MemoryReader


def _verify_lines(r: Any) -> list[str]:
    if r.ok:
        return [f"ok: {plural(r.events, 'event')}, chain and projections verified"
                + (f" ({r.redacted} redacted)" if r.redacted else "")
                + (f"; {plural(r.vectors_waiting, 'text')} waiting for a vector" if r.vectors_waiting else "")]
    where = f" at event {r.first_bad_position}" if r.first_bad_position is not None else ""
    return [f"FAILED{where}: {r.problem}"]


def cmd_events_verify(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    with progress_bars("verify") as (progress,):
        report = memory.verify(progress, expect_head=args.expect_head)
    out.emit(report, _verify_lines)
    if not report.ok:
        report_error(out.as_json, IntegrityError(f"verification failed: {report.problem}"))
        return EXIT_ERROR
    return EXIT_OK


def cmd_events_head(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    head = memory.head()
    item: dict[str, Any] = {"position": head.position, "hash": head.hash, "anchor": str(head)}
    if head.chains:  # a log of several chains: each chain's last position; ``hash`` is their checkpoint
        item["chains"] = list(head.chains)
    out.emit(item, lambda h: [h["anchor"]])
    return EXIT_OK


def cmd_events_replay(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    with progress_bars("replay") as (progress,):
        result = memory.replay_into(Path(args.into), progress)
    out.emit(result, lambda r: [f"replayed {plural(r['events'], 'event')} into {r['target']}",
                                "projections identical to the live database" if r["identical"] else
                                f"DIFFERENT tables: {', '.join(r['differing_tables'])}"])
    return EXIT_OK if result["identical"] else EXIT_ERROR


def _event_detail(event: dict[str, Any] | None) -> str:
    """What an event says, for a terminal: whose it is, a memory's key and value or a message's
    words first, then the other fields."""
    if event is None:
        return "[redacted]"
    parts = []
    if "agent_id" in event or "owner_id" in event:
        parts.append(f"{event.get('agent_id', '')}/{event.get('owner_id', '')}")
    if "key" in event and "value" in event:
        parts.append(f"{event['key']} = {event['value']}")
    elif "content" in event:
        parts.append(f"{event.get('role', '')} {event.get('sender', '')}: {event['content']}".strip())
    shown = ("agent_id", "owner_id", "key", "value", "content", "role", "sender", "provenance", "at")
    rest = {k: v for k, v in event.items() if k not in shown}
    parts.append(json.dumps(rest, ensure_ascii=False, sort_keys=True))
    text = one_line("  ".join(parts))
    return text if len(text) <= 240 else text[:239] + "…"


def cmd_events_log(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    items: list[dict[str, Any]] = []
    for entry in memory.log_entries(after=args.after, kind=args.kind):
        if len(items) >= args.limit:  # before adding: --limit 0 prints none
            break
        items.append({"position": entry.position, "stream": entry.stream, "version": entry.version,
                      "kind": entry.kind, "recorded_at": entry.recorded_at, "redacted": entry.event is None,
                      "payload_sha256": entry.payload_sha256,
                      "event": None if entry.event is None else jsonable(entry.event)})
    out.emit(items, lambda rows: ["POSITION\tKIND\tSTREAM\tEVENT"] + [
        f"{r['position']}\t{r['kind']}\t{r['stream']}\t{_event_detail(r['event'])}" for r in rows]
        if rows else ["no events"])
    return EXIT_OK
