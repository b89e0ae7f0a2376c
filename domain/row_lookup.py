"""The read access to memory rows that a rule deciding over rows is given (a transaction, a fake)."""

from __future__ import annotations

from typing import Protocol

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import Scope


class RowLookup(Protocol):
    """Read access to memory rows, given by the caller (a transaction, a fake)."""

    def by_id(self, memory_id: int) -> Memory | None: ...

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None: ...
