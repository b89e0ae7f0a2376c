"""A memory row: one scoped key/value fact with its provenance and archive state."""

from __future__ import annotations

from datetime import datetime

import attrs

from fermix_memory.domain.values import MAX_VALUE_CHARS, Category, PromoteTarget, Scope, ScopeType

__all__ = ["MAX_VALUE_CHARS", "Memory"]


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

    @property
    def scope(self) -> Scope:
        return Scope(self.scope_type, self.scope_id)

    @property
    def archived(self) -> bool:
        return self.archived_at is not None
