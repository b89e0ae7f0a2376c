"""Wiring the receipts of erasures (ADR-0079): the home's key signs them, a writable memory
makes up at open for receipts a crash left unsigned, and a receipt is checked against the
home's log or an exported one with a public key, with or without a home."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fermix_memory.adapters.home_keys import HomeKey, keys_folder, parse_public_key, signature_holds
from fermix_memory.adapters.keyring import Keyring
from fermix_memory.adapters.receipt_mark import ReceiptMarkFile
from fermix_memory.adapters.sql.codec import decode_payload
from fermix_memory.application.errors import StorageError
from fermix_memory.application.ports import Clock
from fermix_memory.application.receipts import (
    ReceiptLog,
    ReceiptReport,
    Receipts,
    receipt_document,
    verify_against_file,
    verify_against_log,
)
from fermix_memory.domain.errors import InvalidArgument

log = logging.getLogger("fermix_memory")


def wire_receipts(home: Path, store: Any, clock: Clock) -> Receipts | None:
    """What follows every erasure on a writable memory (``None`` on a read-only one): the home's
    key (made now if the home has none) signs the receipts."""
    if getattr(store, "readonly", False):
        return None
    folder = keys_folder(home)
    key = HomeKey(folder, create=True)
    # Forgetting an owner destroys their export data keys before the receipt is signed (ADR-0081).
    keys = Keyring(folder, key.wrapping_key())
    return Receipts(store, key, decode_payload, clock, keys=keys, mark=ReceiptMarkFile(folder))


def issue_missing(follow_up: object) -> None:
    """Sign the receipts of erasures a crash left without one (a writable memory's open)."""
    if not isinstance(follow_up, Receipts):
        return
    try:
        made = follow_up.issue_missing()
    except StorageError as exc:
        log.warning("erasures are left without their receipt for now (%s): they get it at the next open", exc)
        return
    if made:
        log.info("signed %d receipt(s) of erasures a crash had left without one", len(made))


def home_public_key(home: Path) -> str:
    """The home's public key, read (never made): :class:`StorageError` for a home without one."""
    return HomeKey(keys_folder(home), create=False).public_key()


def trusted_key(text: str) -> str:
    """A public key given as its text (``ed25519:<hex>``) or as a file holding it."""
    value = text.strip()
    if not value.startswith("ed25519:"):
        try:
            value = Path(text).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{text[:60]!r} is neither a public key (ed25519:<hex>) nor a file holding one"
                                  f" ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        parse_public_key(value)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    return value


def document_of(store: ReceiptLog, position: int) -> dict[str, Any]:
    """The receipt file's object of the receipt (or erasure record) at ``position``."""
    return receipt_document(store, decode_payload, position)


def check_receipt(document: Mapping[str, Any], *, public_key: str, store: ReceiptLog | None = None,
                  log_lines: Iterable[str] | None = None) -> ReceiptReport:
    """Check a receipt against ``log_lines`` (an event file), else against ``store``'s log."""
    if log_lines is not None:
        return verify_against_file(document, log_lines, public_key=public_key, holds=signature_holds)
    if store is None:
        raise InvalidArgument("a receipt is checked against a log: give an exported event file")
    return verify_against_log(document, store, public_key=public_key, holds=signature_holds)
