"""Use cases: memory sources, scheduled jobs and their runs (the job scope of R-SCOPE).

A scheduled job keeps its own memory under a memory source (``scope_id`` = the source id).
The host application schedules and runs jobs; this module records what a job is, where its
memory lives, and how each run went — as events, like every other change.

Each use case loads the aggregate it changes from its own event stream (a source, a job, a
run), decides, then appends in one transaction. Saving exactly what is already recorded
appends nothing, so a host may re-save its jobs on every start. The checks read before the
write transaction opens: two first saves of one new id racing each other are not caught.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Protocol, TypeVar
from urllib.parse import quote

import attrs

from fermix_memory.application.errors import NotFound
from fermix_memory.application.ports import Clock, EventStore, RecordedEvent, WriteTransaction
from fermix_memory.application.streams import job_stream, source_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.values import MAX_ID_CHARS, check_identifier, is_encodable, preview

JOB_SOURCE_TYPE = "job"
JOB_SOURCE_PREFIX = "job:"
MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 2_000
MAX_SCHEDULE_CHARS = 256
MAX_PROMPT_CHARS = 20_000
MAX_RUN_TEXT_CHARS = 100_000


class InvalidJob(DomainError):
    """A memory source, job or run field is malformed (name, schedule, status, times, text)."""


class IdentifierInUse(DomainError):
    """The id already belongs to another agent/owner (or, for a run, to another job)."""


class JobStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self is not JobStatus.RUNNING


@attrs.frozen(kw_only=True)
class MemorySource:
    """A row of ``memory_sources``: a named place memory rows come from (e.g. a scheduled job)."""

    id: str
    agent_id: str
    owner_id: str
    source_type: str
    name: str
    description: str = ""
    created_at: datetime
    updated_at: datetime


@attrs.frozen(kw_only=True)
class ScheduledJob:
    """A row of ``scheduled_jobs``; its runs read and write the ``job`` scope ``memory_source_id``."""

    id: str
    agent_id: str
    owner_id: str
    name: str
    schedule: str
    prompt: str
    memory_source_id: str
    enabled: bool = True
    created_at: datetime
    updated_at: datetime


@attrs.frozen(kw_only=True)
class JobRun:
    """A row of ``job_runs``."""

    id: str
    job_id: str
    status: JobStatus
    started_at: datetime
    finished_at: datetime | None = None
    output: str = ""
    error: str = ""


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


def job_source_id(job_id: str) -> str:
    """The memory source id a job gets when none is given: ``job:<job_id>``."""
    return JOB_SOURCE_PREFIX + job_id


# --- validation -------------------------------------------------------------------------------


def _text(value: object, what: str, limit: int, *, required: bool = False, one_line: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidJob(f"{what} must be text, got {type(value).__name__}")
    if required and not value.strip():
        raise InvalidJob(f"{what} must not be empty")
    if len(value) > limit:
        raise InvalidJob(f"{what} is longer than {limit} characters")
    if "\x00" in value or not is_encodable(value):
        raise InvalidJob(f"{what} must be Unicode text without NUL characters or lone surrogates")
    if one_line and any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidJob(f"{what} must not contain control characters")
    return value


def _aware(value: object, what: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidJob(f"{what} must be a timezone-aware datetime")
    return value.astimezone(UTC)  # one offset, so stored ISO strings sort in time order


def _owned(kind: str, item_id: str, found: tuple[str, str], wanted: tuple[str, str]) -> None:
    if found != wanted:
        # Ids are global (table primary keys): reusing one would rewrite another owner's record.
        raise IdentifierInUse(f"{kind} {item_id!r} already belongs to another agent or owner")


# --- aggregates, loaded from their streams ----------------------------------------------------

E = TypeVar("E", bound=ev.DomainEvent)


class StreamReader(Protocol):
    """The log as seen by a decision: the store, or better an open write transaction."""

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterable[RecordedEvent]: ...


def _history(log: StreamReader, stream: str, kind: type[E]) -> list[E]:
    return [r.event for r in log.read_events(stream=stream) if isinstance(r.event, kind)]


def _source_of(events: Iterable[ev.MemorySourceRegistered]) -> MemorySource | None:
    events = list(events)
    if not events:
        return None
    first, last = events[0], events[-1]
    # The projection keeps the first registration's agent/owner; so does this view.
    return MemorySource(id=first.source_id, agent_id=first.agent_id, owner_id=first.owner_id,
                        source_type=last.source_type, name=last.name, description=last.description,
                        created_at=first.at, updated_at=last.at)


def _job_of(events: Iterable[ev.ScheduledJobSaved]) -> ScheduledJob | None:
    events = list(events)
    if not events:
        return None
    first, last = events[0], events[-1]
    return ScheduledJob(id=first.job_id, agent_id=first.agent_id, owner_id=first.owner_id, name=last.name,
                        schedule=last.schedule, prompt=last.prompt, memory_source_id=last.memory_source_id,
                        enabled=last.enabled, created_at=first.at, updated_at=last.at)


def _load_source(log: StreamReader, source_id: str) -> MemorySource | None:
    return _source_of(_history(log, source_stream(source_id), ev.MemorySourceRegistered))


def _load_job(log: StreamReader, job_id: str) -> ScheduledJob | None:
    return _job_of(_history(log, job_stream(job_id), ev.ScheduledJobSaved))


def _source_event(existing: MemorySource | None, event: ev.MemorySourceRegistered
                  ) -> ev.MemorySourceRegistered | None:
    """``event``, or ``None`` when it would restate the recorded source."""
    if existing is None:
        return event
    _owned("memory source", event.source_id, (existing.agent_id, existing.owner_id),
           (event.agent_id, event.owner_id))
    same = (existing.source_type, existing.name, existing.description) == (
        event.source_type, event.name, event.description)
    return None if same else event


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
    event = ev.MemorySourceRegistered(
        at=clock.now(),
        source_id=check_identifier(source_id, "source_id"),
        agent_id=check_identifier(agent_id, "agent_id"),
        owner_id=check_identifier(owner_id, "owner_id"),
        source_type=check_identifier(source_type, "source_type"),
        name=_text(name, "name", MAX_NAME_CHARS, required=True, one_line=True),
        description=_text(description, "description", MAX_DESCRIPTION_CHARS),
    )

    def work(tx: WriteTransaction) -> None:
        # Decided inside the write: two first registrations of one id cannot both pass the check.
        change = _source_event(_load_source(tx, source_id), event)
        if change is not None:
            tx.append(source_stream(source_id), [change])

    store.write(work)
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
    check_identifier(job_id, "job_id")
    check_identifier(agent_id, "agent_id")
    check_identifier(owner_id, "owner_id")
    name = _text(name, "name", MAX_NAME_CHARS, required=True, one_line=True)
    schedule = _text(schedule, "schedule", MAX_SCHEDULE_CHARS, required=True, one_line=True)
    prompt = _text(prompt, "prompt", MAX_PROMPT_CHARS)
    if not isinstance(enabled, bool):
        raise InvalidJob(f"enabled must be true or false, got {type(enabled).__name__}")
    at = clock.now()
    who = (agent_id, owner_id)

    def work(tx: WriteTransaction) -> ScheduledJob:
        job = _load_job(tx, job_id)
        if job is not None:
            _owned("job", job_id, (job.agent_id, job.owner_id), who)
        appends: list[tuple[str, ev.DomainEvent]] = []
        if memory_source_id is not None:
            check_identifier(memory_source_id, "memory_source_id")
            source = _load_source(tx, memory_source_id)
            if source is None:
                raise NotFound(f"no memory source {memory_source_id!r}; register it first")
            _owned("memory source", memory_source_id, (source.agent_id, source.owner_id), who)
            source_id = memory_source_id
        elif job is not None and job.memory_source_id != job_source_id(job_id):
            source_id = job.memory_source_id  # re-saving must not orphan the memory the job already has
        else:
            source_id = job_source_id(job_id)
            if len(source_id) > MAX_ID_CHARS:
                raise InvalidJob(f"job_id is too long to derive its memory source id (max "
                                 f"{MAX_ID_CHARS - len(JOB_SOURCE_PREFIX)} characters)")
            own = ev.MemorySourceRegistered(at=at, source_id=source_id, agent_id=agent_id, owner_id=owner_id,
                                            source_type=JOB_SOURCE_TYPE, name=name,
                                            description=f"Memory of scheduled job {job_id}")
            change = _source_event(_load_source(tx, source_id), own)
            if change is not None:
                appends.append((source_stream(source_id), change))
        saved = ev.ScheduledJobSaved(at=at, job_id=job_id, agent_id=agent_id, owner_id=owner_id, name=name,
                                     schedule=schedule, prompt=prompt, memory_source_id=source_id, enabled=enabled)
        fields = (name, schedule, prompt, source_id, enabled)
        if job is None or fields != (job.name, job.schedule, job.prompt, job.memory_source_id, job.enabled):
            appends.append((job_stream(job_id), saved))
        for stream, event in appends:
            tx.append(stream, [event])
        if job is not None and len(appends) == 0:
            return job
        return ScheduledJob(id=job_id, agent_id=agent_id, owner_id=owner_id, name=name, schedule=schedule,
                            prompt=prompt, memory_source_id=source_id, enabled=enabled,
                            created_at=job.created_at if job else at, updated_at=at)

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
    check_identifier(run_id, "run_id")
    check_identifier(job_id, "job_id")
    try:
        state = JobStatus(status)
    except ValueError:
        allowed = ", ".join(s.value for s in JobStatus)
        raise InvalidJob(f"status must be one of {allowed}, got {preview(status)}") from None
    started_at = _aware(started_at, "started_at")
    if finished_at is not None:
        finished_at = _aware(finished_at, "finished_at")
        if not state.finished:
            raise InvalidJob("a running job run has no finished_at")
        if finished_at < started_at:
            raise InvalidJob("finished_at is before started_at")
    output = _text(output, "output", MAX_RUN_TEXT_CHARS)
    error = _text(error, "error", MAX_RUN_TEXT_CHARS)
    at = clock.now()
    return store.write(lambda tx: _record_run(tx, at, run_id, job_id, state, started_at, finished_at, output, error))


def _record_run(tx: WriteTransaction, at: datetime, run_id: str, job_id: str, state: JobStatus,
                started_at: datetime, finished_at: datetime | None, output: str, error: str) -> JobRun:
    if _load_job(tx, job_id) is None:
        raise NotFound(f"no scheduled job {job_id!r}")
    previous = _history(tx, job_run_stream(run_id), ev.JobRunRecorded)
    last = previous[-1] if previous else None
    if state.finished and finished_at is None:
        # A repeated end report without a time restates the recorded end; a first one ends now.
        finished_at = last.finished_at if last and last.finished_at else max(at, started_at)
    if last is not None:
        same = (last.status, last.finished_at, last.output, last.error) == (state.value, finished_at, output, error)
        if last.job_id != job_id:
            raise IdentifierInUse(f"job run {run_id!r} already belongs to job {last.job_id!r}")
        if last.started_at != started_at:
            raise InvalidJob(f"job run {run_id!r} started at {last.started_at.isoformat()}; that cannot change")
        if same or (JobStatus(last.status).finished and not state.finished):
            return _run_of(last)  # a repeated report, or a late "running" after the end: nothing new
        if JobStatus(last.status).finished:
            raise InvalidJob(f"job run {run_id!r} already finished as {last.status}")
    event = ev.JobRunRecorded(at=at, run_id=run_id, job_id=job_id, status=state.value, started_at=started_at,
                              finished_at=finished_at, output=output, error=error)
    tx.append(job_run_stream(run_id), [event])
    return _run_of(event)


def _run_of(event: ev.JobRunRecorded) -> JobRun:
    return JobRun(id=event.run_id, job_id=event.job_id, status=JobStatus(event.status),
                  started_at=event.started_at, finished_at=event.finished_at, output=event.output,
                  error=event.error)
