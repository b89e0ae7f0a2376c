"""The hash chain of the event log, the same on every store: a payload's digest, and the hash
of one log row over the previous row's hash and that digest (ADR-0002). One place, so a change
of the chain's shape (e.g. one chain per partition) is made once for every store."""

from __future__ import annotations

import hashlib

# The hash before the first event of a chain.
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
