"""Whose content each event kind declares it carries (what forgetting an owner redacts): every
field of every kind's declaration, and a kind without one refusing to be erased silently."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest

from fermix_memory.domain import events as ev
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Role, ScopeType

AT = datetime(2026, 3, 1, tzinfo=UTC)
KEY = ConversationKey("tg", "1")

BY = ev.Provenance(agent_id="ada", owner_id="alice")
WHO = {"agent_id": "ada", "owner_id": "alice"}
ALICE = (("ada", "alice"),)


def test_a_declaration_claims_nothing_unless_told() -> None:
    assert attrs.asdict(ev.Erasure(), recurse=False) == {
        "owners": (), "memory_row": None, "job": "", "conversation": None, "creates_row": False,
        "creates_job": "", "takes_part": False, "shared_row": False, "row_live": None, "revision": None,
        "shows_rules": False, "copies": None, "text": "", "statement": None}
    assert ev.Erasure() == ev.NO_OWNER_CONTENT


def test_a_kind_without_a_declaration_refuses_to_be_erased_silently() -> None:
    with pytest.raises(NotImplementedError):
        ev.DomainEvent(at=AT).erasure()


def test_the_kinds_that_refer_to_an_owner_through_another_record() -> None:
    referring = {"conversation.compaction_failed", "memory.replaced", "memory.archived", "memory.restored",
                 "memory.operation_refused", "job_run.recorded", "resource.revised", "resource.rolled_back"}
    assert referring == ev.REFERRING_KINDS


def test_message_and_window_declarations() -> None:
    said = ev.MessageAppended(at=AT, conversation=KEY, sender="alice", role=Role.USER, content="hi", created_at=AT,
                              quoted_owners=("bob",), **WHO)
    assert said.erasure() == ev.Erasure(owners=(("ada", "alice"), ("ada", "bob")), conversation=("ada", KEY),
                                        takes_part=True)
    cleared = ev.ConversationWindowCleared(at=AT, agent_id="ada", conversation=KEY, up_to_message_id=3,
                                           provenance=BY)
    compacted = ev.HistoryCompacted(at=AT, agent_id="ada", conversation=KEY, up_to_message_id=3,
                                    checkpoint_message_id=4, replaced_count=2, provenance=BY)
    failed = ev.CompactionFailed(at=AT, agent_id="ada", conversation=KEY, error="e", retry_after=AT)
    assert cleared.erasure() == compacted.erasure() == ev.Erasure()
    assert failed.erasure() == ev.Erasure(conversation=("ada", KEY))


def test_memory_declarations() -> None:
    added = ev.MemoryAdded(at=AT, scope_type=ScopeType.OWNER, scope_id="alice", category=Category.GOAL, key="k",
                           value="v", provenance=BY, **WHO)
    assert added.erasure() == ev.Erasure(owners=ALICE, creates_row=True, statement=ev.RowStatement(
        category=Category.GOAL, promote_target=None, value="v", scope_type=ScopeType.OWNER))
    rule = ev.MemoryAdded(at=AT, scope_type=ScopeType.AGENT, scope_id="ada", category=Category.DIRECTIVE, key="k",
                          value="v", promote_target=PromoteTarget.MEMORY_MD, provenance=BY, **WHO)
    assert rule.erasure() == ev.Erasure(owners=ALICE, creates_row=True, shared_row=True, statement=ev.RowStatement(
        category=Category.DIRECTIVE, promote_target=PromoteTarget.MEMORY_MD, value="v", scope_type=ScopeType.AGENT))
    for shape in ({"scope_type": ScopeType.OWNER}, {"category": Category.CONTEXT}, {"promote_target": None}):
        assert not attrs.evolve(rule, **shape).erasure().shared_row, shape
    replaced = ev.MemoryReplaced(at=AT, memory_id=7, category=Category.GOAL, key="k", value="w", confidence=1.0,
                                 previous_value="v", provenance=BY)
    archived = ev.MemoryArchived(at=AT, memory_id=7, archived_by="op", reason="r", provenance=BY)
    restored = ev.MemoryRestored(at=AT, memory_id=7, restored_by="op", provenance=BY)
    assert replaced.erasure() == ev.Erasure(memory_row=7, row_live=True, statement=ev.RowStatement(
        category=Category.GOAL, promote_target=None, value="w"))
    assert restored.erasure() == ev.Erasure(memory_row=7, row_live=True)
    assert archived.erasure() == ev.Erasure(memory_row=7, row_live=False)
    refused = ev.OperationRefused(at=AT, op="archive", reason="x", memory_id=7, provenance=BY)
    assert refused.erasure() == ev.Erasure(owners=ALICE, memory_row=7)


def test_review_job_and_resource_declarations() -> None:
    review = [
        ev.ReviewClaimed(at=AT, conversation=KEY, claim_id="c", holder="h", expires_at=AT, **WHO),
        ev.ReviewCompleted(at=AT, conversation=KEY, claim_id="c", reviewed_up_to_message_id=1, messages_reviewed=1,
                           applied=0, refused=0, **WHO),
        ev.ReviewFailed(at=AT, conversation=KEY, claim_id="c", error="e", retry_after=AT, **WHO),
        ev.ReviewSkipped(at=AT, conversation=KEY, reason="r", **WHO),
        ev.MemorySourceRegistered(at=AT, source_id="s", source_type="feed", name="n", **WHO),
    ]
    for event in review:
        assert event.erasure() == ev.Erasure(owners=ALICE), event
    for name, shows in (("user_md", False), ("memory_md", True)):
        revised = ev.ResourceRevised(at=AT, name=name, revision=3, content="c", content_sha256="", **WHO)
        assert revised.erasure() == ev.Erasure(owners=ALICE, revision=("ada", "alice", name, 3), shows_rules=shows,
                                               text="c")
        rolled = ev.ResourceRolledBack(at=AT, name=name, to_revision=1, new_revision=4, content="c",
                                       content_sha256="", provenance=BY, **WHO)
        assert rolled.erasure() == ev.Erasure(owners=ALICE, revision=("ada", "alice", name, 4), copies=1, text="c")
    saved = ev.ScheduledJobSaved(at=AT, job_id="j", name="n", schedule="s", prompt="p", memory_source_id="job:j",
                                 **WHO)
    assert saved.erasure() == ev.Erasure(owners=ALICE, creates_job="j")
    ran = ev.JobRunRecorded(at=AT, run_id="r", job_id="j", status="running", started_at=AT)
    assert ran.erasure() == ev.Erasure(job="j")
    traced = ev.ModelCallTraced(at=AT, agent="reviewer", agent_id="ada", provider="p", model="m", latency_ms=1.0,
                                outcome="ok")
    forgotten = ev.OwnerForgotten(at=AT, erased_events=1, provenance=BY, **WHO)
    assert traced.erasure() == forgotten.erasure() == ev.Erasure()
