"""Scope resolution (R-SCOPE, R-ISOLATION) and the conversation key encoding: pure, no I/O; what
each reader DOES see, not only what it must not, and where each writer's rows go."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fermix_memory.domain.errors import InvalidConversationKey, InvalidIdentifier
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.scopes import (
    HistoryFilter,
    MemoryFilter,
    Reader,
    RecallScope,
    WriterKind,
    erases_on_request,
    history_filter,
    is_agent_rule,
    memory_filter,
    write_scope,
)
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Scope, ScopeType, Trust

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# Identifiers as the domain accepts them: 1..256 characters, no control characters (C0, DEL, C1,
# line and paragraph separators).
ident = st.text(st.characters(blacklist_categories=("Cs",),
                              blacklist_characters=[chr(c) for c in (*range(32), *range(0x7F, 0xA0))]
                              + ["\u2028", "\u2029"]), min_size=1, max_size=40)
small_ids = st.sampled_from(["a", "b", "alice", "bob", "x:y", "p%3A", "\u00e9", "\U0001f600"])
threads = st.one_of(st.just(""), ident)
conversation_keys = st.builds(ConversationKey, ident, ident, threads)
small_keys = st.builds(ConversationKey, small_ids, small_ids, st.sampled_from(["", "t", "t:1", "%"]))


def row(agent_id: str, owner_id: str, scope_type: ScopeType, scope_id: str, memory_id: int = 1) -> Memory:
    return Memory(id=memory_id, agent_id=agent_id, owner_id=owner_id, scope_type=scope_type, scope_id=scope_id,
                  category=Category.CONTEXT, key="k", value="v", created_at=T0, updated_at=T0)


readers = st.builds(
    Reader,
    agent_id=small_ids,
    owner_id=small_ids,
    conversation=st.one_of(st.none(), small_keys),
    job_source_id=st.one_of(st.none(), small_ids),
)


@st.composite
def rows(draw: st.DrawFn) -> Memory:
    stype = draw(st.sampled_from(list(ScopeType)))
    sid = draw(small_keys).scope_id if stype is ScopeType.CONVERSATION else draw(small_ids)
    return row(draw(small_ids), draw(small_ids), stype, sid)


# --- the write scope mapping ------------------------------------------------------------------------


READER = Reader(agent_id="ada", owner_id="alice", conversation=ConversationKey("telegram", "42", "t"))


@pytest.mark.parametrize("category", [Category.IDENTITY, Category.PREFERENCE, Category.INTEREST, Category.GOAL])
@pytest.mark.parametrize("writer", [WriterKind.REVIEWER, WriterKind.OPERATOR])
def test_profile_categories_go_to_the_owner_scope(category: Category, writer: WriterKind) -> None:
    assert write_scope(writer, category, READER) == Scope(ScopeType.OWNER, "alice")


@pytest.mark.parametrize("category", [Category.CONTEXT, Category.DIRECTIVE])
@pytest.mark.parametrize("writer", [WriterKind.REVIEWER, WriterKind.OPERATOR])
def test_work_categories_go_to_the_agent_scope(category: Category, writer: WriterKind) -> None:
    assert write_scope(writer, category, READER) == Scope(ScopeType.AGENT, "ada")


@pytest.mark.parametrize("category", list(Category))
def test_the_memory_store_tool_writes_to_the_conversation_scope(category: Category) -> None:
    assert write_scope(WriterKind.TOOL, category, READER) == Scope(ScopeType.CONVERSATION,
                                                                   READER.conversation.scope_id)  # type: ignore[union-attr]
    no_conversation = Reader(agent_id="ada", owner_id="alice")
    assert write_scope(WriterKind.TOOL, category, no_conversation) is None


@pytest.mark.parametrize("category", list(Category))
@pytest.mark.parametrize("writer", list(WriterKind))
def test_a_job_run_writes_to_its_job_scope(category: Category, writer: WriterKind) -> None:
    job_reader = Reader(agent_id="ada", owner_id="alice", conversation=READER.conversation, job_source_id="nightly")
    assert write_scope(writer, category, job_reader) == Scope(ScopeType.JOB, "nightly")
    # A job writer outside a job run has nowhere to write.
    assert write_scope(WriterKind.JOB, category, READER) is None


@given(writer=st.sampled_from(list(WriterKind)), category=st.sampled_from(list(Category)), reader=readers)
def test_a_written_row_is_visible_to_its_writer(writer: WriterKind, category: Category, reader: Reader) -> None:
    scope = write_scope(writer, category, reader)
    assume(scope is not None)
    assert scope is not None
    written = row(reader.agent_id, reader.owner_id, scope.type, scope.id)
    assert memory_filter(reader, RecallScope.ALL).admits(written)
    assert memory_filter(reader, RecallScope.CURRENT).admits(written)


# --- what a reader sees ---------------------------------------------------------------------------------


@settings(max_examples=150)
@given(reader=readers, scope=st.sampled_from(list(RecallScope)), candidate=rows())
def test_a_filter_never_admits_another_owners_or_agents_row(reader: Reader, scope: RecallScope,
                                                            candidate: Memory) -> None:
    where = memory_filter(reader, scope)
    assert where.agent_id == reader.agent_id and where.owner_id == reader.owner_id
    if where.admits(candidate):
        assert candidate.owner_id == reader.owner_id
        assert candidate.agent_id == reader.agent_id


@settings(max_examples=150)
@given(reader=readers, scope=st.sampled_from(list(RecallScope)), candidate=rows())
def test_a_job_reader_only_sees_its_own_job_rows(reader: Reader, scope: RecallScope, candidate: Memory) -> None:
    assume(reader.job_source_id is not None)
    where = memory_filter(reader, scope)
    if where.admits(candidate):
        assert candidate.scope_type is ScopeType.JOB
        assert candidate.scope_id == reader.job_source_id
    assert where.admits(row(reader.agent_id, reader.owner_id, ScopeType.JOB, reader.job_source_id or ""))
    assert history_filter(reader, scope) is None


@given(reader=readers, scope=st.sampled_from(list(RecallScope)), candidate=rows())
def test_a_conversation_reader_never_sees_job_rows(reader: Reader, scope: RecallScope, candidate: Memory) -> None:
    assume(reader.job_source_id is None)
    if memory_filter(reader, scope).admits(candidate):
        assert candidate.scope_type is not ScopeType.JOB


def test_what_each_recall_scope_admits() -> None:
    conv = READER.conversation
    assert conv is not None
    other_conv = ConversationKey("telegram", "43")
    owner_row = row("ada", "alice", ScopeType.OWNER, "alice")
    agent_row = row("ada", "alice", ScopeType.AGENT, "ada")
    this_conv = row("ada", "alice", ScopeType.CONVERSATION, conv.scope_id)
    that_conv = row("ada", "alice", ScopeType.CONVERSATION, other_conv.scope_id)
    job_row = row("ada", "alice", ScopeType.JOB, "nightly")
    foreign_owner_scope = row("ada", "alice", ScopeType.OWNER, "bob")  # a malformed row: still not alice's
    cases = {
        RecallScope.OWNER: {owner_row},
        RecallScope.CURRENT: {owner_row, agent_row, this_conv},
        RecallScope.ALL: {owner_row, agent_row, this_conv, that_conv},
    }
    everything = [owner_row, agent_row, this_conv, that_conv, job_row, foreign_owner_scope]
    for scope, expected in cases.items():
        admitted = {id(r) for r in everything if memory_filter(READER, scope).admits(r)}
        assert admitted == {id(r) for r in expected}, scope
    no_conv = Reader(agent_id="ada", owner_id="alice")
    assert not memory_filter(no_conv, RecallScope.CURRENT).admits(this_conv)
    assert memory_filter(no_conv, RecallScope.CURRENT).admits(agent_row)


def test_history_filters_are_pinned_to_the_owner() -> None:
    assert history_filter(READER, RecallScope.CURRENT) == HistoryFilter(agent_id="ada", owner_id="alice",
                                                                        conversation=READER.conversation)
    for scope in (RecallScope.OWNER, RecallScope.ALL):
        assert history_filter(READER, scope) == HistoryFilter(agent_id="ada", owner_id="alice")
    assert history_filter(Reader(agent_id="ada", owner_id="alice"), RecallScope.CURRENT) == HistoryFilter(
        agent_id="ada", owner_id="alice")


def test_an_empty_filter_admits_nothing() -> None:
    where = MemoryFilter(agent_id="ada", owner_id="alice", scopes=())
    assert not where.admits(row("ada", "alice", ScopeType.OWNER, "alice"))


# --- the conversation key encoding -------------------------------------------------------------------------


@settings(max_examples=200)
@given(a=conversation_keys, b=conversation_keys)
def test_distinct_keys_have_distinct_scope_ids(a: ConversationKey, b: ConversationKey) -> None:
    if a != b:
        assert a.scope_id != b.scope_id
    else:
        assert a.scope_id == b.scope_id


@settings(max_examples=300)
@given(a=small_keys, b=small_keys)
def test_distinct_small_keys_have_distinct_scope_ids(a: ConversationKey, b: ConversationKey) -> None:
    """Same as above on a small alphabet full of ':' and '%', where collisions would show."""
    assert (a == b) == (a.scope_id == b.scope_id)


@settings(max_examples=200)
@given(key=conversation_keys)
def test_from_scope_id_inverts_scope_id(key: ConversationKey) -> None:
    assert ConversationKey.from_scope_id(key.scope_id) == key
    assert key.scope_id.count(":") == 2


@pytest.mark.parametrize("key", [
    ConversationKey("a:b", "c"), ConversationKey("a", "b:c"), ConversationKey("a", "b", "c:d"),
    ConversationKey("a%3Ab", "c"), ConversationKey("%", "%25", "%%"), ConversationKey("a", "b", ""),
])
def test_colons_and_percents_are_escaped(key: ConversationKey) -> None:
    assert ConversationKey.from_scope_id(key.scope_id) == key


def test_known_collision_candidates_stay_apart() -> None:
    pairs = [
        (ConversationKey("a:b", "c"), ConversationKey("a", "b:c")),
        (ConversationKey("a", "b:c"), ConversationKey("a", "b", "c")),
        (ConversationKey("a%3Ab", "c"), ConversationKey("a:b", "c")),
        (ConversationKey("a", "b", ""), ConversationKey("a", "b", "%")),
    ]
    for x, y in pairs:
        assert x.scope_id != y.scope_id


@settings(max_examples=200)
@given(channel=ident.filter(lambda s: ":" not in s), chat_id=ident.filter(lambda s: ":" not in s),
       thread=threads)
def test_parse_round_trips_the_printed_key(channel: str, chat_id: str, thread: str) -> None:
    key = ConversationKey(channel, chat_id, thread)
    assert ConversationKey.parse(str(key)) == key


@pytest.mark.parametrize("text", ["", "telegram", "telegram:", ":42", ":", "::", "a\x00:b"])
def test_parse_refuses_malformed_spellings(text: str) -> None:
    with pytest.raises(InvalidConversationKey):
        ConversationKey.parse(text)


@pytest.mark.parametrize("bad", ["x:y", "x:y:z:w", "", "::", "a::"])
def test_from_scope_id_refuses_what_is_not_a_scope_id(bad: str) -> None:
    with pytest.raises((InvalidConversationKey, InvalidIdentifier)):
        ConversationKey.from_scope_id(bad)


def test_a_key_that_can_be_built_has_a_scope_id() -> None:
    try:
        key = ConversationKey("telegram", "half \ud83d")
    except InvalidConversationKey:
        return  # refusing it up front is fine too
    assert ConversationKey.from_scope_id(key.scope_id) == key


def test_every_valid_conversation_key_makes_a_valid_scope() -> None:
    key = ConversationKey("telegram", "\U0001f600" * 256)
    assert Scope.conversation(key).id == key.scope_id


def test_a_request_erases_the_owners_own_fact_and_an_operators_and_archives_the_rest() -> None:
    here = ConversationKey("tg", "1")
    alice = Reader(agent_id="ada", owner_id="alice", conversation=here)
    profile, note = row("ada", "alice", ScopeType.OWNER, "alice"), row("ada", "alice", ScopeType.CONVERSATION,
                                                                        here.scope_id)
    working, other_note = row("ada", "alice", ScopeType.AGENT, "ada"), row(
        "ada", "alice", ScopeType.CONVERSATION, ConversationKey("tg", "2").scope_id)
    assert erases_on_request(profile, alice, Trust.GUEST) and erases_on_request(note, alice, Trust.GUEST)
    assert not erases_on_request(working, alice, Trust.GUEST) and not erases_on_request(other_note, alice, Trust.GUEST)
    assert all(erases_on_request(r, alice, Trust.OPERATOR) for r in (profile, note, working, other_note))
    for reader in (Reader(agent_id="ada", owner_id="bob", conversation=here),  # not the owner
                   Reader(agent_id="max", owner_id="alice", conversation=here),  # another agent's
                   Reader(agent_id="ada", owner_id="alice", job_source_id="job:j")):  # a job run
        for trust in Trust:
            assert not erases_on_request(profile, reader, trust), (reader, trust)
    assert not erases_on_request(note, Reader(agent_id="ada", owner_id="alice"), Trust.GUEST)  # no conversation


CONV = ConversationKey("telegram", "42")
OTHER = ConversationKey("slack", "C1")
TELEGRAM_READER = Reader(agent_id="ada", owner_id="alice", conversation=CONV)


def scoped_row(scope_type: ScopeType, scope_id: str, *, owner: str = "alice", agent: str = "ada",
        category: Category = Category.CONTEXT, promote: PromoteTarget | None = PromoteTarget.MEMORY_MD,
        archived: bool = False) -> Memory:
    return Memory(id=1, agent_id=agent, owner_id=owner, scope_type=scope_type, scope_id=scope_id, category=category,
                  key="k", value="v", promote_target=promote, archived_at=T0 if archived else None,
                  created_at=T0, updated_at=T0)


PROFILE = scoped_row(ScopeType.OWNER, "alice", category=Category.GOAL, promote=PromoteTarget.USER_MD)
WORK = scoped_row(ScopeType.AGENT, "ada")
HERE = scoped_row(ScopeType.CONVERSATION, CONV.scope_id)
THERE = scoped_row(ScopeType.CONVERSATION, OTHER.scope_id)
JOB = scoped_row(ScopeType.JOB, "nightly")


@pytest.mark.parametrize(
    ("scope", "seen"),
    [
        (RecallScope.CURRENT, {"PROFILE", "WORK", "HERE"}),
        (RecallScope.OWNER, {"PROFILE"}),
        (RecallScope.ALL, {"PROFILE", "WORK", "HERE", "THERE"}),
    ],
)
def test_each_recall_scope_admits_exactly_its_rows(scope: RecallScope, seen: set[str]) -> None:
    rows = {"PROFILE": PROFILE, "WORK": WORK, "HERE": HERE, "THERE": THERE, "JOB": JOB}
    admitted = {name for name, r in rows.items() if memory_filter(TELEGRAM_READER, scope).admits(r)}
    assert admitted == seen


def test_current_without_a_conversation_sees_profile_and_work_only() -> None:
    reader = Reader(agent_id="ada", owner_id="alice")
    f = memory_filter(reader)
    assert [f.admits(r) for r in (PROFILE, WORK, HERE, THERE, JOB)] == [True, True, False, False, False]


def test_a_job_run_sees_its_own_job_rows_whatever_it_asks() -> None:
    reader = Reader(agent_id="ada", owner_id="alice", job_source_id="nightly")
    assert reader.is_job and not TELEGRAM_READER.is_job
    for scope in RecallScope:
        f = memory_filter(reader, scope)
        assert f.admits(JOB)
        assert not any(f.admits(r) for r in (PROFILE, WORK, HERE, THERE, scoped_row(ScopeType.JOB, "weekly")))


def test_rows_of_another_owner_or_agent_are_never_admitted() -> None:
    for scope in RecallScope:
        f = memory_filter(TELEGRAM_READER, scope)
        assert f.admits(PROFILE)
        assert not f.admits(attrs.evolve(PROFILE, owner_id="bob"))
        assert not f.admits(attrs.evolve(PROFILE, agent_id="eve"))


def test_history_filter() -> None:
    assert history_filter(TELEGRAM_READER) == HistoryFilter(agent_id="ada", owner_id="alice", conversation=CONV)
    assert history_filter(TELEGRAM_READER, RecallScope.ALL) == HistoryFilter(agent_id="ada", owner_id="alice")
    assert history_filter(TELEGRAM_READER, RecallScope.OWNER) == HistoryFilter(agent_id="ada", owner_id="alice")
    assert history_filter(Reader(agent_id="ada", owner_id="alice")) == HistoryFilter(agent_id="ada",
                                                                                     owner_id="alice")
    assert history_filter(Reader(agent_id="ada", owner_id="alice", job_source_id="nightly")) is None


@pytest.mark.parametrize(
    ("writer", "category", "reader", "expected"),
    [
        (WriterKind.REVIEWER, Category.GOAL, TELEGRAM_READER, Scope.owner("alice")),
        (WriterKind.REVIEWER, Category.CONTEXT, TELEGRAM_READER, Scope.agent("ada")),
        (WriterKind.OPERATOR, Category.DIRECTIVE, TELEGRAM_READER, Scope.agent("ada")),
        (WriterKind.OPERATOR, Category.IDENTITY, Reader(agent_id="ada", owner_id="alice"), Scope.owner("alice")),
        (WriterKind.TOOL, Category.GOAL, TELEGRAM_READER, Scope.conversation(CONV)),
        (WriterKind.TOOL, Category.GOAL, Reader(agent_id="ada", owner_id="alice"), None),
        (WriterKind.JOB, Category.GOAL, TELEGRAM_READER, None),
        (WriterKind.JOB, Category.GOAL, Reader(agent_id="ada", owner_id="alice", job_source_id="n"), Scope.job("n")),
        (WriterKind.REVIEWER, Category.GOAL, Reader(agent_id="ada", owner_id="alice", job_source_id="n"),
         Scope.job("n")),
        (WriterKind.TOOL, Category.CONTEXT, Reader(agent_id="ada", owner_id="alice", conversation=CONV,
                                                   job_source_id="n"), Scope.job("n")),
    ],
)
def test_write_scope(writer: WriterKind, category: Category, reader: Reader, expected: Scope | None) -> None:
    assert write_scope(writer, category, reader) == expected


def test_an_agent_rule_is_a_live_agent_scoped_directive_shown_in_memory_md() -> None:
    rule = scoped_row(ScopeType.AGENT, "ada", category=Category.DIRECTIVE)
    assert is_agent_rule(rule)
    assert not is_agent_rule(attrs.evolve(rule, category=Category.CONTEXT))
    assert not is_agent_rule(attrs.evolve(rule, scope_type=ScopeType.CONVERSATION))
    assert not is_agent_rule(attrs.evolve(rule, promote_target=None))
    assert not is_agent_rule(attrs.evolve(rule, promote_target=PromoteTarget.USER_MD))
    assert not is_agent_rule(attrs.evolve(rule, archived_at=T0))
