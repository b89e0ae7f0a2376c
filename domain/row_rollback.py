"""Rolling a prompt file's rows back to one of its revisions (pure, R-RES).

A revision of ``USER.md`` / ``MEMORY.md`` is recorded in the commit that changed the rows it
renders, so the rows it was rendered from are the owner's rows just before its log position.
Bringing them back is a handful of ordinary operator operations on today's rows — a replace
(which also un-archives), a restore, an archive — decided by admission like any operator write,
so the rows, the re-rendered file and every later rebuild agree (ADR-0034).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.operations import ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.rendering import renders
from fermix_memory.domain.values import PromoteTarget


@attrs.frozen(kw_only=True)
class RowChange:
    """One row's change: an operation for admission, or (``op`` None) a restore of ``memory_id``."""

    memory_id: int
    op: Operation | None = None


def _statement(row: Memory) -> tuple[object, ...]:
    return (row.category, row.key, row.value, row.confidence)


def plan_rows_rollback(then: Mapping[int, Memory], now: Mapping[int, Memory], target: PromoteTarget,
                       reason: str) -> list[RowChange]:
    """The changes that make the rows of file ``target`` what they were (``then``: the owner's
    rows at the revision, archived ones too; ``now``: the same rows today and every row live
    today). Only rows the file shows, then or now, are touched: a row live then comes back with
    its statement of then; a row the file shows now but did not then is archived. A row gone
    from ``now`` (erased since) is never brought back. Row order: by id."""
    changes = []
    for memory_id in sorted(set(then) | set(now)):
        old, cur = then.get(memory_id), now.get(memory_id)
        if cur is None or cur.promote_target != target:
            continue
        shown_then = old is not None and renders(old)
        if not shown_then and not renders(cur):
            continue
        if old is not None and not old.archived:
            if _statement(old) != _statement(cur):
                changes.append(RowChange(memory_id=memory_id, op=ReplaceOperation(
                    id=memory_id, value=old.value, category=old.category.value, key=old.key,
                    confidence=old.confidence)))
            elif cur.archived:
                changes.append(RowChange(memory_id=memory_id))
        elif not cur.archived:
            changes.append(RowChange(memory_id=memory_id, op=ArchiveOperation(id=memory_id, reason=reason)))
    return changes
