"""The typed state loaders of ``WriteTransaction``: each one after the events that change it,
as of the transaction (its own appends included)."""

from __future__ import annotations

from typing import Any

from fermix_memory.application.store_ports import ReviewState
from fermix_memory.domain import events as ev
from fermix_memory.domain import resources, review_gate
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Role, Scope, ScopeType
from tests.contract.conftest import (
    AT,
    CHAT,
    Ports,
    added,
    archived,
    at,
    forgotten,
    message,
    replaced,
    restored,
    review_key,
    revised,
    rolled_back,
)

# --- memory rows ----------------------------------------------------------------------------


def test_by_id_follows_a_row_through_replace_archive_and_restore(ports: Ports) -> None:
    [row_id] = ports.append("memory/ada/alice", added())
    row = ports.load("by_id", row_id)
    assert (row.id, row.key, row.value, row.archived, row.created_at) == (row_id, "home", "Lives in Paris", False, AT)
    ports.append("memory/ada/alice", replaced(row_id, "Lives in Berlin"))
    row = ports.load("by_id", row_id)
    assert (row.value, row.confidence, row.updated_at) == ("Lives in Berlin", 0.9, at(1))
    ports.append("memory/ada/alice", archived(row_id))
    row = ports.load("by_id", row_id)
    assert row.archived and row.archived_by == "test" and row.archive_reason == "gone"
    ports.append("memory/ada/alice", restored(row_id))
    row = ports.load("by_id", row_id)
    assert not row.archived and row.updated_at == at(3) and row.value == "Lives in Berlin"
    assert ports.load("by_id", 999) is None


def test_by_key_finds_a_row_in_its_scope_only(ports: Ports) -> None:
    [row_id] = ports.append("memory/ada/alice", added())
    assert ports.load("by_key", "ada", "alice", Scope.owner("alice"), "home").id == row_id
    assert ports.load("by_key", "ada", "alice", Scope.agent("ada"), "home") is None
    assert ports.load("by_key", "ada", "bob", Scope.owner("alice"), "home") is None
    assert ports.load("by_key", "eve", "alice", Scope.owner("alice"), "home") is None
    ports.append("memory/ada/alice", archived(row_id))
    assert ports.load("by_key", "ada", "alice", Scope.owner("alice"), "home").archived  # archived rows too


def test_memories_of_lists_live_rows_of_one_agent_and_owner_by_id(ports: Ports) -> None:
    first, second, third = ports.append("memory/ada/alice", added("b"), added("a"), added("c"))
    ports.append("memory/ada/bob", added("x", owner="bob"))
    ports.append("memory/eve/alice", added("y", agent="eve"))
    ports.append("memory/ada/alice", archived(second))
    assert [r.id for r in ports.load("memories_of", "ada", "alice")] == [first, third]
    assert [r.key for r in ports.load("memories_of", "ada", "bob")] == ["x"]
    assert ports.load("memories_of", "ada", "carol") == []


def test_agent_rules_are_live_agent_scoped_directives_for_memory_md_of_every_owner(ports: Ports) -> None:
    agent_scope = (ScopeType.AGENT, "ada")
    rule = dict(scope=agent_scope, category=Category.DIRECTIVE, target=PromoteTarget.MEMORY_MD)
    ids = ports.append("memory/ada/alice",
              added("be-brief", **rule),  # type: ignore[arg-type]
              added("context", scope=agent_scope, category=Category.CONTEXT, target=PromoteTarget.MEMORY_MD),
              added("own", category=Category.DIRECTIVE, target=PromoteTarget.MEMORY_MD),
              added("old-rule", **rule))  # type: ignore[arg-type]
    [bobs] = ports.append("memory/ada/bob", added("no-emoji", owner="bob", **rule))  # type: ignore[arg-type]
    ports.append("memory/eve/alice", added("elsewhere", agent="eve", scope=(ScopeType.AGENT, "eve"),
                                         category=Category.DIRECTIVE, target=PromoteTarget.MEMORY_MD))
    ports.append("memory/ada/alice", archived(ids[3]))
    assert [r.id for r in ports.load("agent_rules", "ada")] == [ids[0], bobs]


def test_agent_owners_are_the_owners_with_messages_rows_or_prompt_files(ports: Ports) -> None:
    assert ports.load("agent_owners", "ada") == []
    ports.append("conversation/x", message(owner="carol"))
    ports.append("memory/ada/alice", added())
    ports.append("resource/ada/bob", revised(1, "# bob", owner="bob"))
    ports.append("conversation/y", message(agent="eve", owner="dave"))
    assert ports.load("agent_owners", "ada") == ["alice", "bob", "carol"]
    assert ports.load("agent_owners", "eve") == ["dave"]


# --- resources ------------------------------------------------------------------------------


def test_current_resource_follows_revisions_and_rollbacks(ports: Ports) -> None:
    assert ports.load("current_resource", "ada", "alice", "user_md") is None
    ports.append("resource/ada/alice/user_md", revised(1, "# one"))
    ports.append("resource/ada/alice/user_md", revised(2, "# two"))
    assert ports.load("current_resource", "ada", "alice", "user_md") == (2, "# two")
    ports.append("resource/ada/alice/user_md", rolled_back(1, 3, "# one"))
    assert ports.load("current_resource", "ada", "alice", "user_md") == (3, "# one")
    assert ports.load("current_resource", "ada", "alice", "memory_md") is None
    assert ports.load("current_resource", "ada", "bob", "user_md") is None


def test_current_resource_sees_a_revision_of_the_same_transaction(ports: Ports) -> None:
    def work(tx: Any) -> Any:
        tx.append("resource/ada/alice/user_md", [revised(1, "# new")])
        return tx.current_resource("ada", "alice", "user_md")

    assert ports.write(work) == (1, "# new")


# --- reviews --------------------------------------------------------------------------------


def test_review_state_through_claim_skip_fail_and_completion(ports: Ports) -> None:
    stream, key = "review/ada/alice/x", review_key()
    assert ports.load("review_state", "ada", "alice", CHAT) == ReviewState()
    ports.append(stream, ev.ReviewClaimed(at=AT, claim_id="c1", holder="host:1", expires_at=at(60), **key))
    state = ports.load("review_state", "ada", "alice", CHAT)
    assert (state.claim_id, state.claim_expires_at, state.reviewed_up_to_id) == ("c1", at(60), 0)
    ports.append(stream, ev.ReviewFailed(at=at(1), claim_id="c1", error="timeout", retry_after=at(120), **key))
    state = ports.load("review_state", "ada", "alice", CHAT)
    assert (state.claim_id, state.claim_expires_at, state.retry_after) == (None, None, at(120))
    ports.append(stream, ev.ReviewSkipped(at=at(2), reason="too_soon", **key))
    assert ports.load("review_state", "ada", "alice", CHAT).last_skip_reason == "too_soon"
    ports.append(stream, ev.ReviewClaimed(at=at(3), claim_id="c2", holder="host:1", expires_at=at(90), **key))
    assert ports.load("review_state", "ada", "alice", CHAT).last_skip_reason is None
    ports.append(stream, ev.ReviewCompleted(at=at(4), claim_id="c2", reviewed_up_to_message_id=7,
                                          messages_reviewed=3, applied=1, refused=0, **key))
    assert ports.load("review_state", "ada", "alice", CHAT) == ReviewState(
        reviewed_up_to_id=7, last_review_at=at(4), retry_after=None, claim_id=None, claim_expires_at=None,
        last_skip_reason=None)
    assert ports.load("review_state", "ada", "bob", CHAT) == ReviewState()
    assert ports.load("review_state", "ada", "alice", ConversationKey("telegram", "43")) == ReviewState()


# --- messages -------------------------------------------------------------------------------


def test_last_message_ids_per_conversation_and_per_user(ports: Ports) -> None:
    other = ConversationKey("telegram", "42", "thread-1")
    assert ports.load("last_message_id", "ada", CHAT) == 0
    first, reply = ports.append("conversation/a", message("hi"), message("hello", role=Role.ASSISTANT))
    [bobs] = ports.append("conversation/a", message("me too", owner="bob"))
    [threaded] = ports.append("conversation/b", message("elsewhere", conversation=other))
    ports.append("conversation/c", message("other agent", agent="eve"))
    assert ports.load("last_message_id", "ada", CHAT) == bobs
    assert ports.load("last_message_id", "ada", other) == threaded
    assert ports.load("last_user_message_id", "ada", "alice", CHAT) == first
    assert ports.load("last_user_message_id", "ada", "bob", CHAT) == bobs
    assert ports.load("last_user_message_id", "ada", "carol", CHAT) == 0
    assert reply > first


def test_a_retracted_message_is_no_longer_the_last_one(ports: Ports) -> None:
    first, reply = ports.append("conversation/a", message("hi"), message("hello", role=Role.ASSISTANT))
    who = ev.Provenance(agent_id="ada", owner_id="alice")
    ports.append("conversation/a", ev.MessageRetracted(at=AT, agent_id="ada", owner_id="alice", conversation=CHAT,
                                                       message_id=reply, provenance=who))
    assert ports.load("last_message_id", "ada", CHAT) == first
    ports.append("conversation/a", ev.MessageRetracted(at=AT, agent_id="ada", owner_id="alice", conversation=CHAT,
                                                       message_id=first, provenance=who))
    assert ports.load("last_user_message_id", "ada", "alice", CHAT) == 0


def test_loaders_forget_an_owner_after_owner_forgotten(ports: Ports) -> None:
    [msg] = ports.append("conversation/a", message("secret"))
    [row] = ports.append("memory/ada/alice", added())
    ports.append("resource/ada/alice/user_md", revised(1, "# alice"))
    claim = ev.ReviewClaimed(at=AT, claim_id="c", holder="h", expires_at=at(9), **review_key())
    ports.append("review/ada/alice/x", claim)
    [bobs] = ports.append("conversation/a", message("bob stays", owner="bob"))
    ports.append("owner/ada/alice", forgotten((msg, row)))
    assert ports.load("by_id", row) is None and ports.load("memories_of", "ada", "alice") == []
    assert ports.load("current_resource", "ada", "alice", "user_md") is None
    assert ports.load("review_state", "ada", "alice", CHAT) == ReviewState()
    assert ports.load("last_user_message_id", "ada", "alice", CHAT) == 0
    assert ports.load("last_message_id", "ada", CHAT) == bobs
    assert ports.load("agent_owners", "ada") == ["bob"]


def test_loaders_answer_as_of_the_transaction(ports: Ports) -> None:
    def work(tx: Any) -> tuple[Any, ...]:
        [row] = tx.append("memory/ada/alice", [added()])
        tx.append("conversation/a", [message("hi")])
        return (tx.by_id(row).value, [r.key for r in tx.memories_of("ada", "alice")], tx.agent_owners("ada"),
                tx.last_message_id("ada", CHAT))

    assert ports.write(work) == ("Lives in Paris", ["home"], ["alice"], 2)


# --- loaders agree with the domain's evolve -------------------------------------------------


def test_agent_rules_follow_archive_and_restore_of_a_rule(ports: Ports) -> None:
    rule: dict[str, Any] = dict(scope=(ScopeType.AGENT, "ada"), category=Category.DIRECTIVE,
                                target=PromoteTarget.MEMORY_MD)
    [first] = ports.append("memory/ada/alice", added("be-brief", **rule))
    ports.append("memory/ada/alice", archived(first))
    assert ports.load("agent_rules", "ada") == []
    ports.append("memory/ada/alice", restored(first))
    assert [r.id for r in ports.load("agent_rules", "ada")] == [first]
    assert ports.load("agent_rules", "eve") == []


def test_agent_owners_keep_an_owner_whose_rows_are_all_archived(ports: Ports) -> None:
    [row] = ports.append("memory/ada/alice", added())
    ports.append("memory/ada/alice", archived(row))
    assert ports.load("agent_owners", "ada") == ["alice"]


def test_current_resource_is_the_domains_fold_of_the_resource_stream(ports: Ports) -> None:
    stream = "resource/ada/alice/memory_md"
    events = [revised(1, "# a", name="memory_md"), revised(2, "# b", name="memory_md"),
              rolled_back(1, 3, "# a", name="memory_md"), revised(4, "", name="memory_md")]
    state = resources.NEVER_RECORDED
    for event in events:
        ports.append(stream, event)
        state = resources.evolve(state, event)
        assert ports.load("current_resource", "ada", "alice", "memory_md") == (state.revision, state.content)
    assert ports.load("current_resource", "ada", "alice", "memory_md") == (4, "")


def test_review_state_loads_the_whole_domain_state_claim_holder_and_last_error_included(ports: Ports) -> None:
    stream, key = "review/ada/alice/x", review_key()
    events: list[ev.DomainEvent] = [
        ev.ReviewClaimed(at=AT, claim_id="c1", holder="host:1", expires_at=at(60), **key),
        ev.ReviewFailed(at=at(1), claim_id="c1", error="x" * 900, retry_after=at(30), **key),
        ev.ReviewClaimed(at=at(31), claim_id="c2", holder="host:2", expires_at=at(40), **key),
        ev.ReviewClaimed(at=at(41), claim_id="c3", holder="host:3", expires_at=at(99), **key),  # c2 expired
        ev.ReviewSkipped(at=at(50), reason="claim_lost", **key),
        ev.ReviewCompleted(at=at(60), claim_id="c3", reviewed_up_to_message_id=12, messages_reviewed=4,
                           applied=2, refused=1, **key),
    ]
    state = review_gate.ReviewGateState()
    for event in events:
        ports.append(stream, event)
        state = review_gate.evolve(state, event)
        assert ports.load("review_state", "ada", "alice", CHAT) == state
    failed = review_gate.evolve(review_gate.evolve(review_gate.ReviewGateState(), events[0]), events[1])
    assert failed.last_error == "x" * review_gate.MAX_STORED_ERROR_CHARS and failed.claim_holder is None
    assert state.reviewed_up_to_id == 12 and state.claim_id is None and state.last_error is None
