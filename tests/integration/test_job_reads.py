"""A host reads back what it saved: memory sources, scheduled jobs and their runs, each owner's
only, on each store, on a read-only open too, and bad input refused with a typed error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import (
    AsyncMemorySystem,
    FermixError,
    InvalidIdentifier,
    InvalidNumber,
    JobStatus,
    MemoryClosed,
    MemorySystem,
)
from tests.manual_clock import TestClock

pytestmark = pytest.mark.usefixtures("every_store")

AGENT = "ada"
ALICE = {"agent_id": AGENT, "owner_id": "alice"}
BOB = {"agent_id": AGENT, "owner_id": "bob"}


def at(hour: int) -> datetime:
    return datetime(2026, 3, 2, hour, tzinfo=UTC)


def fill(memory: MemorySystem, clock: TestClock) -> None:
    """Two jobs of alice's (one on her registered source, one on its own job source), one of
    bob's; three runs of alice's first job, recorded out of start order, and one of bob's."""
    memory.register_memory_source(source_id="notes", **ALICE, source_type="notes", name="Notes")
    clock.advance(minutes=1)
    memory.save_job(job_id="digest", **ALICE, name="Digest", schedule="0 9 * * *", prompt="Summarise",
                    memory_source_id="notes")
    clock.advance(minutes=1)
    memory.save_job(job_id="backup", **ALICE, name="Backup", schedule="0 3 * * *", prompt="Back up",
                    enabled=False)
    clock.advance(minutes=1)
    memory.save_job(job_id="bob-job", **BOB, name="Bob's", schedule="@daily", prompt="Hello")
    memory.record_job_run(run_id="digest@10", job_id="digest", status="failed", started_at=at(10),
                          finished_at=at(11), error="timed out")
    memory.record_job_run(run_id="digest@9", job_id="digest", status="succeeded", started_at=at(9),
                          finished_at=at(9), output="done")
    assert memory.claim_job_run(run_id="digest@12", job_id="digest", started_at=at(12)) is not None
    memory.record_job_run(run_id="bob@9", job_id="bob-job", status="succeeded", started_at=at(9))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    clock = TestClock()
    with MemorySystem.open(tmp_path / "home", clock=clock) as memory:
        fill(memory, clock)
    return tmp_path / "home"


@pytest.fixture
def memory(home: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(home) as system:
        yield system


def test_jobs_and_sources_are_each_owners_own(memory: MemorySystem) -> None:
    alices = memory.jobs(**ALICE)
    assert [j.id for j in alices] == ["digest", "backup"]  # oldest first
    assert [(j.memory_source_id, j.enabled) for j in alices] == [("notes", True), ("job:backup", False)]
    assert [j.id for j in memory.jobs(**BOB)] == ["bob-job"]
    assert memory.jobs(agent_id=AGENT, owner_id="carol") == []
    assert memory.jobs(agent_id="eve", owner_id="alice") == []

    assert [s.id for s in memory.memory_sources(**ALICE)] == ["notes", "job:backup"]  # oldest first
    assert [s.id for s in memory.memory_sources(**BOB)] == ["job:bob-job"]
    assert [s.id for s in memory.memory_sources(**ALICE, limit=1)] == ["notes"]
    assert memory.memory_sources(**ALICE, limit=0) == []


def test_one_job_source_or_run_by_its_id(memory: MemorySystem) -> None:
    digest = memory.job("digest")
    assert digest is not None and (digest.owner_id, digest.name, digest.schedule) == ("alice", "Digest", "0 9 * * *")
    assert digest == memory.jobs(**ALICE)[0]
    notes = memory.memory_source("notes")
    assert notes is not None and (notes.owner_id, notes.source_type, notes.name) == ("alice", "notes", "Notes")
    run = memory.job_run("digest@10")
    assert run is not None and (run.job_id, run.status, run.error) == ("digest", JobStatus.FAILED, "timed out")
    assert (run.started_at, run.finished_at) == (at(10), at(11))
    assert memory.job("nope") is None and memory.memory_source("nope") is None
    assert memory.job_run("nope") is None


def test_runs_are_newest_first_and_limited(memory: MemorySystem) -> None:
    runs = memory.job_runs("digest")
    # By started_at, newest first, whatever order they were recorded in.
    assert [(r.id, r.status) for r in runs] == [
        ("digest@12", JobStatus.RUNNING), ("digest@10", JobStatus.FAILED), ("digest@9", JobStatus.SUCCEEDED)]
    assert [r.id for r in memory.job_runs("digest", limit=2)] == ["digest@12", "digest@10"]
    assert memory.job_runs("digest", limit=0) == []
    assert [r.id for r in memory.job_runs("bob-job")] == ["bob@9"]
    assert memory.job_runs("backup") == [] and memory.job_runs("nope") == []


def test_a_read_only_open_reads_them(home: Path) -> None:
    with MemorySystem.open(home, readonly=True) as memory:
        assert [j.id for j in memory.jobs(**ALICE)] == ["digest", "backup"]
        assert [s.id for s in memory.memory_sources(**ALICE)] == ["notes", "job:backup"]
        assert [r.id for r in memory.job_runs("digest", limit=1)] == ["digest@12"]
        job, run, source = memory.job("bob-job"), memory.job_run("bob@9"), memory.memory_source("notes")
        assert job is not None and run is not None and source is not None


def test_the_awaited_reads_answer_the_same(home: Path) -> None:
    async def main() -> None:
        async with AsyncMemorySystem.open(home) as memory:
            assert [j.id for j in await memory.jobs(**ALICE)] == ["digest", "backup"]
            assert (await memory.job("digest")) == memory.sync.job("digest")
            assert [r.id for r in await memory.job_runs("digest", limit=1)] == ["digest@12"]
            assert (await memory.job_run("nope")) is None
            assert [s.id for s in await memory.memory_sources(**BOB)] == ["job:bob-job"]
            assert (await memory.memory_source("notes")) == memory.sync.memory_source("notes")

    asyncio.run(main())


@pytest.mark.sqlite_only("refused before any store is asked")
@pytest.mark.parametrize(("method", "arguments", "error"), [
    ("job_runs", {"job_id": "digest", "limit": -1}, InvalidNumber),
    ("job_runs", {"job_id": "digest", "limit": True}, InvalidNumber),
    ("job_runs", {"job_id": "digest", "limit": "2"}, InvalidNumber),
    ("job_runs", {"job_id": "digest", "limit": 2**64}, InvalidNumber),
    ("memory_sources", {**ALICE, "limit": -1}, InvalidNumber),
    ("job_runs", {"job_id": ""}, InvalidIdentifier),
    ("job", {"job_id": 7}, InvalidIdentifier),
    ("job", {"job_id": "x" * 300}, InvalidIdentifier),
    ("job_run", {"run_id": None}, InvalidIdentifier),
    ("memory_source", {"source_id": "a\x00b"}, InvalidIdentifier),
    ("jobs", {"agent_id": AGENT, "owner_id": ""}, InvalidIdentifier),
    ("memory_sources", {"agent_id": ["ada"], "owner_id": "alice"}, InvalidIdentifier),
])
def test_bad_input_is_a_typed_error(memory: MemorySystem, method: str, arguments: dict[str, Any],
                                    error: type[FermixError]) -> None:
    with pytest.raises(error):
        getattr(memory, method)(**arguments)


@pytest.mark.sqlite_only("refused before any store is asked")
def test_a_closed_memory_refuses_the_reads(home: Path) -> None:
    memory = MemorySystem.open(home)
    memory.close()
    with pytest.raises(MemoryClosed):
        memory.jobs(**ALICE)
    with pytest.raises(MemoryClosed):
        memory.job_runs("digest")
