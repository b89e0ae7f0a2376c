"""The plan that brings a prompt file's rows back to a revision (domain/row_rollback.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.operations import ArchiveOperation, ReplaceOperation
from fermix_memory.domain.row_rollback import RowChange, plan_rows_rollback
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType

T = datetime(2026, 1, 1, tzinfo=UTC)


def row(memory_id: int, value: str, *, category: Category = Category.IDENTITY, archived: bool = False,
        scope: ScopeType = ScopeType.OWNER) -> Memory:
    return Memory(id=memory_id, agent_id="ada", owner_id="alice", scope_type=scope, scope_id="alice",
                  category=category, key=f"k{memory_id}", value=value, promote_target=category.promote_target,
                  archived_at=T if archived else None, created_at=T, updated_at=T)


def test_rows_come_back_as_they_were_and_rows_shown_since_are_archived() -> None:
    then = {1: row(1, "Paris"), 2: row(2, "Alice", archived=True), 3: row(3, "Tea"), 4: row(4, "Gone"),
            5: row(5, "Same")}
    now = {1: row(1, "Berlin"), 2: row(2, "Alice"), 3: row(3, "Tea", archived=True),
           6: row(6, "New"), 5: row(5, "Same"),
           7: row(7, "Rule", category=Category.CONTEXT),  # MEMORY.md's: not USER.md's to touch
           8: row(8, "Job", scope=ScopeType.JOB)}  # never rendered: left alone
    assert plan_rows_rollback(then, now, PromoteTarget.USER_MD, "r") == [
        RowChange(memory_id=1, op=ReplaceOperation(id=1, value="Paris", category="identity", key="k1",
                                                    confidence=1.0)),
        RowChange(memory_id=2, op=ArchiveOperation(id=2, reason="r")),
        RowChange(memory_id=3),  # a restore
        RowChange(memory_id=6, op=ArchiveOperation(id=6, reason="r")),
    ]  # row 4, erased since, does not come back; row 5 is unchanged


def test_nothing_to_do_when_the_rows_are_those_of_the_revision() -> None:
    rows = {1: row(1, "Paris"), 2: attrs.evolve(row(2, "Old"), archived_at=T)}
    assert plan_rows_rollback(rows, rows, PromoteTarget.USER_MD, "r") == []
