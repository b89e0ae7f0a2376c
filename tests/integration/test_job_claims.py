"""Scheduled jobs claimed by several processes sharing one memory: whichever process claims a due
run first runs it, and every run is run exactly once.

Four real processes, started together, each claim every due run of the same jobs: on one SQLite
file (one home), and on one PostgreSQL database (each process with a home of its own, as replicas
on several hosts would be)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.jobs import JobStatus
from fermix_memory.domain import events as ev
from tests.integration.store_reads import store_reads
from tests.integration.test_reviewer_processes import child_env, wait_for
from tests.waits import HANG_GUARD_S

pytestmark = pytest.mark.usefixtures("every_store")  # one SQLite file, then one PostgreSQL database

AGENT, OWNER = "ada", "alice"
SLOT = "2026-12-01T09:00Z"
JOBS = [f"job-{n}" for n in range(12)]
PAUSED = "job-paused"
PROCESSES = 4

# Opens the memory, says it is ready, waits for the "go" file (so that the four processes claim at
# once), then claims the run of each due job for this slot and runs those it claimed.
CLAIMER = """
import json, sys, time
from pathlib import Path
from fermix_memory import MemorySystem
home, ready, go, worker, slot = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], sys.argv[5]
ran = []
with MemorySystem.open(home) as memory:
    ready.touch()
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    for job_id in sys.argv[6:]:
        run_id = f"{job_id}@{slot}"
        run = memory.claim_job_run(run_id=run_id, job_id=job_id)
        if run is not None:
            memory.record_job_run(run_id=run_id, job_id=job_id, status="succeeded", started_at=run.started_at,
                                  output=f"ran by {worker}")
            ran.append(run_id)
print(json.dumps(ran))
"""


def test_four_processes_claiming_the_same_due_jobs_run_each_exactly_once(tmp_path: Path, every_store: str) -> None:
    homes = [tmp_path / (f"host-{n}" if every_store == "postgres" else "home") for n in range(PROCESSES)]
    with MemorySystem.open(homes[0]) as memory:
        for job_id in JOBS:
            memory.save_job(job_id=job_id, agent_id=AGENT, owner_id=OWNER, name=job_id, schedule="0 9 * * *",
                            prompt="Summarise")
        memory.save_job(job_id=PAUSED, agent_id=AGENT, owner_id=OWNER, name="paused", schedule="0 9 * * *",
                        prompt="Summarise", enabled=False)
    go = tmp_path / "go"
    children = []
    for n, home in enumerate(homes):
        ready = tmp_path / f"ready-{n}"
        argv = [sys.executable, "-c", CLAIMER, str(home), str(ready), str(go), f"worker-{n}", SLOT, *JOBS, PAUSED]
        children.append((ready, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                                 env=child_env())))
    wait_for(lambda: all(ready.exists() or child.poll() is not None for ready, child in children))
    go.touch()
    results = [(*child.communicate(timeout=HANG_GUARD_S), child.returncode) for _, child in children]

    for _out, err, code in results:
        assert code == 0, err
    ran = {f"worker-{n}": json.loads(out) for n, (out, _, _) in enumerate(results)}
    claims = Counter(run_id for runs in ran.values() for run_id in runs)
    due = {f"{job_id}@{SLOT}" for job_id in JOBS}
    assert set(claims) == due and set(claims.values()) == {1}, ran  # each due run by one process, once

    with MemorySystem.open(homes[-1]) as memory:
        assert memory.verify().ok
        recorded = [r.event for r in memory.events() if isinstance(r.event, ev.JobRunRecorded)]
    starts = Counter(e.run_id for e in recorded if e.status == "running")
    assert starts == Counter(due), "one start recorded per run, none for the paused job"
    for worker, runs in ran.items():
        ended = {e.run_id for e in recorded if e.status == "succeeded" and e.output == f"ran by {worker}"}
        assert ended == set(runs), worker
    with store_reads(homes[-1]) as tables:
        for job_id in JOBS:
            [run] = tables.jobs.job_runs(job_id)
            assert (run.id, run.status) == (f"{job_id}@{SLOT}", JobStatus.SUCCEEDED)
        assert tables.jobs.job_runs(PAUSED) == []
