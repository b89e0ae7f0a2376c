"""The embedding API, memory sources and scheduled jobs: what a host saves, claims, records and
reads back (the job scope of R-SCOPE; application/jobs.py)."""

from __future__ import annotations

from typing import Any

# Aliased: ``jobs`` is also the name of a read below.
from fermix_memory.application import jobs as job_cases
from fermix_memory.application.jobs import JobRun, MemorySource, ScheduledJob
from fermix_memory.domain.values import check_identifier, check_int
from fermix_memory.entrypoints.api.base import ApiBase, check_owner


def _limit(limit: object) -> int | None:
    """``None`` (no limit) or a whole number of at least 0 (:class:`InvalidNumber` otherwise)."""
    return None if limit is None else check_int(limit, "limit", minimum=0)


class JobsApi(ApiBase):
    """Memory sources, scheduled jobs and their runs. The host's scheduler runs the jobs; these
    methods record them and read them back (the reads work on a read-only open too)."""

    # --- writes ----------------------------------------------------------------------------------

    def register_memory_source(self, *, source_id: str, agent_id: str, owner_id: str, source_type: str,
                               name: str, description: str = "") -> str:
        """Register (or rename / redescribe) a memory source of one agent and owner; its id."""
        self._check_open()
        app = self._app
        return job_cases.register_memory_source(app.store, app.clock, source_id=source_id, agent_id=agent_id,
                                           owner_id=owner_id, source_type=source_type, name=name,
                                           description=description)

    def save_job(self, *, job_id: str, agent_id: str, owner_id: str, name: str, schedule: str, prompt: str,
                 memory_source_id: str | None = None, enabled: bool = True) -> ScheduledJob:
        """Save a scheduled job (and its job-scoped memory source, ``job:<job_id>``, if none given)."""
        self._check_open()
        app = self._app
        return job_cases.save_job(app.store, app.clock, job_id=job_id, agent_id=agent_id, owner_id=owner_id, name=name,
                             schedule=schedule, prompt=prompt, memory_source_id=memory_source_id, enabled=enabled)

    def claim_job_run(self, *, run_id: str, job_id: str, started_at: Any = None) -> JobRun | None:
        """Start run ``run_id`` of a due job unless any process sharing this memory already has:
        the run (``running``) when this call claimed it, ``None`` when it is another's or the job
        is disabled (do not run it). Report its end with :meth:`record_job_run`."""
        self._check_open()
        app = self._app
        return job_cases.claim_job_run(app.store, app.clock, run_id=run_id, job_id=job_id, started_at=started_at)

    def record_job_run(self, *, run_id: str, job_id: str, status: str, started_at: Any, finished_at: Any = None,
                       output: str = "", error: str = "") -> JobRun:
        """Record a run's start (``running``) or its end (``succeeded`` / ``failed``); the run."""
        self._check_open()
        app = self._app
        return job_cases.record_job_run(app.store, app.clock, run_id=run_id, job_id=job_id, status=status,
                                   started_at=started_at, finished_at=finished_at, output=output, error=error)

    # --- reads -----------------------------------------------------------------------------------

    def memory_source(self, source_id: str) -> MemorySource | None:
        """The memory source ``source_id``, ``None`` when none is registered."""
        self._check_open()
        return self._app.jobs.memory_source(check_identifier(source_id, "source_id"))

    def memory_sources(self, *, agent_id: str, owner_id: str, limit: int | None = None) -> list[MemorySource]:
        """The memory sources of one agent and owner (job sources too), oldest first, at most ``limit``."""
        self._check_open()
        check_owner(agent_id, owner_id)
        return self._app.jobs.memory_sources(agent_id, owner_id, limit=_limit(limit))

    def job(self, job_id: str) -> ScheduledJob | None:
        """The scheduled job ``job_id`` as last saved, ``None`` when none is saved."""
        self._check_open()
        return self._app.jobs.job(check_identifier(job_id, "job_id"))

    def jobs(self, *, agent_id: str, owner_id: str) -> list[ScheduledJob]:
        """The scheduled jobs of one agent and owner, disabled ones too, oldest first."""
        self._check_open()
        check_owner(agent_id, owner_id)
        return self._app.jobs.jobs(agent_id, owner_id)

    def job_run(self, run_id: str) -> JobRun | None:
        """The run ``run_id`` as last recorded, ``None`` when none is."""
        self._check_open()
        return self._app.jobs.job_run(check_identifier(run_id, "run_id"))

    def job_runs(self, job_id: str, *, limit: int | None = None) -> list[JobRun]:
        """The runs of job ``job_id``, newest first (by ``started_at``, then run id), at most ``limit``."""
        self._check_open()
        job_id = check_identifier(job_id, "job_id")
        return self._app.jobs.job_runs(job_id, limit=_limit(limit))
