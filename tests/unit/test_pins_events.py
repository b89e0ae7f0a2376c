"""Pins for the domain's records: event defaults and schema versions (a stored event decoded
without a field gets its default, so a changed default changes history), memory rows, operations,
the evolve function that turns events into rows, and whose content each event kind declares
it carries (what forgetting an owner redacts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from fermix_memory.domain import events as ev
from fermix_memory.domain.checkpoint import CheckpointSources, checkpoint_sources, is_checkpoint, readable_by_its_owner
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, ReplaceOperation
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Role, ScopeType, Trust

AT = datetime(2026, 3, 1, tzinfo=UTC)
LATER = AT + timedelta(hours=1)
KEY = ConversationKey("tg", "1")

# (event class, field) -> the default written in the specification of the log.
DEFAULTS = {
    (ev.HistoryCompacted, "tokens_before"): 0,
    (ev.HistoryCompacted, "tokens_after"): 0,
    (ev.MemoryAdded, "confidence"): 1.0,
    (ev.MemoryAdded, "promote_target"): None,
    (ev.ReviewClaimed, "reviewed_after_id"): 0,
    (ev.ReviewCompleted, "nothing_to_save"): False,
    (ev.ScheduledJobSaved, "enabled"): True,
    (ev.ModelCallTraced, "prompt_tokens"): 0,
    (ev.ModelCallTraced, "completion_tokens"): 0,
    (ev.ModelCallTraced, "attempts"): 1,
}


@pytest.mark.parametrize(("cls", "field"), list(DEFAULTS))
def test_event_field_defaults(cls: type[ev.DomainEvent], field: str) -> None:
    assert attrs.fields_dict(cls)[field].default == DEFAULTS[(cls, field)]
    assert type(attrs.fields_dict(cls)[field].default) is type(DEFAULTS[(cls, field)])


SCHEMA_2 = (ev.OwnerForgotten, ev.MemoryAdded, ev.MemoryReplaced, ev.MemoryArchived)


def test_every_event_is_at_schema_1_with_a_tag_but_owner_forgotten_and_row_changes_at_2() -> None:
    classes = [c for c in vars(ev).values() if isinstance(c, type) and issubclass(c, ev.DomainEvent)
               and c is not ev.DomainEvent]
    assert len(classes) >= 20
    for cls in classes:
        assert cls.schema == (2 if cls in SCHEMA_2 else 1), cls
        assert cls.kind, cls


def test_memory_row_defaults_and_archived_flag() -> None:
    row = Memory(id=1, agent_id="a", owner_id="o", scope_type=ScopeType.OWNER, scope_id="o",
                 category=Category.GOAL, key="k", value="v", created_at=AT, updated_at=AT)
    assert row.confidence == 1.0 and row.promote_target is None and not row.archived
    assert attrs.evolve(row, archived_at=AT).archived


def test_operation_defaults() -> None:
    assert AddOperation(category="goal", key="k", value="v").confidence == 1.0
    assert ReplaceOperation(id=1) == ReplaceOperation(id=1, value=None, category=None, key=None, confidence=None)
    assert ArchiveOperation(id=1).reason == ""
    assert (AddOperation.op, ReplaceOperation.op, ArchiveOperation.op) == ("add", "replace", "archive")


def test_a_message_defaults_to_guest_trust_and_empty_metadata() -> None:
    message = Message(id=1, agent_id="a", owner_id="o", conversation=KEY, sender="s", role=Role.USER, kind="text",
                      content="c", created_at=AT)
    assert message.trust is Trust.GUEST and message.metadata == {}


# --- evolve --------------------------------------------------------------------------------------

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


# --- checkpoints ---------------------------------------------------------------------------------


def message(owner: str, *, trust: Trust = Trust.OPERATOR, kind: str = "text", sender: str = "user",
            metadata: dict[str, object] | None = None) -> Message:
    return Message(id=1, agent_id="a", owner_id=owner, conversation=KEY, sender=sender, role=Role.USER, kind=kind,
                   content="x", metadata=metadata or {}, trust=trust, created_at=AT)


def test_a_checkpoint_is_kind_checkpoint_from_the_compactor() -> None:
    assert is_checkpoint(message("o", kind="checkpoint", sender="compactor"))
    assert not is_checkpoint(message("o", kind="checkpoint", sender="user"))
    assert not is_checkpoint(message("o", kind="text", sender="compactor"))
    assert not is_checkpoint(message("o"))


def test_checkpoint_sources_exactly() -> None:
    sources = checkpoint_sources([message("bob"), message("carol", trust=Trust.GUEST), message("alice")])
    assert sources == CheckpointSources(owner_id="alice", quoted_owners=("bob", "carol"), trust=Trust.GUEST,
                                        owners_known=True)
    own = checkpoint_sources([message("alice"), message("alice")])
    assert own == CheckpointSources(owner_id="alice", quoted_owners=(), trust=Trust.OPERATOR, owners_known=True)
    assert own.metadata() == {"quoted_owners": []}
    nested = checkpoint_sources([message("alice", kind="checkpoint", sender="compactor",
                                         metadata={"quoted_owners": ["dave"]}), message("alice")])
    assert nested.quoted_owners == ("dave",) and nested.owners_known
    # A text message that merely carries the metadata key is not a checkpoint.
    plain = checkpoint_sources([message("alice", metadata={"quoted_owners": ["eve"]})])
    assert plain.quoted_owners == () and plain.owners_known
    unknown = checkpoint_sources([message("alice", kind="checkpoint", sender="compactor"), message("alice")])
    assert not unknown.owners_known and unknown.metadata() == {}
    bad = checkpoint_sources([message("alice", kind="checkpoint", sender="compactor",
                                      metadata={"quoted_owners": ["x", 3]})])
    assert not bad.owners_known and bad.quoted_owners == ()


def test_only_a_checkpoint_of_its_owners_words_alone_is_readable() -> None:
    assert readable_by_its_owner(message("o"))
    assert readable_by_its_owner(message("o", kind="checkpoint", sender="compactor", metadata={"quoted_owners": []}))
    assert not readable_by_its_owner(message("o", kind="checkpoint", sender="compactor",
                                             metadata={"quoted_owners": ["x"]}))
    assert not readable_by_its_owner(message("o", kind="checkpoint", sender="compactor"))


# --- erasure declarations: whose content each event kind carries ----------------------------

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
