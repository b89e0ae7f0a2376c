"""The SQL projections hold exactly what the domain's ``evolve`` functions make of the log.

A real memory goes through reviews (claimed, completed, failed, skipped), memory rows (added,
replaced, archived, restored, agent rules), prompt-file revisions and a rollback, memory
sources, jobs and runs, and an erasure. Then the log is read back and folded through the
domain's evolve functions; every aggregate table must match the fold, row for row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.event_log import read_log
from fermix_memory.adapters.sql.job_queries import (
    JOB_COLUMNS,
    RUN_COLUMNS,
    SOURCE_COLUMNS,
    job_from_row,
    run_from_row,
    source_from_row,
)
from fermix_memory.adapters.sql.rows import MEMORY_COLUMNS, memory_from_row, optional_time
from fermix_memory.domain import conversation_window, jobs, resources, review_gate
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.values import ConversationKey
from tests.integration.loopback_models import LoopbackModelServer
from tests.manual_clock import START, TestClock
from tests.waits import HANG_GUARD_S

AGENT, CONV, OTHER = "ada", "telegram:1", "telegram:2"
Pair = tuple[str, str]


def ops(*operations: dict[str, Any]) -> str:
    return json.dumps({"operations": list(operations)})


@pytest.fixture(scope="module")
def openai_server() -> Iterator[LoopbackModelServer]:
    server = LoopbackModelServer("openai")
    yield server
    server.close()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, openai_server: LoopbackModelServer) -> Path:
    """A home whose log holds every kind of aggregate change (and one erasure); made once."""
    home = tmp_path_factory.mktemp("projections") / "home"
    clock = TestClock()
    config = {"fermix_core": {
        "timeouts": {"llm_buffered_s": 0.5},
        "memory": {"review_failure_backoff_ms": 60_000},
        "providers": [{"name": "p", "kind": "openai", "base_url": openai_server.base_url, "model": "m",
                       "retries": 0, "context_window": 2000}],
    }}
    with MemorySystem.open(home, config=config, clock=clock) as m:
        def say(owner: str, text: str) -> None:
            m.append_message(agent_id=AGENT, owner_id=owner, conversation=CONV, role="user", content=text,
                             sender=owner, trust="operator")
            clock.advance(seconds=1)

        def write(owner: str, op: dict[str, Any], **kw: Any) -> Any:
            [outcome] = m.write_memory(op, agent_id=AGENT, owner_id=owner, trust="operator", **kw)
            clock.advance(seconds=1)
            return outcome

        for owner in ("alice", "bob", "carol"):
            say(owner, f"hello, I am {owner}")
        # Reviews: completed, then failed (back-off), then skipped twice for different reasons.
        openai_server.script(openai_server.ok(ops({"op": "add", "category": "identity", "key": "home_city",
                                                  "value": "Lives in Paris"})))
        assert m.review_now(agent_id=AGENT, owner_id="alice", conversation=CONV)[0].status == "completed"
        say("alice", "I moved to Rome")
        openai_server.always(openai_server.error(503))
        assert m.review_now(agent_id=AGENT, owner_id="alice", conversation=CONV)[0].status == "failed"
        assert m.after_turn(agent_id=AGENT, owner_id="alice", conversation=CONV).result(timeout=HANG_GUARD_S).status \
            == "skipped"
        clock.advance(hours=30)
        assert m.after_turn(agent_id=AGENT, owner_id="bob", conversation=CONV).result(timeout=HANG_GUARD_S).status \
            == "failed"
        # A conversation's window: compacted, a failed compaction (back-off), then cleared elsewhere.
        openai_server.always(openai_server.ok("Nothing to save."))
        for i in range(12):
            m.append_message(agent_id=AGENT, owner_id="alice", conversation=OTHER, role="user",
                             content=f"message {i} about boats and the weather " * 8, sender="alice",
                             trust="operator")
        assert m.compact(agent_id=AGENT, conversation=OTHER).status == "compacted"
        openai_server.always(openai_server.error(503))
        say("alice", "more " * 200)
        assert m.compact(agent_id=AGENT, conversation=CONV).status == "failed"
        m.compact(agent_id=AGENT, conversation=OTHER)
        m.clear_window(AGENT, OTHER, owner_id="alice")
        clock.advance(seconds=1)
        # Memory rows: add, replace, archive, restore, a standing rule of the agent, a tool row.
        row = write("alice", {"op": "add", "category": "context", "key": "project", "value": "Zeppelin"},
                    writer="reviewer").memory_id
        write("alice", {"op": "add", "category": "context", "key": "project", "value": "Airship"}, writer="reviewer")
        write("alice", {"op": "archive", "id": row, "reason": "done"}, writer="reviewer")
        m.restore(row, by="test")
        clock.advance(seconds=1)
        stays_archived = write("alice", {"op": "add", "category": "goal", "key": "marathon", "value": "Run one"},
                               writer="reviewer").memory_id
        write("alice", {"op": "archive", "id": stays_archived, "reason": "gave up"}, writer="reviewer")
        write("bob", {"op": "add", "category": "directive", "key": "language", "value": "Answer in English"},
              writer="operator")
        write("bob", {"op": "add", "category": "identity", "key": "name", "value": "Bob"}, writer="reviewer")
        write("carol", {"op": "add", "category": "identity", "key": "nick", "value": "C"}, writer="tool",
              conversation=CONV)
        m.resource_rollback("user_md", 1, agent_id=AGENT, owner_id="alice")
        clock.advance(seconds=1)
        # Sources, jobs and runs.
        for owner in ("alice", "bob"):
            m.register_memory_source(source_id=f"src-{owner}", agent_id=AGENT, owner_id=owner, source_type="feed",
                                     name="Feed")
            m.register_memory_source(source_id=f"src-{owner}", agent_id=AGENT, owner_id=owner, source_type="feed",
                                     name="Feed, renamed", description="now described")
            m.save_job(job_id=f"job-{owner}", agent_id=AGENT, owner_id=owner, name="Digest", schedule="daily",
                       prompt="Summarise")
            clock.advance(seconds=1)
            m.save_job(job_id=f"job-{owner}", agent_id=AGENT, owner_id=owner, name="Digest", schedule="hourly",
                       prompt="Summarise", memory_source_id=f"src-{owner}")
            m.record_job_run(run_id=f"run-{owner}", job_id=f"job-{owner}", status="running",
                             started_at=START + timedelta(minutes=1))
            clock.advance(seconds=1)
            m.record_job_run(run_id=f"run-{owner}", job_id=f"job-{owner}", status="succeeded",
                             started_at=START + timedelta(minutes=1), output="done")
        m.forget_owner("bob", agent_id=AGENT)
    return home


@pytest.fixture(scope="module")
def db(home: Path) -> Iterator[apsw.Connection]:
    conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    yield conn
    conn.close()


@attrs.define
class Fold:
    """Every aggregate of the log, folded through the domain's evolve functions."""

    memories: dict[int, Memory] = attrs.Factory(dict)
    reviews: dict[tuple[str, ...], review_gate.ReviewGateState] = attrs.Factory(dict)
    resources: dict[tuple[str, str, str], resources.ResourceState] = attrs.Factory(dict)
    revisions: dict[tuple[str, str, str, int], tuple[str, str, str, str]] = attrs.Factory(dict)
    sources: dict[str, jobs.MemorySource] = attrs.Factory(dict)
    jobs: dict[str, jobs.ScheduledJob] = attrs.Factory(dict)
    runs: dict[str, jobs.JobRun] = attrs.Factory(dict)
    windows: dict[tuple[str, ...], conversation_window.ConversationWindow] = attrs.Factory(dict)

    def window(self, agent_id: str, c: ConversationKey, e: ev.DomainEvent) -> None:
        key = (agent_id, c.channel, c.chat_id, c.thread_scope)
        self.windows[key] = conversation_window.evolve(
            self.windows.get(key, conversation_window.ConversationWindow()), e)

    def apply(self, position: int, e: ev.DomainEvent) -> None:
        if isinstance(e, ev.MemoryAdded | ev.MemoryReplaced | ev.MemoryArchived | ev.MemoryRestored):
            row_id = position if isinstance(e, ev.MemoryAdded) else e.memory_id
            row = evolve_memory(self.memories.get(row_id), position, e)
            assert row is not None
            self.memories[row_id] = row
        elif isinstance(e, review_gate.REVIEW_EVENTS):
            c = e.conversation
            key = (e.agent_id, e.owner_id, c.channel, c.chat_id, c.thread_scope)
            self.reviews[key] = review_gate.evolve(self.reviews.get(key, review_gate.ReviewGateState()), e)
        elif isinstance(e, ev.ResourceRevised | ev.ResourceRolledBack):
            state = resources.evolve(self.resources.get((e.agent_id, e.owner_id, e.name), resources.NEVER_RECORDED), e)
            self.resources[(e.agent_id, e.owner_id, e.name)] = state
            self.revisions[(e.agent_id, e.owner_id, e.name, state.revision)] = (
                state.content, state.content_sha256, resources.revision_reason(e), e.at.isoformat())
        elif isinstance(e, ev.MemorySourceRegistered):
            self.sources[e.source_id] = jobs.evolve_source(self.sources.get(e.source_id), e)
        elif isinstance(e, ev.ScheduledJobSaved):
            self.jobs[e.job_id] = jobs.evolve_job(self.jobs.get(e.job_id), e)
        elif isinstance(e, ev.JobRunRecorded):
            self.runs[e.run_id] = jobs.evolve_run(self.runs.get(e.run_id), e)
        elif isinstance(e, conversation_window.WINDOW_EVENTS):
            self.window(e.agent_id, e.conversation, e)
        elif isinstance(e, ev.OwnerForgotten):
            self.forget((e.agent_id, e.owner_id), set(e.redacted_positions or ()))
            for conversation in e.conversations:
                self.window(e.agent_id, conversation, e)

    def forget(self, pair: Pair, redacted: set[int]) -> None:
        """An erasure leaves nothing of the owner with the agent in any aggregate."""
        def of(value: Any) -> bool:
            return (value.agent_id, value.owner_id) == pair

        self.memories = {i: r for i, r in self.memories.items() if not of(r) and i not in redacted}
        self.reviews = {k: s for k, s in self.reviews.items() if k[:2] != pair}
        self.resources = {k: s for k, s in self.resources.items() if k[:2] != pair}
        self.revisions = {k: s for k, s in self.revisions.items() if k[:2] != pair}
        gone = {j for j, job in self.jobs.items() if of(job)}
        self.sources = {i: s for i, s in self.sources.items() if not of(s)}
        self.jobs = {j: job for j, job in self.jobs.items() if j not in gone}
        self.runs = {r: run for r, run in self.runs.items() if run.job_id not in gone}


def fold_log(db: apsw.Connection) -> Fold:
    folded = Fold()
    for item in read_log(db.cursor()):
        folded.apply(item.position, item.event)
    return folded


def rows(db: apsw.Connection, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.execute(sql).fetchall()]


def test_memories_follow_evolve_memory(db: apsw.Connection) -> None:
    folded = fold_log(db)
    stored = {r.id: r for r in map(memory_from_row, rows(db, f"SELECT {MEMORY_COLUMNS} FROM memories"))}
    assert stored == folded.memories
    assert any(r.archived_at is None and r.key == "project" for r in stored.values())  # archived, then restored
    assert any(r.archived_by and r.key == "marathon" for r in stored.values())


def test_review_state_follows_the_review_gate(db: apsw.Connection) -> None:
    folded = fold_log(db)
    fields = [f.name for f in attrs.fields(review_gate.ReviewGateState)]
    stored = {}
    for r in rows(db, f"SELECT agent_id, owner_id, channel, chat_id, thread_scope, {', '.join(fields)}"
                      " FROM review_state"):
        values = dict(zip(fields, r[5:], strict=True))
        for t in ("last_review_at", "retry_after", "claim_expires_at"):
            values[t] = optional_time(values[t])
        stored[r[:5]] = review_gate.ReviewGateState(**values)
    assert stored == folded.reviews
    alice = stored[(AGENT, "alice", "telegram", "1", "")]
    assert alice.reviewed_up_to_id > 0 and alice.last_error
    kinds = {type(item.event) for item in read_log(db.cursor())}
    assert set(review_gate.REVIEW_EVENTS) <= kinds  # every review event went through the fold


def test_resources_and_revisions_follow_the_resource_rules(db: apsw.Connection) -> None:
    folded = fold_log(db)
    stored = {(a, o, n): (rev, sha, at) for a, o, n, rev, sha, at in rows(
        db, "SELECT agent_id, owner_id, name, current_revision, content_sha256, updated_at FROM resources")}
    assert stored == {k: (s.revision, s.content_sha256, s.updated_at.isoformat() if s.updated_at else None)
                      for k, s in folded.resources.items()}
    revisions = {r[:4]: r[4:] for r in rows(
        db, "SELECT agent_id, owner_id, name, revision, content, content_sha256, reason, created_at"
            " FROM resource_revisions")}
    assert revisions == folded.revisions
    assert any(reason.startswith("rollback to") for _, _, reason, _ in revisions.values())


def test_sources_jobs_and_runs_follow_the_job_rules(db: apsw.Connection) -> None:
    folded = fold_log(db)
    assert {s.id: s for s in map(source_from_row, rows(db, f"SELECT {SOURCE_COLUMNS} FROM memory_sources"))} \
        == folded.sources
    assert {j.id: j for j in map(job_from_row, rows(db, f"SELECT {JOB_COLUMNS} FROM scheduled_jobs"))} \
        == folded.jobs
    assert {r.id: r for r in map(run_from_row, rows(db, f"SELECT {RUN_COLUMNS} FROM job_runs"))} == folded.runs
    assert set(folded.jobs) == {"job-alice"} and folded.runs["run-alice"].status is jobs.JobStatus.SUCCEEDED
    assert folded.sources["src-alice"].name == "Feed, renamed"


def test_conversation_windows_follow_the_window_rules(db: apsw.Connection) -> None:
    folded = fold_log(db)
    stored = {r[:4]: conversation_window.ConversationWindow(
        window_start_id=r[4], checkpoint_message_id=r[5], compaction_retry_after=optional_time(r[6]),
        compacted_at=optional_time(r[7])) for r in rows(
        db, "SELECT agent_id, channel, chat_id, thread_scope, window_start_id, checkpoint_message_id,"
            " compaction_retry_after, compacted_at FROM conversation_state")}
    assert stored == folded.windows
    other = stored[(AGENT, "telegram", "2", "")]
    assert other.compacted_at is not None and other.checkpoint_message_id is None and other.window_start_id > 0
    assert stored[(AGENT, "telegram", "1", "")].compaction_retry_after is None  # bob's erasure lifted it
