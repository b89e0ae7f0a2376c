"""The event file format (ADR-0030): a log moved between homes and stores as JSON Lines.

Line 1 is the header ``{"format": "fermix-events", "format_version": 1, "head": {"position": N,
"hash": H}}`` (a log of several chains adds ``"chains": [P0, P1, ...]``, each chain's last
position, and ``hash`` is the checkpoint over their heads: ADR-0031); then one line per event in
log order with its ``position``, ``stream``,
``version``, ``kind``, ``schema``, ``at``, ``payload`` (the stored payload text, verbatim) or
``"redacted": true`` instead of it, ``payload_sha256`` and ``hash`` (the chain hash). Every
line is JSON with sorted keys and no spaces, UTF-8, ended by ``\\n``: the same log always gives
the same bytes.

An encrypted export (ADR-0081) names its keyring in the header (``"sealed": {"keyring": ID}``)
and gives each payload that carries an owner's content as ``"payload": null`` beside
``"sealed": {"layers": [[AGENT, OWNER, KEY_ID], ...], "nonces": [HEX, ...], "data": BASE64}``:
the payload text sealed under each layer's data key in turn (innermost first), each layer bound
to its keyring, position, digest and key; then, outermost, under the key of its log position
(``"position": {"tree": ID, "nonce": HEX}``, the keyring's tree of position keys), which an
erasure of the payload destroys. A payload of no owner that an erasure of a conversation may
take is sealed under its position's key alone (no layers); the other payloads of no owner stay
plain. Its bytes differ from one export to the next (random nonces).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.log_chain import MAX_CHAINS, Head, LoggedEvent, is_hex_digest

FORMAT = "fermix-events"
FORMAT_VERSION = 1
_EVENT_KEYS = frozenset({"position", "stream", "version", "kind", "schema", "at", "payload_sha256", "hash"})


class BadEventLine(DomainError):
    """A line of an event file that is not what the format says."""


@attrs.frozen
class SealedPayload:
    """A payload sealed in layers: ``layers`` names each one's (agent, owner, data key id),
    innermost first; ``nonces`` their nonces (hex); ``data`` the outermost ciphertext (base64)."""

    layers: tuple[tuple[str, str, str], ...]
    nonces: tuple[str, ...]
    data: str
    # The outermost layer, under the key of the event's position: (tree id, nonce hex).
    position: tuple[str, str] | None = None


def sealing_context(keyring: str, position: int, digest: str, layer: tuple[str, str, str]) -> bytes:
    """What one layer of a sealed payload is bound to (AES-GCM associated data): a sealed payload
    moved to another line, another keyring or another key does not open."""
    return "\n".join(("fermix-sealed", "1", keyring, str(position), digest, *layer)).encode("utf-8")


def position_context(keyring: str, tree: str, position: int, digest: str) -> bytes:
    """What the layer under a position's key is bound to (AES-GCM associated data)."""
    return "\n".join(("fermix-sealed-position", "1", keyring, tree, str(position), digest)).encode("utf-8")


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def header_line(head: Head, keyring: str = "") -> str:
    """``keyring``: the id of the keyring an encrypted export's payloads are sealed with."""
    item: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION,
                            "head": {"position": head.position, "hash": head.hash}}
    if head.chains:
        item["chains"] = list(head.chains)
    if keyring:
        item["sealed"] = {"keyring": keyring}
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


def sealed_event_line(e: LoggedEvent, sealed: SealedPayload) -> str:
    """The line of an event whose payload is sealed (``e.payload`` is not written)."""
    body: dict[str, Any] = {"layers": [list(layer) for layer in sealed.layers], "nonces": list(sealed.nonces),
                            "data": sealed.data}
    if sealed.position is not None:
        body["position"] = {"tree": sealed.position[0], "nonce": sealed.position[1]}
    item: dict[str, Any] = {"position": e.position, "stream": e.stream, "version": e.version, "kind": e.kind,
                            "schema": e.schema, "at": e.recorded_at, "payload_sha256": e.payload_sha256,
                            "hash": e.hash, "payload": None, "sealed": body}
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
    if not is_hex_digest(text):
        raise BadEventLine(f"{what} must be 64 lower-case hex digits, got {text!r:.80}")
    return text


def parse_header(text: str) -> Head:
    """The head a header line names."""
    return parse_file_header(text)[0]


def parse_file_header(text: str) -> tuple[Head, str]:
    """The head a header line names and the keyring it was sealed with ("" for a plain file)."""
    item = _object(text)
    keyring = _sealed_header(item.pop("sealed", None))
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
        return Head(position, hash_), keyring
    chains = item["chains"]
    if not isinstance(chains, list) or not 2 <= len(chains) <= MAX_CHAINS:
        raise BadEventLine(f"chains is a list of 2 to {MAX_CHAINS} positions, one per chain")
    positions = tuple(_whole(p, "chain position", 0) for p in chains)
    if max(positions) != position:
        raise BadEventLine(f"the head position {position} is not the last of its chains' ({max(positions)})")
    return Head(position, hash_, positions), keyring


def _sealed_header(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, dict) or set(value) != {"keyring"} or not isinstance(value["keyring"], str) \
            or not is_hex_digest(value["keyring"], 32):
        raise BadEventLine('an encrypted export\'s header names its keyring: "sealed": {"keyring": 32 hex digits}')
    return value["keyring"]


def parse_event(text: str) -> LoggedEvent:
    e, sealed = parse_event_line(text)
    if sealed is not None:
        raise BadEventLine("its payload is sealed (an encrypted export): import it with the keys that sealed it")
    return e


def parse_event_line(text: str) -> tuple[LoggedEvent, SealedPayload | None]:
    """An event line, its payload sealed or not (a sealed one's event has no payload)."""
    item = _object(text)
    sealed = None
    if "sealed" in item and item.get("payload", 0) is None and "redacted" not in item:
        sealed = _sealed(item.pop("sealed"))
        del item["payload"]
        item["redacted"] = True  # what the line's own digest and chain are checked as
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
    ), sealed


_SEALED_RULE = ('"sealed" holds layers [[agent, owner, key id], ...], nonces [hex, ...] (one per layer),'
                ' data (base64) and position {tree, nonce} (required when there is no layer)')


def _position_layer(value: object) -> tuple[str, str]:
    if not isinstance(value, dict) or set(value) != {"tree", "nonce"} \
            or not all(isinstance(t, str) and t for t in value.values()):
        raise BadEventLine(_SEALED_RULE)
    return value["tree"], value["nonce"]


def _sealed(value: object) -> SealedPayload:
    if not isinstance(value, dict) or not {"layers", "nonces", "data"} <= set(value) \
            or not set(value) <= {"layers", "nonces", "data", "position"}:
        raise BadEventLine(_SEALED_RULE)
    layers, nonces, data = value["layers"], value["nonces"], value["data"]
    position = _position_layer(value["position"]) if "position" in value else None
    if not isinstance(layers, list) or not isinstance(nonces, list) or not (layers or position) \
            or len(layers) != len(nonces) \
            or not isinstance(data, str) or not all(isinstance(n, str) and n for n in nonces) \
            or not all(isinstance(lay, list) and len(lay) == 3 and all(isinstance(t, str) and t for t in lay)
                       for lay in layers):
        raise BadEventLine(_SEALED_RULE)
    return SealedPayload(tuple((a, o, k) for a, o, k in layers), tuple(nonces), data, position)
