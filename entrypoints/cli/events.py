"""``fermix events``: verify the hash chain and projections, print the head, replay, list the log,
write and check erasure receipts (export and import, which move a home, live in :mod:`moving`)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_memory.application.errors import IntegrityError
from fermix_memory.entrypoints.cli.moving import cmd_events_export as cmd_events_export
from fermix_memory.entrypoints.cli.moving import cmd_events_import as cmd_events_import
from fermix_memory.entrypoints.cli.output import (
    EXIT_ERROR,
    EXIT_OK,
    Output,
    UsageError,
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
    if args.public_key:  # the home's own key, read, never made on a read (ADR-0079)
        from fermix_memory.entrypoints.receipts import home_public_key

        out.emit({"public_key": home_public_key(memory.home)}, lambda k: [k["public_key"]])
        return EXIT_OK
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


def _receipt_detail(event: dict[str, Any]) -> str:
    """A receipt's gist (ADR-0083): its records, how many events it names erased, who asked and
    the heads, rather than its body's escaped JSON ("" when the body cannot be read)."""
    try:
        body = json.loads(event["receipt"])
        asked = body["asked_by"]
        return (f"receipt of records {event.get('records')}: {plural(len(body['erased']), 'event')} erased,"
                f" asked by {asked['source_type']} {asked['source_id']}, head {body['head_before']}"
                f" -> {body['head_after']}")
    except (ValueError, KeyError, TypeError):
        return ""


def _event_detail(event: dict[str, Any] | None) -> str:
    """What an event says, for a terminal: whose it is, a memory's key and value or a message's
    words first, then the other fields."""
    if event is None:
        return "[redacted]"
    if isinstance(event.get("receipt"), str) and (gist := _receipt_detail(event)):
        return gist
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


# --- receipts of erasures (ADR-0079) ---------------------------------------------------------------


def save_receipt(document: dict[str, Any], path: str) -> None:
    """Write a receipt file (0600: whoever it is for is given it; nobody else reads it here)."""
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text)


def cmd_events_receipt(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    document = memory.receipt(args.position)
    if args.output is None:
        out.out.write(json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n")
        return EXIT_OK
    save_receipt(document, args.output)
    out.emit({"receipt": document, "file": args.output},
             lambda r: [f"receipt of {plural(len(r['receipt']['records']), 'erasure record')} written to {r['file']}"])
    return EXIT_OK


def _receipt_file(path: str) -> dict[str, Any]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{path}: not a receipt file (JSON): {exc}") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: not a receipt file (a JSON object)")
    return document


def _home_key(home: str | None) -> str:
    from fermix_memory.application.errors import StorageError
    from fermix_memory.entrypoints.home import resolve_home
    from fermix_memory.entrypoints.receipts import home_public_key

    try:
        return home_public_key(resolve_home(home))
    except StorageError as exc:
        raise UsageError(f"give --public-key (the key the receipt is checked with): {exc}") from None


def cmd_events_verify_receipt(args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.entrypoints.receipts import check_receipt, trusted_key

    document = _receipt_file(args.file)
    if args.log is None:  # the home's own log: opened read-only
        from fermix_memory.entrypoints.api.memory_system import MemorySystem

        with MemorySystem.open(args.home, create=False, readonly=True) as memory:
            report = memory.verify_receipt(document, public_key=args.public_key)
    else:
        key = trusted_key(args.public_key) if args.public_key else _home_key(args.home)
        with open(args.log, encoding="utf-8") as lines:
            report = check_receipt(document, public_key=key, log_lines=lines)
    out.emit(report, lambda r: [f"ok: the signature holds and the log bears out {plural(r.records, 'record')}"
                                f" and {plural(r.erased, 'erased event')}"] if r.ok
             else [f"FAILED: {problem}" for problem in r.problems])
    return EXIT_OK if report.ok else EXIT_ERROR
