"""Encrypted exports (ADR-0081): the event file with each owner's payloads sealed under the
owner's data key and under the key of the payload's log position (the import that opens what
the keyring still can is ``application.sealed_import``).

Which (agent, owner) pairs own a payload is exactly what ``forget`` of each owner would redact
(``domain.erasure.OwnerContentFinder``, fed as forget feeds it). A payload of several owners is
sealed under each one's key in turn, nested, so it opens only while every one of them is kept;
then, outermost, under its position's key from the keyring's puncturable tree
(``domain.position_keys``). Forgetting an owner destroys their keys; erasing a memory row or a
conversation (by ``forget`` or a retention run) punctures the keys of the positions it redacted.
Either way an export made before then loses those payloads. A payload of no owner stays plain,
unless an erasure of a conversation may take it (a window cleared): that one is sealed under its
position's key alone.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, cast

import attrs

from fermix_memory.application.errors import EventFileError
from fermix_memory.application.log_transfer import head_value
from fermix_memory.application.store_ports import EventStore
from fermix_memory.application.streams import chain_for
from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import OwnerContentFinder
from fermix_memory.domain.log_chain import Head, LoggedEvent, PayloadCheck
from fermix_memory.domain.log_lines import (
    SealedPayload,
    event_line,
    header_line,
    position_context,
    sealed_event_line,
    sealing_context,
)
from fermix_memory.domain.position_keys import LeafKeys

Pair = tuple[str, str]  # (agent_id, owner_id)


@attrs.frozen
class DataKey:
    """One pair's data key: ``key_id`` names it in sealed payloads (random, so a key made again
    after a destruction never opens what the destroyed one sealed)."""

    key_id: str
    key: bytes = attrs.field(repr=False)


@attrs.frozen
class PositionKeys:
    """The keyring's tree of per-position keys as it stood when read: ``tree_id`` names it in
    sealed payloads; a punctured position (its payload erased since) has no key."""

    tree_id: str
    leaves: LeafKeys = attrs.field(repr=False, eq=False)

    def key_of(self, position: int) -> DataKey | None:
        leaf = self.leaves.key_of(position)
        return None if leaf is None else DataKey(self.tree_id, leaf)


class ExportKeyring(Protocol):
    """The home's keyring of per-(agent, owner) data keys, and AES-GCM under them."""

    @property
    def keyring_id(self) -> str: ...

    def data_keys(self, pairs: Iterable[Pair], create: bool = False) -> dict[Pair, DataKey]:
        """The keys of ``pairs`` that have one (``create``: all, made as needed)."""
        ...

    def seal(self, key: DataKey, data: bytes, context: bytes) -> tuple[bytes, bytes]:
        """``(nonce, ciphertext)``."""
        ...

    def open(self, key: DataKey, nonce: bytes, data: bytes, context: bytes) -> bytes:
        """The plain data; ``ValueError`` when it does not open under ``key`` and ``context``."""
        ...

    def position_keys(self, create: bool = False) -> PositionKeys | None:
        """The tree of per-position keys as it is now (``create``: made when missing)."""
        ...


# --- export ------------------------------------------------------------------------------------


def _exported(store: EventStore, head: Head) -> Iterator[LoggedEvent]:
    """The events an export of the log at ``head`` holds (as ``log_transfer.export_lines``)."""
    if head.position == 0:
        return
    chains = len(head.chains)
    for e in store.read_log():
        if not chains or e.position <= head.chains[chain_for(e.stream, chains)]:
            yield e
        if e.position >= head.position:
            return
    raise EventFileError(f"the log ended before its head {head.position}")


@attrs.frozen
class _Declared:
    """An event reduced to its erasure declaration, worked out once for every owner's finder
    (which reads neither the text of a revision nor a row's statement)."""

    declared: ev.Erasure

    def erasure(self) -> ev.Erasure:
        return self.declared


def _decoded(store: EventStore, head: Head, structure: PayloadCheck) -> Iterator[tuple[int, str, ev.Erasure]]:
    for e in _exported(store, head):
        if e.payload is not None:
            event = cast(ev.DomainEvent, structure(e.kind, e.schema, e.payload))
            yield e.position, e.kind, event.erasure()


def content_owners(store: EventStore, head: Head, structure: PayloadCheck) -> dict[int, tuple[Pair, ...]]:
    """Per position, the pairs whose ``forget`` would redact its payload (sorted); positions of
    no owner are left out. One read of the log: each owner's finder is fed the events that name
    them and every event that refers to others (what forget reads); an owner first named late
    is fed first the referring events before (kept, without their text, for that)."""
    finders: dict[str, OwnerContentFinder] = {}
    referring: list[tuple[int, ev.DomainEvent]] = []
    for position, kind, decl in _decoded(store, head, structure):
        shim = cast(ev.DomainEvent, _Declared(attrs.evolve(decl, text="", statement=None)))
        for owner in {o for _, o in decl.owners} - finders.keys():
            finders[owner] = OwnerContentFinder(owner)
            for earlier in referring:
                finders[owner].add(*earlier)
        if kind in ev.REFERRING_KINDS:
            referring.append((position, shim))
            named = list(finders.values())
        else:
            named = [finders[o] for o in {o for _, o in decl.owners}]
        for finder in named:
            finder.add(position, shim)
    found: dict[int, set[Pair]] = defaultdict(set)
    for owner, finder in finders.items():
        for agent, positions in finder.positions().items():
            for position in positions:
                found[position].add((agent, owner))
    return {position: tuple(sorted(pairs)) for position, pairs in found.items()}


# Streams whose events an erasure of a conversation takes whole: a payload of no owner there
# (a window cleared) is sealed under its position's key alone. Records of erasures never go.
_ERASABLE_STREAMS = ("conversation/", "review/")
_NEVER_ERASED = frozenset(cls.kind for cls in ev.ERASURE_RECORDS)


def _erasable(e: LoggedEvent) -> bool:
    return e.stream.startswith(_ERASABLE_STREAMS) and e.kind not in _NEVER_ERASED


def seal_payload(keyring: ExportKeyring, keyring_id: str, e: LoggedEvent, pairs: Sequence[Pair],
                 keys: dict[Pair, DataKey], positions: PositionKeys | None = None) -> SealedPayload | None:
    """``e``'s payload sealed under each pair's key in turn (the first innermost), then under its
    position's key (when ``positions`` holds one). ``None`` when there is nothing to seal under
    (no pair, and its position's key punctured: a log that reuses the keyring's positions)."""
    assert e.payload is not None
    data = e.payload.encode("utf-8")
    layers, nonces = [], []
    for pair in pairs:
        key = keys[pair]
        layer = (pair[0], pair[1], key.key_id)
        nonce, data = keyring.seal(key, data, sealing_context(keyring_id, e.position, e.payload_sha256, layer))
        layers.append(layer)
        nonces.append(nonce.hex())
    leaf = None if positions is None else positions.key_of(e.position)
    outer = None
    if leaf is not None:
        nonce, data = keyring.seal(leaf, data, position_context(keyring_id, leaf.key_id, e.position,
                                                                e.payload_sha256))
        outer = (leaf.key_id, nonce.hex())
    if not layers and outer is None:
        return None
    return SealedPayload(tuple(layers), tuple(nonces), base64.b64encode(data).decode("ascii"), outer)


def sealed_export_lines(store: EventStore, structure: PayloadCheck, keyring: ExportKeyring) -> Iterator[str]:
    """The log as an encrypted event file (see the module): the header naming the keyring, then
    every event up to the head read first, each owner's payloads sealed, and each of them (and
    each payload of a conversation's) under its position's key too. The keys are taken (made as
    needed) before the payloads are read for sealing: an erasure committed meanwhile either
    redacted a payload before it was read or destroys the key that sealed it."""
    head = head_value(store.head())
    owners = content_owners(store, head, structure)
    keys = keyring.data_keys({pair for pairs in owners.values() for pair in pairs}, create=True)
    positions = keyring.position_keys(create=True)
    keyring_id = keyring.keyring_id
    yield header_line(head, keyring_id)
    for e in _exported(store, head):
        pairs = owners.get(e.position, ())
        sealed = None
        if e.payload is not None and (pairs or _erasable(e)):
            sealed = seal_payload(keyring, keyring_id, e, pairs, keys, positions)
        yield event_line(e) if sealed is None else sealed_event_line(e, sealed)
