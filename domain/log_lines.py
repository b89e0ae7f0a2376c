"""The event file format (ADR-0030): a log moved between homes and stores as JSON Lines.

Line 1 is the header ``{"format": "fermix-events", "format_version": 1, "head": {"position": N,
"hash": H}}`` (a log of several chains adds ``"chains": [P0, P1, ...]``, each chain's last
position, and ``hash`` is the checkpoint over their heads: ADR-0031); then one line per event in
log order with its ``position``, ``stream``,
``version``, ``kind``, ``schema``, ``at``, ``payload`` (the stored payload text, verbatim) or
``"redacted": true`` instead of it, ``payload_sha256`` and ``hash`` (the chain hash). Every
line is JSON with sorted keys and no spaces, UTF-8, ended by ``\\n``: the same log always gives
the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.log_chain import MAX_CHAINS, Head, LoggedEvent

FORMAT = "fermix-events"
FORMAT_VERSION = 1
_EVENT_KEYS = frozenset({"position", "stream", "version", "kind", "schema", "at", "payload_sha256", "hash"})
_HEX64 = frozenset("0123456789abcdef")


class BadEventLine(DomainError):
    """A line of an event file that is not what the format says."""


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def header_line(head: Head) -> str:
    item: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION,
                            "head": {"position": head.position, "hash": head.hash}}
    if head.chains:
        item["chains"] = list(head.chains)
    return _dumps(item)


def event_line(e: LoggedEvent) -> str:
    item: dict[str, Any] = {"position": e.position, "stream": e.stream, "version": e.version, "kind": e.kind,
                            "schema": e.schema, "at": e.recorded_at, "payload_sha256": e.payload_sha256,
                            "hash": e.hash}
    if e.payload is None:
        item["redacted"] = True
    else:
        item["payload"] = e.payload
    return _dumps(item)


def _object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BadEventLine(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadEventLine("not a JSON object")
    return value


def _whole(value: object, what: str, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise BadEventLine(f"{what} must be a whole number from {minimum}, got {value!r:.80}")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise BadEventLine(f"{what} must be text, got {value!r:.80}")
    return value


def _hex(value: object, what: str) -> str:
    text = _text(value, what)
    if len(text) != 64 or not set(text) <= _HEX64:
        raise BadEventLine(f"{what} must be 64 lower-case hex digits, got {text!r:.80}")
    return text


def parse_header(text: str) -> Head:
    """The head a header line names."""
    item = _object(text)
    if item.get("format") != FORMAT:
        raise BadEventLine(f"not an event file: its first line must name the format {FORMAT!r}")
    if item.get("format_version") != FORMAT_VERSION:
        raise BadEventLine(f"format version {item.get('format_version')!r:.40} is not {FORMAT_VERSION},"
                           " the one this version reads")
    head = item.get("head")
    if not isinstance(head, dict) or set(head) != {"position", "hash"} or not {
            "format", "format_version", "head"} <= set(item) <= {"format", "format_version", "head", "chains"}:
        raise BadEventLine("the header holds format, format_version, head {position, hash} and, for a log of"
                           " several chains, chains; nothing else")
    position, hash_ = _whole(head["position"], "head position", 0), _hex(head["hash"], "head hash")
    if "chains" not in item:
        return Head(position, hash_)
    chains = item["chains"]
    if not isinstance(chains, list) or not 2 <= len(chains) <= MAX_CHAINS:
        raise BadEventLine(f"chains is a list of 2 to {MAX_CHAINS} positions, one per chain")
    positions = tuple(_whole(p, "chain position", 0) for p in chains)
    if max(positions) != position:
        raise BadEventLine(f"the head position {position} is not the last of its chains' ({max(positions)})")
    return Head(position, hash_, positions)


def parse_event(text: str) -> LoggedEvent:
    item = _object(text)
    keys = set(item)
    redacted = item.get("redacted") is True
    body = {"redacted"} if redacted else {"payload"}
    if keys != _EVENT_KEYS | body:
        missing, extra = sorted((_EVENT_KEYS | body) - keys), sorted(keys - _EVENT_KEYS - body)
        raise BadEventLine("an event line holds " + ", ".join(sorted(_EVENT_KEYS)) + " and payload (or"
                           " redacted: true)" + (f"; missing {', '.join(missing)}" if missing else "")
                           + (f"; unexpected {', '.join(extra)}" if extra else ""))
    return LoggedEvent(
        position=_whole(item["position"], "position", 1), stream=_text(item["stream"], "stream"),
        version=_whole(item["version"], "version", 1), kind=_text(item["kind"], "kind"),
        schema=_whole(item["schema"], "schema", 1), recorded_at=_text(item["at"], "at"),
        payload=None if redacted else _text(item["payload"], "payload"),
        payload_sha256=_hex(item["payload_sha256"], "payload_sha256"), hash=_hex(item["hash"], "hash"),
    )
