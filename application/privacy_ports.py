"""The ports that make erasure provable (ADR-0078): the home's signing key, the keyring of
export data keys, and what follows every committed erasure (key destruction, the receipt)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol


class Signer(Protocol):
    """The home's Ed25519 key."""

    def public_key(self) -> str:
        """``ed25519:<hex>``: what a third party checks signatures with."""
        ...

    def sign(self, body: bytes) -> str:
        """The signature of ``body``, in hex."""
        ...


class ExportKeys(Protocol):
    """The home's keyring of per-(agent, owner) data keys that seal encrypted exports."""

    def destroy(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Destroy the data keys of ``pairs`` (durably, before returning); the pairs that had one."""
        ...

    def puncture(self, positions: Iterable[int]) -> int:
        """Destroy the keys of the log ``positions`` that seal encrypted exports (durably, before
        returning): what an erasure of rows or conversations redacted; how many had one."""
        ...


class ErasureFollowUp(Protocol):
    """What runs once an erasure committed and its scrub ran: destroy the export keys of a
    forgotten owner, then sign and record the receipt. Idempotent by ``records``; also run when
    a memory opens for records a crash left without a receipt."""

    def erased(self, records: Sequence[int], head_before: str) -> int | None:
        """``records``: the log positions of the erasure's records (one erasure, one receipt);
        ``head_before``: the log's head (``events head``'s text) when the erasure began, or ""
        when unknown (it is then read from the log). The log position of the receipt."""
        ...
