"""Read side of ``memory_sources``, ``scheduled_jobs`` and ``job_runs`` (the ``JobQueries`` port)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fermix_memory.adapters.sql.read_side import ReadSide, clamp_limit
from fermix_memory.adapters.sql.rows import optional_time
from fermix_memory.domain.jobs import JobRun, JobStatus, MemorySource, ScheduledJob

SOURCE_COLUMNS = "id, agent_id, owner_id, source_type, name, description, created_at, updated_at"
JOB_COLUMNS = "id, agent_id, owner_id, name, schedule, prompt, memory_source_id, enabled, created_at, updated_at"
RUN_COLUMNS = "id, job_id, status, started_at, finished_at, output, error"


def source_from_row(row: tuple[Any, ...]) -> MemorySource:
    return MemorySource(id=row[0], agent_id=row[1], owner_id=row[2], source_type=row[3], name=row[4],
                        description=row[5], created_at=datetime.fromisoformat(row[6]),
                        updated_at=datetime.fromisoformat(row[7]))


def job_from_row(row: tuple[Any, ...]) -> ScheduledJob:
    return ScheduledJob(id=row[0], agent_id=row[1], owner_id=row[2], name=row[3], schedule=row[4], prompt=row[5],
                        memory_source_id=row[6], enabled=bool(row[7]), created_at=datetime.fromisoformat(row[8]),
                        updated_at=datetime.fromisoformat(row[9]))


def run_from_row(row: tuple[Any, ...]) -> JobRun:
    return JobRun(id=row[0], job_id=row[1], status=JobStatus(row[2]), started_at=datetime.fromisoformat(row[3]),
                  finished_at=optional_time(row[4]), output=row[5],
                  error=row[6])


class SqlJobQueries(ReadSide):
    """Implements ``JobQueries`` on this thread's read connection."""

    def memory_source(self, source_id: str) -> MemorySource | None:
        rows = self._rows(f"SELECT {SOURCE_COLUMNS} FROM memory_sources WHERE id = ?", (source_id,))
        return source_from_row(rows[0]) if rows else None

    def memory_sources(self, agent_id: str, owner_id: str, *, limit: int | None = None) -> list[MemorySource]:
        rows = self._rows(
            f"SELECT {SOURCE_COLUMNS} FROM memory_sources WHERE agent_id = ? AND owner_id = ?"
            " ORDER BY created_at, id LIMIT ?",
            (agent_id, owner_id, clamp_limit(limit)),
        )
        return [source_from_row(r) for r in rows]

    def job(self, job_id: str) -> ScheduledJob | None:
        rows = self._rows(f"SELECT {JOB_COLUMNS} FROM scheduled_jobs WHERE id = ?", (job_id,))
        return job_from_row(rows[0]) if rows else None

    def jobs(self, agent_id: str, owner_id: str) -> list[ScheduledJob]:
        rows = self._rows(
            f"SELECT {JOB_COLUMNS} FROM scheduled_jobs WHERE agent_id = ? AND owner_id = ? ORDER BY created_at, id",
            (agent_id, owner_id),
        )
        return [job_from_row(r) for r in rows]

    def job_run(self, run_id: str) -> JobRun | None:
        rows = self._rows(f"SELECT {RUN_COLUMNS} FROM job_runs WHERE id = ?", (run_id,))
        return run_from_row(rows[0]) if rows else None

    def job_runs(self, job_id: str, *, limit: int | None = None) -> list[JobRun]:
        # Served by the (job_id, started_at) index.
        rows = self._rows(
            f"SELECT {RUN_COLUMNS} FROM job_runs WHERE job_id = ? ORDER BY started_at DESC, id DESC LIMIT ?",
            (job_id, clamp_limit(limit)),
        )
        return [run_from_row(r) for r in rows]
