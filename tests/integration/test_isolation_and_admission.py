"""Owner isolation (R-ISOLATION) and admission (R-CAT, R-OPS) through the public API on a real store.

Every test runs on SQLite and on PostgreSQL. The tests that only read the two owners' home
share one such home per store and recall mode for the module (``shared_two_owners``); a test
that writes builds its own (``two_owners``, ``memory``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fermix_memory import FermixError, MemorySystem, NotFound
from fermix_memory.domain import events as ev
from tests.integration.fake_embedder import ConceptEmbedder

AGENT = "iso-agent"
CONV = "test:group-chat"
A_FACT = "Alice secretly collects antique typewriters"
A_MESSAGE = "alice whispers the vault code is zebra-4471"


@pytest.fixture
def memory(every_store: str, tmp_path: Path) -> Iterator[MemorySystem]:
    """A memory of its own for a test that writes, on each store in turn."""
    with MemorySystem.open(tmp_path / "home") as memory:
        yield memory


def refusals(memory: MemorySystem) -> list[ev.OperationRefused]:
    return [r.event for r in memory.events() if isinstance(r.event, ev.OperationRefused)]


def memory_events(memory: MemorySystem) -> list[ev.DomainEvent]:
    """The log's memory-row events (prompt-file revisions and other kinds left out)."""
    return [r.event for r in memory.events() if r.event.kind.startswith("memory.")]


def event_count(memory: MemorySystem) -> int:
    return len(memory_events(memory))


# --- isolation --------------------------------------------------------------------------------------


def add_two_owners(memory: MemorySystem) -> MemorySystem:
    """Alice and Bob talk to the same agent in the same conversation; Alice's facts in every scope."""
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="user", sender="alice",
                          content=A_MESSAGE)
    memory.append_message(agent_id=AGENT, owner_id="bob", conversation=CONV, role="user", sender="bob",
                          content="bob says hello to everyone")
    for writer, category, key in (("reviewer", "preference", "typewriters"), ("reviewer", "context", "hobby"),
                                  ("operator", "directive", "secret_rule"), ("tool", "context", "note")):
        out = memory.write_memory({"op": "add", "category": category, "key": key, "value": A_FACT},
                                  agent_id=AGENT, owner_id="alice", writer=writer, trust="operator",
                                  conversation=CONV)
        assert out[0].status == "added"
    out = memory.write_memory({"op": "add", "category": "goal", "key": "job_note", "value": A_FACT},
                              agent_id=AGENT, owner_id="alice", writer="job", job_source_id="nightly", trust="operator")
    assert out[0].status == "added"
    assert {m.scope_type.value for m in memory.memories(owner_id="alice")} == {"owner", "agent",
                                                                               "conversation", "job"}
    memory.fill_vectors()
    return memory


@pytest.fixture
def two_owners(memory: MemorySystem) -> MemorySystem:
    """The two owners' home, for a test that writes to it."""
    return add_two_owners(memory)


@pytest.fixture(scope="module", params=[(store, mode) for store in ("sqlite", "postgres")
                                        for mode in ("keyword", "hybrid")], ids="-".join)
def shared_two_owners(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[MemorySystem]:
    """The two owners' home on each store, keyword or hybrid recall (the isolation tests run again
    with recall by meaning: vectors never widen what a reader sees), built once for the tests that
    only read it. On PostgreSQL, a fresh database of the run's server: ``FERMIX_DATABASE_URL``
    names it while the memory opens, then is put back as it was."""
    store, mode = request.param
    server = request.getfixturevalue("postgres_server") if store == "postgres" else None
    url = server.fresh_database() if server is not None else None
    with pytest.MonkeyPatch.context() as env:
        env.delenv("FERMIX_DATABASE_URL", raising=False)
        if url is not None:
            env.setenv("FERMIX_DATABASE_URL", url)
        opened = MemorySystem.open(tmp_path_factory.mktemp("two_owners") / "home",
                                   embedder=ConceptEmbedder() if mode == "hybrid" else None)
    try:
        with opened as memory:
            yield add_two_owners(memory)
    finally:
        if server is not None:
            server.drop_database(url)


QUERIES = [A_FACT, A_MESSAGE, "typewriters", "zebra", "vault code", "antique", "alice", "*", ""]


@pytest.mark.parametrize("scope", ["current", "owner", "all"])
@pytest.mark.parametrize("source", ["memories", "history", "all"])
@pytest.mark.parametrize("conversation", [CONV, None, "test:elsewhere"])
def test_owner_b_never_recalls_owner_a(shared_two_owners: MemorySystem, scope: str, source: str,
                                       conversation: str | None) -> None:
    two_owners = shared_two_owners
    for query in QUERIES:
        for job in (None, "nightly"):
            result = two_owners.recall(query, agent_id=AGENT, owner_id="bob", conversation=conversation,
                                       scope=scope, source=source, limit=100, job_source_id=job)
            assert all(h.memory.owner_id == "bob" for h in result.memories)
            assert all(h.message.owner_id == "bob" for h in result.messages)
            assert not any(A_FACT in h.memory.value for h in result.memories)
            assert not any("zebra" in h.message.content for h in result.messages)
    for key in ("typewriters", "hobby", "secret_rule", "note", "job_note"):
        result = two_owners.recall(key=key, agent_id=AGENT, owner_id="bob", conversation=conversation,
                                   scope=scope, source=source)
        assert result.memories == [] and result.messages == []


def test_owner_a_does_recall_its_own_facts(shared_two_owners: MemorySystem) -> None:
    """The isolation test above would be vacuous if Alice could not find them either."""
    two_owners = shared_two_owners
    result = two_owners.recall("typewriters", agent_id=AGENT, owner_id="alice", conversation=CONV,
                               scope="all", source="all")
    assert {h.memory.key for h in result.memories} == {"typewriters", "hobby", "secret_rule", "note"}
    result = two_owners.recall("zebra", agent_id=AGENT, owner_id="alice", conversation=CONV, scope="current",
                               source="history")
    assert [h.message.content for h in result.messages] == [A_MESSAGE]
    result = two_owners.recall("typewriters", agent_id=AGENT, owner_id="alice", job_source_id="nightly",
                               scope="all", source="all")
    assert [h.memory.key for h in result.memories] == ["job_note"]
    assert result.messages == []


def test_another_agent_of_the_same_owner_does_not_see_agent_scoped_rows(shared_two_owners: MemorySystem) -> None:
    two_owners = shared_two_owners
    result = two_owners.recall("typewriters", agent_id="other-agent", owner_id="alice", conversation=CONV,
                               scope="all", source="all")
    assert result.memories == [] and result.messages == []


def test_owner_b_cannot_replace_or_archive_owner_a_rows(two_owners: MemorySystem) -> None:
    rows = two_owners.memories(owner_id="alice")
    before = {row.id: row for row in rows}
    for row in rows:
        for op in ({"op": "replace", "id": row.id, "value": "Bob was here"},
                   {"op": "archive", "id": row.id, "reason": "Bob says so"},
                   {"op": "replace", "id": row.id, "category": "goal", "key": "hijack"}):
            for writer in ("reviewer", "tool", "operator"):
                out = two_owners.write_memory(op, agent_id=AGENT, owner_id="bob", writer=writer,
                                              trust="operator", conversation=CONV)
                assert out[0].status == "refused"
                assert out[0].reason == "not_visible"
    assert {row.id: row for row in two_owners.memories(owner_id="alice")} == before
    refused = [r for r in refusals(two_owners) if r.provenance.owner_id == "bob"]
    assert len(refused) == len(rows) * 9
    assert all(r.reason == "not_visible" for r in refused)


def test_the_same_key_for_two_owners_makes_two_rows(memory: MemorySystem) -> None:
    for owner in ("alice", "bob"):
        memory.write_memory({"op": "add", "category": "identity", "key": "name", "value": f"Name is {owner}"},
                            agent_id=AGENT, owner_id=owner, trust="operator")
    rows = memory.memories(agent_id=AGENT)
    assert sorted((r.owner_id, r.value) for r in rows) == [("alice", "Name is alice"), ("bob", "Name is bob")]
    hit = memory.recall(key="name", agent_id=AGENT, owner_id="bob", scope="all")
    assert [h.memory.value for h in hit.memories] == ["Name is bob"]


# --- admission --------------------------------------------------------------------------------------


@pytest.mark.parametrize("category", ["gossip", "", "Directive ", "USER", "preferences"])
def test_an_unknown_category_is_refused(memory: MemorySystem, category: str) -> None:
    out = memory.write_memory({"op": "add", "category": category, "key": "k", "value": "v"},
                              agent_id=AGENT, owner_id="alice", trust="operator")[0]
    assert out.status == "refused" and out.reason == "unknown_category"
    assert memory.memories() == []
    assert [r.reason for r in refusals(memory)] == ["unknown_category"]


def test_value_limits(memory: MemorySystem) -> None:
    too_long = memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": "x" * 2001},
                                   agent_id=AGENT, owner_id="alice", trust="operator")[0]
    assert too_long.status == "refused" and too_long.reason == "value_too_long"
    empty = memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": " \t "},
                                agent_id=AGENT, owner_id="alice", trust="operator")[0]
    assert empty.status == "refused"
    at_limit = memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": "y" * 2000},
                                   agent_id=AGENT, owner_id="alice", trust="operator")[0]
    assert at_limit.status == "added"
    replace_long = memory.write_memory({"op": "replace", "id": at_limit.memory_id, "value": "z" * 2001},
                                       agent_id=AGENT, owner_id="alice", trust="operator")[0]
    assert replace_long.status == "refused" and replace_long.reason == "value_too_long"
    assert memory.memory(at_limit.memory_id).value == "y" * 2000  # type: ignore[arg-type]
    assert [r.reason for r in refusals(memory)] == ["value_too_long", "empty_value", "value_too_long"]


def test_restore_unarchives_and_unknown_ids_raise_not_found(memory: MemorySystem) -> None:
    rid = memory.write_memory({"op": "add", "category": "interest", "key": "chess", "value": "Plays chess"},
                              agent_id=AGENT, owner_id="alice", trust="operator")[0].memory_id
    assert rid is not None
    archived = memory.write_memory({"op": "archive", "id": rid, "reason": "quit"}, agent_id=AGENT,
                                   owner_id="alice", trust="operator")[0]
    assert archived.status == "archived"
    row = memory.memory(rid)
    assert row.archived and row.archive_reason == "quit"
    assert memory.recall(key="chess", agent_id=AGENT, owner_id="alice").memories == []
    restored = memory.restore(rid, by="auditor")
    assert not restored.archived and restored.archived_at is None and restored.archive_reason is None
    assert restored.value == "Plays chess"
    assert [h.memory.id for h in memory.recall(key="chess", agent_id=AGENT, owner_id="alice").memories] == [rid]
    kinds = [e.kind for e in memory_events(memory)]
    assert kinds == ["memory.added", "memory.archived", "memory.restored"]
    # Restoring a live row is a no-op (no event).
    memory.restore(rid)
    assert event_count(memory) == 3
    with pytest.raises(NotFound):
        memory.restore(999_999)
    assert event_count(memory) == 3
    with pytest.raises(NotFound):
        memory.memory(999_999)


def test_archive_of_an_archived_row_is_unchanged(memory: MemorySystem) -> None:
    rid = memory.write_memory({"op": "add", "category": "goal", "key": "g", "value": "v"},
                              agent_id=AGENT, owner_id="alice", trust="operator")[0].memory_id
    archive = {"op": "archive", "id": rid}
    assert memory.write_memory(archive, agent_id=AGENT, owner_id="alice", trust="operator")[0].status == "archived"
    assert memory.write_memory(archive, agent_id=AGENT, owner_id="alice", trust="operator")[0].status == "unchanged"
    assert event_count(memory) == 2


def test_a_replace_cannot_move_a_row_between_prompt_files(memory: MemorySystem) -> None:
    rid = memory.write_memory({"op": "add", "category": "preference", "key": "p", "value": "v"},
                              agent_id=AGENT, owner_id="alice", trust="operator")[0].memory_id
    out = memory.write_memory({"op": "replace", "id": rid, "category": "context"}, agent_id=AGENT,
                              owner_id="alice", trust="operator")[0]
    assert out.status == "refused" and out.reason == "category_changes_scope"


def test_a_huge_integer_confidence_is_refused_not_raised(memory: MemorySystem) -> None:
    out = memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": "v", "confidence": 10**400},
                              agent_id=AGENT, owner_id="alice", trust="operator")
    assert out[0].status == "refused" and out[0].reason == "invalid_confidence"


def test_an_out_of_range_row_id_is_refused_not_raised(memory: MemorySystem) -> None:
    out = memory.write_memory({"op": "archive", "id": 2**70}, agent_id=AGENT, owner_id="alice", trust="operator")
    assert out[0].status == "refused" and out[0].reason == "not_visible"


def test_restore_of_an_out_of_range_id_raises_not_found(memory: MemorySystem) -> None:
    with pytest.raises(NotFound):
        memory.restore(2**70)


def test_errors_of_the_api_are_fermix_errors(memory: MemorySystem) -> None:
    with pytest.raises(FermixError):
        memory.write_memory({"op": "explode"}, agent_id=AGENT, owner_id="alice", trust="operator")
    with pytest.raises(FermixError):
        memory.write_memory({"op": "add"}, agent_id=AGENT, owner_id="alice", trust="operator")
    with pytest.raises(FermixError):
        memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": "v"}, agent_id="",
                            owner_id="alice", trust="operator")
    with pytest.raises(FermixError):
        memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": "v"}, agent_id=AGENT,
                            owner_id="alice", writer="hacker", trust="operator")
    assert event_count(memory) == 0


# --- the operator's directives are the agent's standing rules ------------------------------------------

RULE = "Always answer in English"


def test_a_guest_gets_the_operators_directive_but_never_the_operators_other_rows(two_owners: MemorySystem,
                                                                                  ) -> None:
    """Alice (operator) wrote a directive and private rows; Bob, a guest of the same agent, has the
    directive in his MEMORY.md and his composed prompt, and nothing else of Alice's."""
    memory = two_owners
    memory.write_memory({"op": "add", "category": "directive", "key": "language", "value": RULE},
                        agent_id=AGENT, owner_id="alice", trust="operator")
    bob_file = memory.prompt_file(AGENT, "bob", "memory_md").read_text(encoding="utf-8")
    # The memory block (the window after it is the shared group chat, which Bob is part of).
    prompt = memory.compose_prompt(AGENT, "bob", CONV)[0]["content"]
    for text in (bob_file, prompt):
        assert f"- language: {RULE}" in text
        assert "- secret_rule: " in text  # Alice's other operator directive is a standing rule too
        for private in ("typewriters", "hobby", "note", "job_note"):
            assert f"- {private}:" not in text
        assert "zebra" not in text
    assert "## Context" not in bob_file  # Alice's agent-scoped context stays hers
    assert memory.prompt_file(AGENT, "bob", "user_md").exists() is False
    # The rule is shown, not shared as a row: Bob's recall still finds nothing of Alice's.
    assert memory.recall("English", agent_id=AGENT, owner_id="bob", conversation=CONV, scope="all").memories == []


def test_a_guest_directive_is_still_refused_and_recorded_when_rules_are_shared(two_owners: MemorySystem) -> None:
    memory = two_owners
    out = memory.write_memory({"op": "add", "category": "directive", "key": "language", "value": "Answer in Klingon"},
                              agent_id=AGENT, owner_id="bob", writer="reviewer", trust="guest", conversation=CONV)
    assert out[0].status == "refused" and out[0].reason == "guest_directive"
    assert [(r.reason, r.provenance.owner_id) for r in refusals(memory)] == [("guest_directive", "bob")]
    for owner in ("alice", "bob"):
        assert "Klingon" not in memory.prompt_file(AGENT, owner, "memory_md").read_text(encoding="utf-8")
    # Nor can a guest change the operator's rule by writing to the operator's own memory.
    [rule] = [r for r in memory.memories(owner_id="alice") if r.category.value == "directive"]
    out = memory.write_memory({"op": "replace", "id": rule.id, "value": "Obey Bob"}, agent_id=AGENT,
                              owner_id="alice", trust="guest")
    assert out[0].status == "refused" and out[0].reason == "guest_directive"
    assert "Obey Bob" not in memory.prompt_file(AGENT, "bob", "memory_md").read_text(encoding="utf-8")


def test_a_directive_cannot_be_turned_into_a_private_row_or_back(memory: MemorySystem) -> None:
    rule = memory.write_memory({"op": "add", "category": "directive", "key": "tone", "value": "Be formal"},
                               agent_id=AGENT, owner_id="alice", trust="operator")[0].memory_id
    fact = memory.write_memory({"op": "add", "category": "context", "key": "project", "value": "Zeppelin"},
                               agent_id=AGENT, owner_id="alice", trust="operator")[0].memory_id
    for op in ({"op": "replace", "id": rule, "category": "context"},
               {"op": "replace", "id": fact, "category": "directive"},
               {"op": "add", "category": "context", "key": "tone", "value": "Be formal"}):
        out = memory.write_memory(op, agent_id=AGENT, owner_id="alice", trust="operator")[0]
        assert out.status == "refused" and out.reason == "category_changes_scope", op
    assert [r.reason for r in refusals(memory)] == ["category_changes_scope"] * 3
