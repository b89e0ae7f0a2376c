"""The audit's shared vocabulary (R-LOG, R-REPLAY): the chain check and the log as an auditor
reads it (:mod:`.audit_chain`), the canonical checksum of a projection table's rows, and the
replica a dialect folds another store's log into to compare projections.

Entry points take the audit's types from here, whatever the store; the checks that read a
store's own files or catalog (full-text indexes, triggers, table columns) are its dialect's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from fermix_memory.adapters.sql.audit_chain import (
    BATCH,
    LogEntry,
    Progress,
    Stages,
    VerifyReport,
    check_chain,
    log_entries,
)
from fermix_memory.adapters.sql.cursor import SqlReader

__all__ = ["BATCH", "LogEntry", "Progress", "Replica", "Stages", "VerifyReport", "check_chain", "differing_tables",
           "log_entries", "rows_checksum"]


def _canonical(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, float):
        return repr(value)
    return value


# ``json.dumps(value, ensure_ascii=False)``, with the encoder made once (``dumps`` with an option
# builds one per call), and the types a row's values take as they are (``_canonical`` leaves them).
_ROW_ENCODER = json.JSONEncoder(ensure_ascii=False)
_PLAIN = frozenset({str, int, type(None)})


def rows_checksum(rows: Iterable[Sequence[Any]]) -> str:
    """SHA-256 of rows in the order given, each in a canonical JSON encoding: what a projection
    table's checksum is on every store."""
    digest = hashlib.sha256()
    encode = _ROW_ENCODER.encode
    for row in rows:
        values = row if set(map(type, row)) <= _PLAIN else [_canonical(v) for v in row]
        digest.update(encode(values).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def differing_tables(live: dict[str, str], rebuilt: dict[str, str]) -> list[str]:
    """The tables whose checksums differ between two sets of table checksums, sorted."""
    return sorted(t for t in live if live[t] != rebuilt[t])


class Replica(Protocol):
    """An empty, migrated store a log is folded into, its projections rebuilt apart from the live
    ones (a scratch database, or the target of a replay)."""

    target: str  # where it is, as a report names it

    def fold(self, source: SqlReader, progress: Progress | None) -> int:
        """Copy ``source``'s log in and rebuild every projection from it; the events folded."""
        ...

    def columns(self) -> dict[str, list[str]]:
        """Each projection table's columns, in the order its checksum reads them."""
        ...

    def checksums(self, progress: Progress | None) -> dict[str, str]:
        """Each projection table's :func:`rows_checksum`, rows ordered by each column in turn."""
        ...

    def close(self, *, keep: bool) -> None:
        """Close it; unless ``keep``, remove what it created."""
        ...
