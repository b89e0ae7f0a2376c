"""The console's privacy page (ADR-0083): the signed receipts of erasures, the runs of the
retention policies and the export keys destroyed, each read from the log by its kind, newest
first. Like the events they are read from, nothing here carries anyone's content: positions,
times, counts, heads, who asked, and the (agent, owner) pairs whose keys went."""

from __future__ import annotations

import json
from typing import Any

import attrs
from starlette.responses import Response

from fermix_memory.domain.erased_rows import erased_by
from fermix_memory.domain.privacy_events import ErasureReceipted, ExportKeysDestroyed, RetentionRan
from fermix_memory.entrypoints.console.views import TEMPLATES, Page

SHOWN = 50  # newest entries of each kind


@attrs.frozen
class ReceiptLine:
    """One receipt as the page lists it."""

    position: int
    at: str
    asked_by: str
    reason: str
    records: int
    erased: int
    head_before: str
    head_after: str
    keys_destroyed: int


@attrs.frozen
class RunLine:
    """One retention run: its policies and what it covered by count, and its receipt."""

    position: int
    at: str
    policies: str
    conversations: int
    memory_rows: int
    erased_events: int
    head_before: str
    receipt: int | None


@attrs.frozen
class KeysLine:
    """Export keys destroyed: which (agent, owner) pairs, and the receipt of their erasure."""

    position: int
    at: str
    pairs: str
    receipt: int | None


def _body(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def receipt_line(position: int, recorded_at: str, event: ErasureReceipted) -> ReceiptLine:
    """What the page shows of a receipt: its body's times, heads and counts, and who asked."""
    body = _body(event.receipt)
    asked = body.get("asked_by")
    if not isinstance(asked, dict):
        asked = {}

    def count(name: str) -> int:
        value = body.get(name)
        return len(value) if isinstance(value, list) else 0

    source_id = str(asked.get("source_id", ""))
    source_type = str(asked.get("source_type", ""))
    who = erased_by(source_type, source_id) if source_type != "retention" else f"retention policies {source_id}"
    return ReceiptLine(position=position, at=str(body.get("at", recorded_at)), asked_by=who,
                       reason=str(asked.get("reason", "")), records=len(event.records), erased=count("erased"),
                       head_before=str(body.get("head_before", "")), head_after=str(body.get("head_after", "")),
                       keys_destroyed=count("keys_destroyed"))


def _receipt_of(receipts: dict[int, int], records: tuple[int, ...]) -> int | None:
    return next((receipts[r] for r in records if r in receipts), None)


async def _entries(page: Page, kind: str) -> list[Any]:
    found = [e async for e in page.memory.log_entries(kind=kind) if e.event is not None]
    return found[::-1]  # newest first


async def privacy(page: Page) -> Response:
    receipts = await _entries(page, ErasureReceipted.kind)
    receipt_of = {record: e.position for e in reversed(receipts) for record in e.event.records}
    runs = [RunLine(position=e.position, at=e.recorded_at, policies=", ".join(e.event.policies),
                    conversations=e.event.conversations, memory_rows=e.event.memory_rows,
                    erased_events=e.event.erased_events, head_before=e.event.head_before,
                    receipt=_receipt_of(receipt_of, e.event.records))
            for e in await _entries(page, RetentionRan.kind)]
    keys = [KeysLine(position=e.position, at=e.recorded_at, pairs=", ".join(f"{a}/{o}" for a, o in e.event.pairs),
                     receipt=_receipt_of(receipt_of, e.event.records))
            for e in await _entries(page, ExportKeysDestroyed.kind)]
    return page.render("privacy.html", receipts=[receipt_line(e.position, e.recorded_at, e.event)
                                                 for e in receipts[:SHOWN]],
                       runs=runs[:SHOWN], keys=keys[:SHOWN], counts=(len(receipts), len(runs), len(keys)))


def event_summary(event: object) -> str:
    """A content-free line for the event page's privacy records and erasure records ('' for others)."""
    if isinstance(event, ErasureReceipted):
        line = receipt_line(0, "", event)
        return f"receipt: {line.erased} events erased, asked by {line.asked_by}, head {line.head_after}"
    if isinstance(event, RetentionRan):
        return (f"retention run of {', '.join(event.policies)}: {event.memory_rows} rows,"
                f" {event.conversations} conversations, {event.erased_events} events")
    if isinstance(event, ExportKeysDestroyed):
        return f"export keys destroyed: {', '.join(f'{a}/{o}' for a, o in event.pairs)}"
    redacted = getattr(event, "redacted_positions", None)
    provenance = getattr(event, "provenance", None)
    if redacted is not None and provenance is not None and getattr(event, "kind", "").endswith(".forgotten"):
        return f"{len(redacted)} events erased by {erased_by(provenance.source_type, provenance.source_id)}"
    return ""


TEMPLATES.env.globals["summary"] = event_summary

__all__ = ["event_summary", "privacy", "receipt_line"]
