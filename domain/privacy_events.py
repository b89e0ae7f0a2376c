"""Events of proving erasure: the signed receipt of an erasure, the record of one retention run
and the record of an owner's export keys destroyed. None of them carries anyone's content."""

from __future__ import annotations

from typing import ClassVar

import attrs

from fermix_memory.domain.event_base import NO_OWNER_CONTENT, DomainEvent, Erasure, Provenance


@attrs.frozen(kw_only=True)
class ErasureReceipted(DomainEvent):
    """The home signed a receipt of one erasure: ``receipt`` is the receipt's body exactly as
    signed (canonical JSON, see ``domain.receipts``), ``signature`` its Ed25519 signature
    (hex). ``records``: the log positions of the erasure's records the receipt covers."""

    kind: ClassVar[str] = "erasure.receipted"
    refers_to_others: ClassVar[bool] = False
    records: tuple[int, ...]
    receipt: str
    signature: str

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # a receipt names positions and digests, never content


@attrs.frozen(kw_only=True)
class RetentionRan(DomainEvent):
    """One run of the retention policies erased what they covered: per policy, how many
    conversations and memory rows (each erased as ``forget`` erases it, with its own record),
    how many events in all, and the log's head when the run began."""

    kind: ClassVar[str] = "retention.ran"
    refers_to_others: ClassVar[bool] = False
    policies: tuple[str, ...]
    conversations: int
    memory_rows: int
    erased_events: int
    head_before: str
    # The erasure records the run appended (one per conversation or row), in log order.
    records: tuple[int, ...] = ()
    provenance: Provenance

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT


@attrs.frozen(kw_only=True)
class SealedPayloadsLost(DomainEvent):
    """An import of an encrypted export brought the payloads at ``redacted_positions`` in
    redacted: the keys of those positions were destroyed in the keyring of the home that exported
    it (an erasure of a memory row or a conversation, or a retention run, took them there after
    the export). Like every erasure record, it carries no content: which positions, and why."""

    kind: ClassVar[str] = "import.payloads_lost"
    refers_to_others: ClassVar[bool] = False
    # The log positions it leaves redacted: ``verify`` accounts for these NULL payloads by them.
    redacted_positions: tuple[int, ...]
    provenance: Provenance

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # the record of an erasure is never erased


@attrs.frozen(kw_only=True)
class ExportKeysDestroyed(DomainEvent):
    """The data keys that sealed (agent, owner) pairs' payloads in encrypted exports were
    destroyed in the home's keyring: every encrypted export made before loses those payloads."""

    kind: ClassVar[str] = "export_keys.destroyed"
    refers_to_others: ClassVar[bool] = False
    pairs: tuple[tuple[str, str], ...]
    # The erasure records whose forgetting destroyed them.
    records: tuple[int, ...] = ()

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT
