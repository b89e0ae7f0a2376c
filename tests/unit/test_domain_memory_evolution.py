"""The evolve function that turns memory events into rows: every field each event sets, keeps or
lifts, and the events that leave a row alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, ScopeType, Trust

AT = datetime(2026, 3, 1, tzinfo=UTC)
LATER = AT + timedelta(hours=1)
KEY = ConversationKey("tg", "1")

PROVENANCE = ev.Provenance(agent_id="a", owner_id="o", trust=Trust.OPERATOR, source_type="reviewer",
                           source_id="src", session_id="sess", run_id="run", source_message_id=7)


def added() -> ev.MemoryAdded:
    return ev.MemoryAdded(at=AT, agent_id="a", owner_id="o", scope_type=ScopeType.OWNER, scope_id="o",
                          category=Category.GOAL, key="k", value="v", confidence=0.5,
                          promote_target=PromoteTarget.USER_MD, source_name="n", source_description="d",
                          provenance=PROVENANCE)


def test_evolve_added_replaced_archived_restored() -> None:
    row = evolve_memory(None, 12, added())
    assert row == Memory(id=12, agent_id="a", owner_id="o", scope_type=ScopeType.OWNER, scope_id="o",
                         category=Category.GOAL, key="k", value="v", confidence=0.5,
                         promote_target=PromoteTarget.USER_MD, source_id="src", source_type="reviewer",
                         source_name="n", source_description="d", session_id="sess", run_id="run",
                         source_message_id=7, created_at=AT, updated_at=AT)
    archived = evolve_memory(row, 13, ev.MemoryArchived(at=LATER, memory_id=12, archived_by="operator",
                                                         reason="old", provenance=PROVENANCE))
    assert archived is not None
    assert (archived.archived_at, archived.archived_by, archived.archive_reason) == (LATER, "operator", "old")
    assert archived.updated_at == LATER and archived.created_at == AT
    later = LATER + timedelta(hours=1)
    other = ev.Provenance(agent_id="a", owner_id="o", source_type="tool", source_id="s2", session_id="s3",
                          run_id="r2", source_message_id=9)
    replaced = evolve_memory(archived, 14, ev.MemoryReplaced(
        at=later, memory_id=12, category=Category.INTEREST, key="k2", value="w", confidence=0.25,
        promote_target=None, previous_value="v", provenance=other))
    assert replaced == attrs.evolve(row, category=Category.INTEREST, key="k2", value="w", confidence=0.25,
                                    promote_target=None, source_id="s2", source_type="tool", session_id="s3",
                                    run_id="r2", source_message_id=9, updated_at=later)
    restored = evolve_memory(archived, 15, ev.MemoryRestored(at=later, memory_id=12, restored_by="operator",
                                                             provenance=PROVENANCE))
    assert restored == attrs.evolve(row, updated_at=later)


def test_evolve_without_a_row_or_for_other_events() -> None:
    archive = ev.MemoryArchived(at=LATER, memory_id=12, archived_by="operator", reason="", provenance=PROVENANCE)
    assert evolve_memory(None, 13, archive) is None
    row = evolve_memory(None, 12, added())
    assert row is not None
    cleared = ev.ConversationWindowCleared(at=LATER, agent_id="a", conversation=KEY, up_to_message_id=3,
                                              provenance=PROVENANCE)
    assert evolve_memory(row, 14, cleared) is row
