"""The hash chain of the event log (ADR-0002), independent of any store: a row's payload digest,
its chain hash, an event as the log holds it, and an incremental check of a chain read in order.

The chain covers each payload's digest, not the payload itself, so a redacted event (payload
erased, digest kept) still links.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import attrs

GENESIS_HASH = "0" * 64


def payload_digest(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chain_hash(
    prev_hash: str,
    position: int,
    stream: str,
    version: int,
    kind: str,
    schema: int,
    recorded_at: str,
    digest: str,
) -> str:
    """The hash of one log row: it covers the previous hash and the payload's digest (not the
    payload itself), so a payload can be redacted without breaking the chain."""
    material = "\n".join(
        (prev_hash, str(position), stream, str(version), kind, str(schema), recorded_at, digest)
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


@attrs.frozen(kw_only=True)
class LoggedEvent:
    """One row of the log as stored, chain included: ``payload`` is the encoded payload text,
    ``None`` once redacted (its digest stays)."""

    position: int
    stream: str
    version: int
    kind: str
    schema: int
    recorded_at: str
    payload: str | None
    payload_sha256: str
    hash: str


# Structures a payload into its event class (raises on a payload that does not fit).
PayloadCheck = Callable[[str, int, str], object]


class ChainCheck:
    """Feed a log's rows in order, from position 1: :meth:`problem` names what is wrong with the
    next one (a gap, a payload that does not match its digest or its schema, a stream version
    out of turn, a hash that does not recompute), or gives ``""`` and advances.

    Memory grows with the number of streams, not of events."""

    def __init__(self, structure: PayloadCheck | None = None) -> None:
        self.position = 0
        self.hash = GENESIS_HASH
        self.redacted = 0
        self._structure = structure
        self._versions: dict[str, int] = {}

    def problem(self, e: LoggedEvent) -> str:
        if e.position != self.position + 1:
            return f"event {e.position}: expected position {self.position + 1} (positions run from 1 without gaps)"
        if e.version != self._versions.get(e.stream, 0) + 1:
            return (f"event {e.position} ({e.kind}): version {e.version} of stream {e.stream!r}"
                    f" does not follow {self._versions.get(e.stream, 0)}")
        if e.payload is not None:
            if payload_digest(e.payload) != e.payload_sha256:
                return f"event {e.position} ({e.kind}): payload does not match its digest"
            if self._structure is not None:
                try:
                    self._structure(e.kind, e.schema, e.payload)
                except Exception as exc:  # the codec's own error, named with the event
                    return f"event {e.position} ({e.kind}): {exc}"
        expected = chain_hash(self.hash, e.position, e.stream, e.version, e.kind, e.schema, e.recorded_at,
                              e.payload_sha256)
        if expected != e.hash:
            return f"event {e.position} ({e.kind}): chain hash does not match its contents and the event before"
        self.position, self.hash = e.position, e.hash
        self._versions[e.stream] = e.version
        self.redacted += e.payload is None
        return ""
