"""Where a home keeps the log's position up to which every erasure has its receipt (ADR-0079):
``HOME/keys/receipts.mark``, one line ``POSITION:HASH`` (the hash of the event there, so a mark
left by another log is known for what it is), replaced whole, 0600 beside the home's key."""

from __future__ import annotations

import os
from pathlib import Path

from fermix_memory.application.errors import StorageError

MARK_NAME = "receipts.mark"


class ReceiptMarkFile:
    """The ``ReceiptMark`` port over one file in the home's keys folder."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / MARK_NAME

    def read(self) -> tuple[int, str] | None:
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None  # none kept (or unreadable): every erasure record is read once more
        position, _, hash_ = text.partition(":")
        if not position.isdigit() or len(hash_) != 64:
            return None
        return int(position), hash_

    def write(self, position: int, hash_: str) -> None:
        temporary = self.path.with_name(f".{MARK_NAME}.{os.getpid()}")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(f"{position}:{hash_}\n")
            os.replace(temporary, self.path)
        except OSError as exc:
            raise StorageError(f"cannot keep the receipts' mark {self.path}: {exc.strerror or exc}") from None
