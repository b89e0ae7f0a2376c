"""Use cases: memory sources, scheduled jobs and their runs (the job scope of R-SCOPE).

A scheduled job keeps its own memory under a memory source (``scope_id`` = the source id).
The host application schedules and runs jobs; this module records what a job is, where its
memory lives, and how each run went — as events, like every other change.

The rules are the domain's (``domain.jobs``): each use case loads the aggregates it needs by
folding their streams inside the write transaction, asks the domain to decide, and appends
what it decided. Saving exactly what is already recorded appends nothing, so a host may re-save
its jobs on every start. A host running several replicas claims each due run
(:func:`claim_job_run`) so that exactly one of them runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol, TypeVar
from urllib.parse import quote

from fermix_memory.application.errors import NotFound
from fermix_memory.application.ports import Clock
from fermix_memory.application.store_ports import EventStore, RecordedEvent, WriteTransaction
from fermix_memory.application.streams import job_stream, source_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.jobs import (
    JOB_SOURCE_PREFIX,
    JOB_SOURCE_TYPE,
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_PROMPT_CHARS,
    MAX_RUN_TEXT_CHARS,
    MAX_SCHEDULE_CHARS,
    IdentifierInUse,
    InvalidJob,
    JobRun,
    JobStatus,
    MemorySource,
    ReportRun,
    SaveJob,
    ScheduledJob,
    check_job_text,
    decide_run_claim,
    decide_run_report,
    decide_save_job,
    decide_source,
    evolve_job,
    evolve_run,
    evolve_source,
    fold,
    job_source_id,
)
from fermix_memory.domain.values import check_identifier

__all__ = [
    "JOB_SOURCE_PREFIX", "JOB_SOURCE_TYPE", "MAX_DESCRIPTION_CHARS", "MAX_NAME_CHARS", "MAX_PROMPT_CHARS",
    "MAX_RUN_TEXT_CHARS", "MAX_SCHEDULE_CHARS", "IdentifierInUse", "InvalidJob", "JobQueries", "JobRun",
    "JobStatus", "MemorySource", "MemorySourceQueries", "ScheduledJob", "claim_job_run", "job_run_stream",
    "job_source_id", "record_job_run", "register_memory_source", "save_job",
]


class MemorySourceQueries(Protocol):
    """What the memory tools need: the sources an agent/owner may list."""

    def memory_sources(self, agent_id: str, owner_id: str, *, limit: int | None = None) -> list[MemorySource]:
        """Sources of one agent and owner, oldest first (at most ``limit``)."""
        ...


class JobQueries(MemorySourceQueries, Protocol):
    """Read side of the ``memory_sources``, ``scheduled_jobs`` and ``job_runs`` projections."""

    def memory_source(self, source_id: str) -> MemorySource | None: ...

    def job(self, job_id: str) -> ScheduledJob | None: ...

    def jobs(self, agent_id: str, owner_id: str) -> list[ScheduledJob]: ...

    def job_run(self, run_id: str) -> JobRun | None: ...

    def job_runs(self, job_id: str, *, limit: int | None = None) -> list[JobRun]:
        """Runs of a job, newest first (at most ``limit``)."""
        ...


def job_run_stream(run_id: str) -> str:
    # One small stream per run: checking a run never reads a job's whole run history.
    return f"job-run/{quote(run_id, safe='')}"


# --- aggregates, folded from their streams ---------------------------------------------------

E = TypeVar("E", bound=ev.DomainEvent)
S = TypeVar("S")


class StreamReader(Protocol):
    """The log as seen by a decision: the store, or better an open write transaction."""

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterable[RecordedEvent]: ...


def _history(log: StreamReader, stream: str) -> list[ev.DomainEvent]:
    return [r.event for r in log.read_events(stream=stream)]


def _load_source(log: StreamReader, source_id: str) -> MemorySource | None:
    return fold(evolve_source, _history(log, source_stream(source_id)), ev.MemorySourceRegistered)


def _load_job(log: StreamReader, job_id: str) -> ScheduledJob | None:
    return fold(evolve_job, _history(log, job_stream(job_id)), ev.ScheduledJobSaved)


def _load_run(log: StreamReader, run_id: str) -> JobRun | None:
    return fold(evolve_run, _history(log, job_run_stream(run_id)), ev.JobRunRecorded)


def _decided(tx: WriteTransaction, state: S | None, events: list[ev.DomainEvent], kind: type[E],
             evolve: Callable[[S | None, E], S]) -> S:
    """Append what was decided; the aggregate as it now stands."""
    _append(tx, events)
    after = fold(evolve, events, kind, state)
    if after is None:  # every decision about an unrecorded aggregate records it
        raise AssertionError(f"no {kind.kind} was decided for a new aggregate")
    return after


def _stream_of(event: ev.DomainEvent) -> str:
    if isinstance(event, ev.MemorySourceRegistered):
        return source_stream(event.source_id)
    if isinstance(event, ev.ScheduledJobSaved):
        return job_stream(event.job_id)
    if isinstance(event, ev.JobRunRecorded):
        return job_run_stream(event.run_id)
    raise TypeError(f"{event.kind} is not an event of the job aggregates")


def _append(tx: WriteTransaction, events: list[ev.DomainEvent]) -> None:
    for event in events:
        tx.append(_stream_of(event), [event])


# --- use cases --------------------------------------------------------------------------------


def register_memory_source(
    store: EventStore,
    clock: Clock,
    *,
    source_id: str,
    agent_id: str,
    owner_id: str,
    source_type: str,
    name: str,
    description: str = "",
) -> str:
    """Register (or update the name/description of) a memory source; returns its id.

    Raises :class:`IdentifierInUse` when the id belongs to another agent/owner.
    """
    registration = ev.MemorySourceRegistered(
        at=clock.now(),
        source_id=check_identifier(source_id, "source_id"),
        agent_id=check_identifier(agent_id, "agent_id"),
        owner_id=check_identifier(owner_id, "owner_id"),
        source_type=check_identifier(source_type, "source_type"),
        name=check_job_text(name, "name", MAX_NAME_CHARS, required=True, one_line=True),
        description=check_job_text(description, "description", MAX_DESCRIPTION_CHARS),
    )
    # Decided inside the write: two first registrations of one id cannot both pass the check.
    store.write(lambda tx: _append(tx, decide_source(_load_source(tx, source_id), registration)))
    return source_id


def save_job(
    store: EventStore,
    clock: Clock,
    *,
    job_id: str,
    agent_id: str,
    owner_id: str,
    name: str,
    schedule: str,
    prompt: str,
    memory_source_id: str | None = None,
    enabled: bool = True,
) -> ScheduledJob:
    """Create or update a scheduled job, in one transaction with its memory source.

    Without ``memory_source_id`` the job keeps the source it has, or gets its own ``job``
    source ``job:<job_id>`` (registered here). A given source must exist and belong to the
    same agent/owner. ``schedule`` is stored as given: the host's scheduler interprets it.
    """
    cmd = SaveJob.checked(at=clock.now(), job_id=job_id, agent_id=agent_id, owner_id=owner_id, name=name,
                          schedule=schedule, prompt=prompt, memory_source_id=memory_source_id, enabled=enabled)

    def work(tx: WriteTransaction) -> ScheduledJob:
        job = _load_job(tx, cmd.job_id)
        source = _load_source(tx, cmd.source_to_load())
        if cmd.memory_source_id is not None and source is None:
            raise NotFound(f"no memory source {cmd.memory_source_id!r}; register it first")
        return _decided(tx, job, decide_save_job(job, source, cmd), ev.ScheduledJobSaved, evolve_job)

    return store.write(work)


def record_job_run(
    store: EventStore,
    clock: Clock,
    *,
    run_id: str,
    job_id: str,
    status: str,
    started_at: datetime,
    finished_at: datetime | None = None,
    output: str = "",
    error: str = "",
) -> JobRun:
    """Record a run's start (``running``) or its end (``succeeded`` / ``failed``).

    A finished run without ``finished_at`` ends now. A run belongs to one job, keeps its
    ``started_at``, and once finished cannot change. Raises :class:`NotFound` for an unknown job.
    """
    cmd = ReportRun.checked(at=clock.now(), run_id=run_id, job_id=job_id, status=status, started_at=started_at,
                            finished_at=finished_at, output=output, error=error)

    def work(tx: WriteTransaction) -> JobRun:
        if _load_job(tx, cmd.job_id) is None:
            raise NotFound(f"no scheduled job {cmd.job_id!r}")
        run = _load_run(tx, cmd.run_id)
        return _decided(tx, run, decide_run_report(run, cmd), ev.JobRunRecorded, evolve_run)

    return store.write(work)


def claim_job_run(
    store: EventStore,
    clock: Clock,
    *,
    run_id: str,
    job_id: str,
    started_at: datetime | None = None,
) -> JobRun | None:
    """Start run ``run_id`` of a job unless any process already has: the run, now ``running``,
    when this call claimed it; ``None`` when the run id is already recorded (another process, on
    this host or another sharing the store, claimed it) or the job is disabled — do not run it.

    Replicas that all wake for the same due job each claim the run id they derive from the job
    and its slot (e.g. ``"nightly@2026-12-01T03:00Z"``): the check and the start are one write
    transaction, and writes are serialised across every process of the store, so exactly one
    claim records the start. The claimant reports the end with :func:`record_job_run`.
    ``started_at`` defaults to now. Raises :class:`NotFound` for an unknown job.
    """
    at = clock.now()
    cmd = ReportRun.checked(at=at, run_id=run_id, job_id=job_id, status=JobStatus.RUNNING.value,
                            started_at=at if started_at is None else started_at)
    stream = job_run_stream(cmd.run_id)

    def work(tx: WriteTransaction) -> JobRun | None:
        job = _load_job(tx, cmd.job_id)
        if job is None:
            raise NotFound(f"no scheduled job {cmd.job_id!r}")
        recorded = tx.read_stream(stream)
        run = fold(evolve_run, [r.event for r in recorded.events], ev.JobRunRecorded)
        events = decide_run_claim(job, run, cmd)
        if not events:
            return None
        # The stream's version as read: a second start of this run cannot be appended even by
        # a writer that did not see this one.
        tx.append(stream, events, expected_version=recorded.version)
        return fold(evolve_run, events, ev.JobRunRecorded)

    return store.write(work)
