"""The embedding API's receipts of erasures (ADR-0079): the home's public key, a receipt's file
object, and the check of a receipt against the log (the home's, or an exported one)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, cast

from fermix_memory.application.host_input import row_id
from fermix_memory.application.receipts import ReceiptLog, ReceiptReport, Receipts
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.entrypoints.api.base import ApiBase
from fermix_memory.entrypoints.receipts import check_receipt, document_of, home_public_key, trusted_key


class ReceiptsApi(ApiBase):
    """Signed receipts of erasures."""

    def public_key(self) -> str:
        """The home's public key (``ed25519:<hex>``): what a third party checks receipts with. A
        writable memory has one; a read-only one raises :class:`StorageError` if the home has none."""
        self._check_open()
        receipts = self._app.forgetting.follow_up
        return receipts.public_key() if isinstance(receipts, Receipts) else home_public_key(self._app.home)

    def receipt(self, position: int) -> dict[str, Any]:
        """The receipt file's object (the signed body and its ``signature``) of the receipt
        recorded at ``position``, or of the erasure recorded there (:class:`NotFound`: neither)."""
        self._check_open()
        return document_of(self._log(), row_id(position, "position"))

    def verify_receipt(self, receipt: dict[str, Any], *, log_lines: Iterable[str] | None = None,
                       public_key: str | None = None) -> ReceiptReport:
        """Check ``receipt`` (a receipt file's object): its signature under ``public_key`` (its
        text or a file holding it; default: this home's), then that the log bears it out (every
        erased position still chains and is unreadable, the records and heads are the log's).
        ``log_lines``: an exported event file's lines, checked instead of this home's log."""
        self._check_open()
        if not isinstance(receipt, dict):
            raise InvalidArgument("receipt must be a receipt file's object (a dict)")
        if public_key is not None and not isinstance(public_key, str):
            raise InvalidArgument("public_key must be text: ed25519:<hex>, or a file holding it")
        key = self.public_key() if public_key is None else trusted_key(public_key)
        lines = None if log_lines is None else _text_lines(log_lines)
        return check_receipt(receipt, public_key=key, store=self._log(), log_lines=lines)

    def _log(self) -> ReceiptLog:
        """The store, with the reads of erasure records every SQL store has (``adapters/sql``)."""
        return cast(ReceiptLog, self._app.store)


def _text_lines(lines: object) -> Iterator[str]:
    """An event file's lines, each checked to be text as it is read."""
    if isinstance(lines, (str, bytes)) or not isinstance(lines, Iterable):
        raise InvalidArgument("log_lines must be the lines of an exported event file (an iterable of text)")
    return _each_text(lines)


def _each_text(lines: Iterable[object]) -> Iterator[str]:
    for number, line in enumerate(lines, 1):
        if not isinstance(line, str):
            raise InvalidArgument(f"log_lines: line {number} is {type(line).__name__}, not text")
        yield line
