"""Finishing an erasure that was committed but whose scrub never ran to its end (the process
died, or a reader elsewhere kept the write-ahead log): run when a memory opens (ADR-0010)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fermix_memory.application.errors import StorageBusy, StorageError
from fermix_memory.application.privacy_ports import ErasureFollowUp
from fermix_memory.application.store_ports import Erasure

log = logging.getLogger("fermix_memory")


def finish_erasures(store: Erasure) -> None:
    """An erasure committed but its scrub never finished (the process died, or a reader kept
    the WAL): finish it now, or say plainly that the erased bytes are still in the files."""
    if not store.scrub_pending():
        return
    try:
        report = store.scrub()
    except StorageError as exc:
        log.warning("an erasure is not finished: %s still holds erased bytes (%s); open it again or run"
                    " forget again when no other process uses it", _where(store), exc)
        return
    if report.rewrite_pending:  # another writer kept the file all along (ADR-0095)
        log.warning("an erasure is not finished: %s", "; ".join(report.remains))
    elif not report.finished:
        log.warning("an erasure is not finished: erased bytes stay in %s's write-ahead log until the memory"
                    " is opened again with no other process on it", _where(store))
    for line in report.remains if report.finished else ():
        log.warning("an erasure is finished as far as this store allows; %s", line)


def followed_up(follow_up: ErasureFollowUp | None, records: Sequence[int], head_before: str) -> int | None:
    """Destroy export keys and sign the receipt of a committed erasure; the receipt's log position.
    Another writer still holding the file (ADR-0095) leaves it to the next open, which signs every
    receipt an erasure lacks: the erasure is committed, so this warns rather than fails it."""
    if not records or follow_up is None:
        return None
    try:
        return follow_up.erased(records, head_before)
    except StorageBusy as exc:
        log.warning("the erasure is committed; its receipt is signed when the memory next opens (%s)", exc)
        return None


def _where(erasure: Erasure) -> str:
    return str(getattr(erasure, "path", None) or getattr(erasure, "name", None) or "the PostgreSQL store")
