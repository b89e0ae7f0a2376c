"""Opening an encrypted export on import (ADR-0081): what the keyring still opens comes back
whole; a payload whose owner's key was destroyed (the owner forgotten) or whose position's key
was punctured (a row, a conversation or a retention run erased it) comes in redacted, its digest
kept so the chain still verifies, and the records written after the events account for every one:
one ``owner.forgotten`` per pair whose key is gone, one ``import.payloads_lost`` for the rest.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from datetime import datetime

import attrs

from fermix_memory.application.errors import EventFileError
from fermix_memory.application.sealed_export import DataKey, ExportKeyring, Pair, PositionKeys
from fermix_memory.application.store_ports import EventStore, WriteTransaction
from fermix_memory.application.streams import PAYLOADS_LOST_STREAM, owner_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.log_chain import LoggedEvent
from fermix_memory.domain.log_lines import SealedPayload, position_context, sealing_context
from fermix_memory.domain.values import Trust

DESTROYED_REASON = "export key destroyed"
LOST_REASON = "position key destroyed: erased in the exporting home after the export"


class SealedOpening:
    """Opens the sealed payloads of one encrypted export with the keyring ``keys()`` gives (as
    it is now; opened only for a sealed file, its failure an :class:`EventFileError`): a payload
    whose keys are all kept comes back whole; one whose owner's key was destroyed redacted,
    counted against that pair (``destroyed``); one whose position's key is punctured redacted,
    counted in ``lost``. ``at``: the time of the records of those."""

    def __init__(self, keys: Callable[[], ExportKeyring], at: datetime) -> None:
        self._keys_of = keys
        self._keyring: ExportKeyring | None = None
        self.at = at
        self._keyring_id = ""
        self._keys: dict[Pair, DataKey] = {}
        self._positions: PositionKeys | None = None
        self.destroyed: dict[Pair, list[int]] = {}
        self.lost: list[int] = []

    def begin(self, keyring_id: str) -> None:
        """A file sealed with keyring ``keyring_id`` is read (again) from its start."""
        if self._keyring is None:
            self._keyring = self._keys_of()
        held = self._keyring.keyring_id
        if keyring_id != held:
            raise EventFileError(f"the file was sealed with keyring {keyring_id}, but the keys given are those of"
                                 f" keyring {held} (give the keys folder of the home that exported it)")
        self._keyring_id = keyring_id
        self.destroyed = {}
        self.lost = []

    def open(self, e: LoggedEvent, sealed: SealedPayload) -> LoggedEvent:
        """``e`` with its payload opened, or as it is (redacted) when a key of it is destroyed;
        :class:`EventFileError` when it does not open (edited, another keyring or home key). An
        owner's key destroyed is looked for first: that owner's record accounts for the payload."""
        if not self._keyring_id or self._keyring is None:
            raise EventFileError("a sealed payload in a file whose header names no keyring")
        try:
            data = base64.b64decode(sealed.data, validate=True)
        except (binascii.Error, ValueError):
            raise EventFileError(f"event {e.position}: its sealed data is not base64") from None
        layers = []
        for layer, nonce in reversed(list(zip(sealed.layers, sealed.nonces, strict=True))):
            pair = (layer[0], layer[1])
            key = self._key(pair)
            if key is None or key.key_id != layer[2]:
                self.destroyed.setdefault(pair, []).append(e.position)
                return e
            layers.append((key, nonce, sealing_context(self._keyring_id, e.position, e.payload_sha256, layer),
                           f"the key of {pair[0]}/{pair[1]}"))
        if sealed.position is not None:
            tree, nonce = sealed.position
            leaf = self._leaf(tree, e.position)
            if leaf is None:
                self.lost.append(e.position)
                return e
            layers.insert(0, (leaf, nonce, position_context(self._keyring_id, tree, e.position, e.payload_sha256),
                              "its position's key"))
        for key, nonce, context, what in layers:
            data = self._opened(e, key, nonce, data, context, what)
        try:
            return attrs.evolve(e, payload=data.decode("utf-8"))
        except UnicodeDecodeError:
            raise EventFileError(f"event {e.position} ({e.kind}): its opened payload is not UTF-8") from None

    def _opened(self, e: LoggedEvent, key: DataKey, nonce: str, data: bytes, context: bytes, what: str) -> bytes:
        assert self._keyring is not None
        try:
            return self._keyring.open(key, bytes.fromhex(nonce), data, context)
        except ValueError:
            raise EventFileError(f"event {e.position} ({e.kind}): its sealed payload does not open under {what}"
                                 " (edited, or sealed with another key)") from None

    def record(self, store: EventStore) -> list[int]:
        """See :func:`record_destroyed` and :func:`record_lost`."""
        return record_destroyed(store, self) + record_lost(store, self)

    def _key(self, pair: Pair) -> DataKey | None:
        assert self._keyring is not None
        if pair not in self._keys:
            try:
                found = self._keyring.data_keys([pair]).get(pair)
            except ValueError as exc:  # a key that does not unwrap: another home's key
                raise EventFileError(str(exc)) from None
            if found is None:
                return None
            self._keys[pair] = found
        return self._keys[pair]

    def _leaf(self, tree: str, position: int) -> DataKey | None:
        assert self._keyring is not None
        if self._positions is None:
            try:
                self._positions = self._keyring.position_keys()
            except ValueError as exc:  # a cover that does not unwrap: another home's key
                raise EventFileError(str(exc)) from None
            if self._positions is None:
                raise EventFileError(f"event {position}: sealed under the position keys {tree}, and the keys given"
                                     " hold none (give the keys folder of the home that exported it)")
        if self._positions.tree_id != tree:
            raise EventFileError(f"event {position}: sealed under the position keys {tree}, but the keys given"
                                 f" hold {self._positions.tree_id}")
        return self._positions.key_of(position)


def record_destroyed(store: EventStore, opening: SealedOpening) -> list[int]:
    """After an import, one ``owner.forgotten`` per pair whose payloads came in redacted (their
    key was destroyed), naming those positions: ``events verify`` accounts for every one. The
    log positions of the records (none for what an earlier, cut-off run of the import recorded)."""
    if not opening.destroyed:
        return []

    def work(tx: WriteTransaction) -> list[int]:
        records: list[int] = []
        for (agent, owner), found in sorted(opening.destroyed.items()):
            # A resumed import: what an earlier run of it recorded already is not named twice.
            named = {p for item in tx.read_events(stream=owner_stream(agent, owner))
                     if isinstance(item.event, ev.OwnerForgotten) for p in item.event.redacted_positions or ()}
            positions = [p for p in found if p not in named]
            if not positions:
                continue
            record = ev.OwnerForgotten(
                at=opening.at, agent_id=agent, owner_id=owner, erased_events=len(positions),
                redacted_positions=tuple(positions),
                provenance=ev.Provenance(agent_id=agent, owner_id=owner, trust=Trust.OPERATOR, source_type="import",
                                         source_id="import", reason=DESTROYED_REASON))
            records.extend(tx.append(owner_stream(agent, owner), [record]))
        return records

    return store.write(work)


def record_lost(store: EventStore, opening: SealedOpening) -> list[int]:
    """After an import, one ``import.payloads_lost`` naming the positions whose keys were
    punctured (their payloads came in redacted): the log position of the record, if one was
    needed (none for what an earlier, cut-off run of the import recorded)."""
    if not opening.lost:
        return []

    def work(tx: WriteTransaction) -> list[int]:
        named = {p for item in tx.read_events(stream=PAYLOADS_LOST_STREAM)
                 if isinstance(item.event, ev.SealedPayloadsLost) for p in item.event.redacted_positions}
        positions = tuple(sorted(set(opening.lost) - named))
        if not positions:
            return []
        record = ev.SealedPayloadsLost(
            at=opening.at, redacted_positions=positions,
            provenance=ev.Provenance(agent_id="import", owner_id="import", trust=Trust.OPERATOR, source_type="import",
                                     source_id="import", reason=LOST_REASON))
        return tx.append(PAYLOADS_LOST_STREAM, [record])

    return store.write(work)
