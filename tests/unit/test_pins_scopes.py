"""Pins for domain/scopes.py: what each reader DOES see, not only what it must not, and where each
writer's rows go."""

from __future__ import annotations

import attrs
import pytest

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.scopes import (
    HistoryFilter,
    Reader,
    RecallScope,
    WriterKind,
    history_filter,
    is_agent_rule,
    memory_filter,
    write_scope,
)
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Scope, ScopeType
from tests.unit.test_domain_admission import T0

CONV = ConversationKey("telegram", "42")
OTHER = ConversationKey("slack", "C1")
READER = Reader(agent_id="ada", owner_id="alice", conversation=CONV)


def row(scope_type: ScopeType, scope_id: str, *, owner: str = "alice", agent: str = "ada",
        category: Category = Category.CONTEXT, promote: PromoteTarget | None = PromoteTarget.MEMORY_MD,
        archived: bool = False) -> Memory:
    return Memory(id=1, agent_id=agent, owner_id=owner, scope_type=scope_type, scope_id=scope_id, category=category,
                  key="k", value="v", promote_target=promote, archived_at=T0 if archived else None,
                  created_at=T0, updated_at=T0)


PROFILE = row(ScopeType.OWNER, "alice", category=Category.GOAL, promote=PromoteTarget.USER_MD)
WORK = row(ScopeType.AGENT, "ada")
HERE = row(ScopeType.CONVERSATION, CONV.scope_id)
THERE = row(ScopeType.CONVERSATION, OTHER.scope_id)
JOB = row(ScopeType.JOB, "nightly")


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
    admitted = {name for name, r in rows.items() if memory_filter(READER, scope).admits(r)}
    assert admitted == seen


def test_current_without_a_conversation_sees_profile_and_work_only() -> None:
    reader = Reader(agent_id="ada", owner_id="alice")
    f = memory_filter(reader)
    assert [f.admits(r) for r in (PROFILE, WORK, HERE, THERE, JOB)] == [True, True, False, False, False]


def test_a_job_run_sees_its_own_job_rows_whatever_it_asks() -> None:
    reader = Reader(agent_id="ada", owner_id="alice", job_source_id="nightly")
    assert reader.is_job and not READER.is_job
    for scope in RecallScope:
        f = memory_filter(reader, scope)
        assert f.admits(JOB)
        assert not any(f.admits(r) for r in (PROFILE, WORK, HERE, THERE, row(ScopeType.JOB, "weekly")))


def test_rows_of_another_owner_or_agent_are_never_admitted() -> None:
    for scope in RecallScope:
        f = memory_filter(READER, scope)
        assert f.admits(PROFILE)
        assert not f.admits(attrs.evolve(PROFILE, owner_id="bob"))
        assert not f.admits(attrs.evolve(PROFILE, agent_id="eve"))


def test_history_filter() -> None:
    assert history_filter(READER) == HistoryFilter(agent_id="ada", owner_id="alice", conversation=CONV)
    assert history_filter(READER, RecallScope.ALL) == HistoryFilter(agent_id="ada", owner_id="alice")
    assert history_filter(READER, RecallScope.OWNER) == HistoryFilter(agent_id="ada", owner_id="alice")
    assert history_filter(Reader(agent_id="ada", owner_id="alice")) == HistoryFilter(agent_id="ada",
                                                                                     owner_id="alice")
    assert history_filter(Reader(agent_id="ada", owner_id="alice", job_source_id="nightly")) is None


@pytest.mark.parametrize(
    ("writer", "category", "reader", "expected"),
    [
        (WriterKind.REVIEWER, Category.GOAL, READER, Scope.owner("alice")),
        (WriterKind.REVIEWER, Category.CONTEXT, READER, Scope.agent("ada")),
        (WriterKind.OPERATOR, Category.DIRECTIVE, READER, Scope.agent("ada")),
        (WriterKind.OPERATOR, Category.IDENTITY, Reader(agent_id="ada", owner_id="alice"), Scope.owner("alice")),
        (WriterKind.TOOL, Category.GOAL, READER, Scope.conversation(CONV)),
        (WriterKind.TOOL, Category.GOAL, Reader(agent_id="ada", owner_id="alice"), None),
        (WriterKind.JOB, Category.GOAL, READER, None),
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
    rule = row(ScopeType.AGENT, "ada", category=Category.DIRECTIVE)
    assert is_agent_rule(rule)
    assert not is_agent_rule(attrs.evolve(rule, category=Category.CONTEXT))
    assert not is_agent_rule(attrs.evolve(rule, scope_type=ScopeType.CONVERSATION))
    assert not is_agent_rule(attrs.evolve(rule, promote_target=None))
    assert not is_agent_rule(attrs.evolve(rule, promote_target=PromoteTarget.USER_MD))
    assert not is_agent_rule(attrs.evolve(rule, archived_at=T0))
