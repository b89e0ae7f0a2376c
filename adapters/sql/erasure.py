"""The logical step of an erasure on any SQL dialect (the ``ErasureTransaction`` port): find
what names an owner, and redact payloads inside the write that records the erasure.

Redaction nulls an event's payload (its digest stays in the hash chain, so the chain still
verifies) and notes durably, in the same transaction, that the store's files hold erased bytes
until a scrub succeeds. The scrub, the physical step, is each dialect's own.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from fermix_memory.adapters.sql.codec import encoded_text
from fermix_memory.adapters.sql.event_log import recorded_from_row
from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.application.store_ports import RecordedEvent

# Every projection table that names an owner: an agent holds something of an owner when one
# of these has a row of both.
OWNER_TABLES = ("messages", "memories", "resources", "review_state", "scheduled_jobs", "memory_sources")
# The readable events an erasure may redact; a dialect adds its test of kinds and payload.
CANDIDATES = "SELECT position, stream, version, kind, schema, payload FROM events WHERE payload IS NOT NULL"


class ErasingTransaction:
    """Implements ``ErasureTransaction`` on the write transaction it accompanies."""

    def __init__(self, tx: SqlTransaction) -> None:
        self._tx = tx
        self._cursor = tx.cursor

    def agents_of_owner(self, owner_id: str) -> list[str]:
        union = " UNION ".join(f"SELECT agent_id FROM {table} WHERE owner_id = :o" for table in OWNER_TABLES)
        rows = self._cursor.execute(union, {"o": owner_id}).fetchall()
        return sorted(str(r[0]) for r in rows if r[0] is not None)

    def erasure_candidates(self, owner_id: str, kinds: Collection[str]) -> list[RecordedEvent]:
        # The payload filter only narrows what is decoded; the events' own declarations decide.
        sql, params = self._candidates(sorted(kinds), encoded_text(owner_id))
        return [recorded_from_row(row) for row in self._cursor.execute(sql, params).fetchall()]

    def redact(self, positions: Sequence[int]) -> int:
        if positions:  # the erased bytes stay in the store's files until scrubbed
            self._redact(positions)
            self._cursor.execute("INSERT INTO scrub_pending(id, since_position) VALUES (1, ?)"
                                 " ON CONFLICT (id) DO NOTHING", (self._tx.position,))
        return len(positions)

    def _candidates(self, kinds: list[str], needle: str) -> tuple[str, Any]:
        """The statement (and its parameters) of :data:`CANDIDATES` whose kind is one of
        ``kinds`` or whose payload holds ``needle``, in log order."""
        raise NotImplementedError

    def _redact(self, positions: Sequence[int]) -> None:
        """Null the payloads of the events at ``positions`` (those not redacted already)."""
        raise NotImplementedError
