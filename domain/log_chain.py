"""The hash chains of the event log (ADR-0002, ADR-0031), independent of any store: a row's
payload digest, its chain hash, the chain a partition key belongs to, the checkpoint over every
chain's head, an event as the log holds it, and an incremental check of a log read in order.

The chain covers each payload's digest, not the payload itself, so a redacted event (payload
erased, digest kept) still links. A log has N chains (N = 1: one chain through every event, the
embedded default); an event links to the one before it in its own chain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import attrs

GENESIS_HASH = "0" * 64
MAX_CHAINS = 1024


HEX_DIGITS = frozenset("0123456789abcdef")


def is_hex_digest(text: str, length: int = 64) -> bool:
    """``text`` is ``length`` lower-case hex digits (a sha256 digest by default), as hashes are written."""
    return len(text) == length and set(text) <= HEX_DIGITS


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


def chain_of(key: str, chains: int) -> int:
    """The chain (0 to ``chains - 1``) whose events a partition key's belong to: a stable hash of
    the key, the same on every store, host and version (it decides how a log links)."""
    if chains == 1:
        return 0
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % chains


def follows(position: int, last: int, chains: int) -> bool:
    """Whether an event at ``position`` may come after one at ``last``: one chain numbers its
    events without gaps; several only increase (a server allocates them side by side)."""
    return position == last + 1 if chains == 1 else position > last


def checkpoint_hash(heads: Sequence[tuple[int, str]]) -> str:
    """One hash over every chain's head ``(position, hash)`` in chain order. A single chain's
    checkpoint is its head's own hash, so a one-chain log anchors as it always did."""
    if len(heads) == 1:
        return heads[0][1]
    material = "\n".join(["checkpoint", str(len(heads)), *(f"{c}:{p}:{h}" for c, (p, h) in enumerate(heads))])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


@attrs.frozen
class Head:
    """What anchors a log (ADR-0011): its last position and, for one chain, its last event's
    hash; for several, ``chains`` holds each chain's last position (0: none yet) and ``hash``
    the checkpoint over their heads. ``str()`` is the anchor's text: ``POSITION:HASH``, or
    ``P0,P1,...:CHECKPOINT`` for several chains."""

    position: int
    hash: str
    chains: tuple[int, ...] = ()

    def __str__(self) -> str:
        if self.chains:
            return f"{','.join(map(str, self.chains))}:{self.hash}"
        return f"{self.position}:{self.hash}"


def head_of(heads: Sequence[tuple[int, str]]) -> Head:
    """The :class:`Head` of a log whose chains end at ``heads`` (``(position, hash)`` per chain)."""
    if len(heads) == 1:
        return Head(heads[0][0], heads[0][1])
    return Head(max(p for p, _ in heads), checkpoint_hash(heads), tuple(p for p, _ in heads))


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


# The chain of a stream (see ``application.streams.chain_for``).
ChainOf = Callable[[str], int]


class ChainCheck:
    """Feed a log's rows in order: :meth:`problem` names what is wrong with the next one (a gap,
    a payload that does not match its digest or its schema, a stream version out of turn, a hash
    that does not recompute from the one before it in its chain), or gives ``""`` and advances.

    One chain: positions run from 1 without gaps. Several (``chain_of`` names each stream's):
    positions only increase (a server allocating them concurrently leaves gaps), and each event
    links to its chain's last. Memory grows with the number of streams, not of events."""

    def __init__(self, structure: PayloadCheck | None = None, *, chains: int = 1,
                 chain_of: ChainOf | None = None) -> None:
        if chains > 1 and chain_of is None:
            raise ValueError("several chains need the chain of each stream")
        self.position = 0
        self.heads: list[tuple[int, str]] = [(0, GENESIS_HASH)] * chains
        self.events = 0
        self.redacted = 0
        self._structure = structure
        self._chain_of = chain_of
        self._versions: dict[str, int] = {}

    @property
    def hash(self) -> str:
        """The checkpoint of what was read so far (one chain: the last event's hash)."""
        return checkpoint_hash(self.heads)

    @property
    def head(self) -> Head:
        return head_of(self.heads)

    def problem(self, e: LoggedEvent) -> str:
        if not follows(e.position, self.position, len(self.heads)):
            return (f"event {e.position}: expected position {self.position + 1} (positions run from 1 without gaps)"
                    if len(self.heads) == 1 else
                    f"event {e.position}: expected a position after {self.position} (positions only increase)")
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
        chain = self._chain_of(e.stream) if self._chain_of is not None and len(self.heads) > 1 else 0
        expected = chain_hash(self.heads[chain][1], e.position, e.stream, e.version, e.kind, e.schema,
                              e.recorded_at, e.payload_sha256)
        if expected != e.hash:
            return f"event {e.position} ({e.kind}): chain hash does not match its contents and the event before"
        self.position = e.position
        self.heads[chain] = (e.position, e.hash)
        self.events += 1
        self._versions[e.stream] = e.version
        self.redacted += e.payload is None
        return ""


class Relink:
    """Link a log's events, read in order, onto ``chains`` chains: each event keeps its
    position, stream, version, time and digest, and gets the hash that links it to its new
    chain's last (what moving a one-chain log onto several does, ADR-0031)."""

    def __init__(self, chains: int, chain_of: ChainOf) -> None:
        self.heads: list[tuple[int, str]] = [(0, GENESIS_HASH)] * chains
        self._chain_of = chain_of

    def __call__(self, e: LoggedEvent) -> LoggedEvent:
        chain = self._chain_of(e.stream) if len(self.heads) > 1 else 0
        new_hash = chain_hash(self.heads[chain][1], e.position, e.stream, e.version, e.kind, e.schema,
                              e.recorded_at, e.payload_sha256)
        self.heads[chain] = (e.position, new_hash)
        return attrs.evolve(e, hash=new_hash)

    @property
    def head(self) -> Head:
        return head_of(self.heads)
