"""Memory sources, scheduled jobs and their runs as decide/evolve over frozen state (R-SCOPE jobs).

A scheduled job keeps its own memory under a memory source (``scope_id`` = the source id). Each
aggregate (a source, a job, a run) is the fold of its stream through ``evolve_*``; the
``memory_sources`` / ``scheduled_jobs`` / ``job_runs`` projections apply the same functions.
``decide_*`` check the rules and return the events to record — none when the command restates
what is recorded, so a host may re-save its jobs on every start. Times are passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TypeVar

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.errors import DomainError, InvalidArgument
from fermix_memory.domain.values import MAX_ID_CHARS, check_identifier, check_text, preview

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


class UnknownSource(DomainError, LookupError):
    """A job names a memory source that was never registered."""


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


def job_source_id(job_id: str) -> str:
    """The memory source id a job gets when none is given: ``job:<job_id>``."""
    return JOB_SOURCE_PREFIX + job_id


# --- validation -------------------------------------------------------------------------------


def check_job_text(value: object, what: str, limit: int, *, required: bool = False, one_line: bool = False
                   ) -> str:
    try:
        text = check_text(value, what, max_chars=limit)
    except InvalidArgument as error:
        raise InvalidJob(str(error)) from None
    if required and not text.strip():
        raise InvalidJob(f"{what} must not be empty")
    if one_line and any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidJob(f"{what} must not contain control characters")
    return text


def check_aware(value: object, what: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidJob(f"{what} must be a timezone-aware datetime")
    return value.astimezone(UTC)  # one offset, so stored ISO strings sort in time order


def check_status(value: object) -> JobStatus:
    for status in JobStatus:
        if isinstance(value, str) and value == status.value:
            return status
    allowed = ", ".join(s.value for s in JobStatus)
    raise InvalidJob(f"status must be one of {allowed}, got {preview(value)}")


def _owned(kind: str, item_id: str, found: tuple[str, str], wanted: tuple[str, str]) -> None:
    if found != wanted:
        # Ids are global (table primary keys): reusing one would rewrite another owner's record.
        raise IdentifierInUse(f"{kind} {item_id!r} already belongs to another agent or owner")


# --- evolve -----------------------------------------------------------------------------------


def evolve_source(state: MemorySource | None, e: ev.MemorySourceRegistered) -> MemorySource:
    if state is None:
        return MemorySource(id=e.source_id, agent_id=e.agent_id, owner_id=e.owner_id, source_type=e.source_type,
                            name=e.name, description=e.description, created_at=e.at, updated_at=e.at)
    # The first registration's agent/owner and time stay.
    return attrs.evolve(state, source_type=e.source_type, name=e.name, description=e.description, updated_at=e.at)


def evolve_job(state: ScheduledJob | None, e: ev.ScheduledJobSaved) -> ScheduledJob:
    if state is None:
        return ScheduledJob(id=e.job_id, agent_id=e.agent_id, owner_id=e.owner_id, name=e.name, schedule=e.schedule,
                            prompt=e.prompt, memory_source_id=e.memory_source_id, enabled=e.enabled,
                            created_at=e.at, updated_at=e.at)
    return attrs.evolve(state, name=e.name, schedule=e.schedule, prompt=e.prompt,
                        memory_source_id=e.memory_source_id, enabled=e.enabled, updated_at=e.at)


def evolve_run(state: JobRun | None, e: ev.JobRunRecorded) -> JobRun:
    if state is None:
        return JobRun(id=e.run_id, job_id=e.job_id, status=JobStatus(e.status), started_at=e.started_at,
                      finished_at=e.finished_at, output=e.output, error=e.error)
    # A run keeps its job and start (decide_run_report refuses to change them).
    return attrs.evolve(state, status=JobStatus(e.status), finished_at=e.finished_at, output=e.output,
                        error=e.error)


S = TypeVar("S")
E = TypeVar("E", bound=ev.DomainEvent)


def fold(evolve: Callable[[S | None, E], S], events: Iterable[ev.DomainEvent], kind: type[E],
         state: S | None = None) -> S | None:
    """The aggregate ``state`` becomes through the ``kind`` events (``None``: never recorded)."""
    for event in events:
        if isinstance(event, kind):
            state = evolve(state, event)
    return state


# --- decide -----------------------------------------------------------------------------------


def decide_source(existing: MemorySource | None, registration: ev.MemorySourceRegistered
                  ) -> list[ev.DomainEvent]:
    """``[registration]``, or nothing when it would restate the recorded source."""
    if existing is None:
        return [registration]
    _owned("memory source", registration.source_id, (existing.agent_id, existing.owner_id),
           (registration.agent_id, registration.owner_id))
    same = (existing.source_type, existing.name, existing.description) == (
        registration.source_type, registration.name, registration.description)
    return [] if same else [registration]


@attrs.frozen(kw_only=True)
class SaveJob:
    """Create or update a job. ``memory_source_id=None``: keep the job's source, or its own."""

    at: datetime
    job_id: str
    agent_id: str
    owner_id: str
    name: str
    schedule: str
    prompt: str
    memory_source_id: str | None = None
    enabled: bool = True

    @classmethod
    def checked(cls, *, at: datetime, job_id: str, agent_id: str, owner_id: str, name: str, schedule: str,
                prompt: str, memory_source_id: str | None = None, enabled: bool = True) -> SaveJob:
        ids = (check_identifier(job_id, "job_id"), check_identifier(agent_id, "agent_id"),
               check_identifier(owner_id, "owner_id"))
        name = check_job_text(name, "name", MAX_NAME_CHARS, required=True, one_line=True)
        schedule = check_job_text(schedule, "schedule", MAX_SCHEDULE_CHARS, required=True, one_line=True)
        prompt = check_job_text(prompt, "prompt", MAX_PROMPT_CHARS)
        if not isinstance(enabled, bool):
            raise InvalidJob(f"enabled must be true or false, got {type(enabled).__name__}")
        if memory_source_id is not None:
            check_identifier(memory_source_id, "memory_source_id")
        return cls(at=at, job_id=ids[0], agent_id=ids[1], owner_id=ids[2], name=name, schedule=schedule,
                   prompt=prompt, memory_source_id=memory_source_id, enabled=enabled)

    def source_to_load(self) -> str:
        """The source the decision needs: the given one, else the job's own."""
        return self.memory_source_id if self.memory_source_id is not None else job_source_id(self.job_id)


def decide_save_job(job: ScheduledJob | None, source: MemorySource | None, cmd: SaveJob) -> list[ev.DomainEvent]:
    """The events saving ``cmd`` records: the job's own source (when it gets one) and the job,
    each only when it changes. ``source`` is the one named by :meth:`SaveJob.source_to_load`;
    a given source must exist (the caller says so) and belong to the same agent/owner."""
    who = (cmd.agent_id, cmd.owner_id)
    if job is not None:
        _owned("job", cmd.job_id, (job.agent_id, job.owner_id), who)
    events: list[ev.DomainEvent] = []
    if cmd.memory_source_id is not None:
        if source is None:
            raise UnknownSource(f"no memory source {cmd.memory_source_id!r}; register it first")
        _owned("memory source", cmd.memory_source_id, (source.agent_id, source.owner_id), who)
        source_id = cmd.memory_source_id
    elif job is not None and job.memory_source_id != job_source_id(cmd.job_id):
        source_id = job.memory_source_id  # re-saving must not orphan the memory the job already has
    else:
        source_id = job_source_id(cmd.job_id)
        if len(source_id) > MAX_ID_CHARS:
            raise InvalidJob(f"job_id is too long to derive its memory source id (max "
                             f"{MAX_ID_CHARS - len(JOB_SOURCE_PREFIX)} characters)")
        events += decide_source(source, ev.MemorySourceRegistered(
            at=cmd.at, source_id=source_id, agent_id=cmd.agent_id, owner_id=cmd.owner_id,
            source_type=JOB_SOURCE_TYPE, name=cmd.name, description=f"Memory of scheduled job {cmd.job_id}"))
    fields = (cmd.name, cmd.schedule, cmd.prompt, source_id, cmd.enabled)
    if job is None or fields != (job.name, job.schedule, job.prompt, job.memory_source_id, job.enabled):
        events.append(ev.ScheduledJobSaved(at=cmd.at, job_id=cmd.job_id, agent_id=cmd.agent_id,
                                           owner_id=cmd.owner_id, name=cmd.name, schedule=cmd.schedule,
                                           prompt=cmd.prompt, memory_source_id=source_id, enabled=cmd.enabled))
    return events


@attrs.frozen(kw_only=True)
class ReportRun:
    """A run's start (``running``) or its end (``succeeded`` / ``failed``), as reported."""

    at: datetime
    run_id: str
    job_id: str
    status: JobStatus
    started_at: datetime
    finished_at: datetime | None = None
    output: str = ""
    error: str = ""

    @classmethod
    def checked(cls, *, at: datetime, run_id: str, job_id: str, status: object, started_at: object,
                finished_at: object = None, output: object = "", error: object = "") -> ReportRun:
        check_identifier(run_id, "run_id")
        check_identifier(job_id, "job_id")
        state = check_status(status)
        started = check_aware(started_at, "started_at")
        finished = None
        if finished_at is not None:
            finished = check_aware(finished_at, "finished_at")
            if not state.finished:
                raise InvalidJob("a running job run has no finished_at")
            if finished < started:
                raise InvalidJob("finished_at is before started_at")
        return cls(at=at, run_id=run_id, job_id=job_id, status=state, started_at=started, finished_at=finished,
                   output=check_job_text(output, "output", MAX_RUN_TEXT_CHARS),
                   error=check_job_text(error, "error", MAX_RUN_TEXT_CHARS))


def decide_run_report(run: JobRun | None, cmd: ReportRun) -> list[ev.DomainEvent]:
    """A run belongs to one job, keeps its ``started_at``, and once finished cannot change. A
    finished report without ``finished_at`` ends now (a repeated one restates the recorded end);
    a repeated report, or a late ``running`` after the end, records nothing."""
    finished_at = cmd.finished_at
    if cmd.status.finished and finished_at is None:
        finished_at = run.finished_at if run and run.finished_at else max(cmd.at, cmd.started_at)
    if run is not None:
        if run.job_id != cmd.job_id:
            raise IdentifierInUse(f"job run {cmd.run_id!r} already belongs to job {run.job_id!r}")
        if run.started_at != cmd.started_at:
            raise InvalidJob(f"job run {cmd.run_id!r} started at {run.started_at.isoformat()}; that cannot change")
        same = (run.status, run.finished_at, run.output, run.error) == (cmd.status, finished_at, cmd.output,
                                                                        cmd.error)
        if same or (run.status.finished and not cmd.status.finished):
            return []
        if run.status.finished:
            raise InvalidJob(f"job run {cmd.run_id!r} already finished as {run.status.value}")
    return [ev.JobRunRecorded(at=cmd.at, run_id=cmd.run_id, job_id=cmd.job_id, status=cmd.status.value,
                              started_at=cmd.started_at, finished_at=finished_at, output=cmd.output,
                              error=cmd.error)]


def decide_run_claim(job: ScheduledJob, run: JobRun | None, cmd: ReportRun) -> list[ev.DomainEvent]:
    """Claim a run of ``job`` (``cmd`` reports it ``running``): ``[its start]`` when no run of
    that id is recorded and the job is enabled; nothing when the run is already recorded (another
    process claimed it: whoever records a run id first runs it) or the job is disabled. A run id
    of another job is refused, as for any report."""
    if cmd.status is not JobStatus.RUNNING or cmd.finished_at is not None:
        raise InvalidJob("a claim starts a run: its status is running")
    if run is not None:
        if run.job_id != cmd.job_id:
            raise IdentifierInUse(f"job run {cmd.run_id!r} already belongs to job {run.job_id!r}")
        return []
    if not job.enabled:
        return []
    return decide_run_report(None, cmd)
