"""A memory row: one scoped key/value fact with its provenance, archive state and expiry."""

from __future__ import annotations

from datetime import datetime

import attrs

from fermix_memory.domain.values import MAX_ITEM_VALUE_CHARS, MAX_VALUE_CHARS, Category, PromoteTarget, Scope, ScopeType

__all__ = ["MAX_ITEM_VALUE_CHARS", "MAX_VALUE_CHARS", "Memory", "Statement"]


@attrs.frozen(kw_only=True)
class Memory:
    """A row of the ``memories`` projection (same column names as the reference schema)."""

    id: int
    agent_id: str
    owner_id: str
    scope_type: ScopeType
    scope_id: str
    category: Category
    key: str
    value: str
    confidence: float = 1.0
    promote_target: PromoteTarget | None = None
    source_id: str = ""
    source_type: str = ""
    source_name: str = ""
    source_description: str = ""
    session_id: str = ""
    run_id: str = ""
    source_message_id: int | None = None
    archived_at: datetime | None = None
    archived_by: str | None = None
    archive_reason: str | None = None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None  # when the retention run erases it (ADR-0082)

    @property
    def scope(self) -> Scope:
        return Scope(self.scope_type, self.scope_id)

    @property
    def archived(self) -> bool:
        return self.archived_at is not None


@attrs.frozen
class Statement:
    """What a row states after an add or a replace was admitted (admission compares it with the
    row: the same statement again changes nothing)."""

    category: Category
    key: str
    value: str
    confidence: float
    promote_target: PromoteTarget | None
    expires_at: datetime | None
