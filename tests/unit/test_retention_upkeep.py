"""The background looks of retention (application.retention_upkeep): one job at open and one every
``check_every_s`` on the worker, a run only when something is due, nothing after stop."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.errors import StorageError
from fermix_memory.application.retention import RetentionReport
from fermix_memory.application.retention_upkeep import JOB_KEY, RetentionUpkeep
from tests.waits import until

NOW = datetime(2026, 3, 1, tzinfo=UTC)


class Clock:
    def now(self) -> datetime:
        return NOW


class FakeRetention:
    """Due on the looks named in ``due``; records the threads it ran on."""

    def __init__(self, due: set[int], fail: bool = False) -> None:
        self.looks, self.runs, self.threads = 0, 0, set[str]()
        self.due, self.fail = due, fail

    def due_now(self, now: datetime) -> bool:
        self.looks += 1
        self.threads.add(threading.current_thread().name)
        if self.fail:
            raise StorageError("the disk is full")
        return self.looks in self.due

    def run(self, now: datetime, *, dry_run: bool = False) -> RetentionReport:
        self.runs += 1
        return RetentionReport(at=now, dry_run=False, items=[])


class Queue:
    def __init__(self) -> None:
        self.keys: list[Any] = []

    def submit(self, key: Any, job: Any) -> None:
        self.keys.append(key)
        job()


def test_it_looks_at_open_and_every_interval_and_runs_only_when_due() -> None:
    retention, worker = FakeRetention(due={2}), BackgroundWorker("test-retention")
    upkeep = RetentionUpkeep(retention, worker, Clock(), every_s=0.01)  # type: ignore[arg-type]
    try:
        upkeep.start(delay_s=0)
        until(lambda: retention.looks >= 3, "three looks")
        upkeep.stop()
        until(worker.idle, "the worker idle")
        looks = retention.looks
        assert retention.runs == 1 and retention.threads == {"test-retention"}  # on the worker, never the caller
        assert upkeep.run_due() is None and retention.looks == looks  # stopped: no look any more
    finally:
        worker.close()


def test_a_stop_before_the_first_look_queues_nothing() -> None:
    queue = Queue()
    upkeep = RetentionUpkeep(FakeRetention(due={1}), queue, Clock(), every_s=0.01)  # type: ignore[arg-type]
    upkeep.start(delay_s=60)
    upkeep.stop()
    upkeep.start(delay_s=0)  # stopped for good
    assert queue.keys == []


def test_a_look_queues_the_retention_job_and_a_failure_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    queue, retention = Queue(), FakeRetention(due=set(), fail=True)
    upkeep = RetentionUpkeep(retention, queue, Clock(), every_s=3600)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        upkeep.start(delay_s=0)
        until(lambda: queue.keys == [JOB_KEY], "one look")
        until(lambda: "the disk is full" in caplog.text, "the failure's warning")  # logged after the queueing
    upkeep.stop()
    assert "the retention run did not finish" in caplog.text and "the disk is full" in caplog.text
    assert retention.runs == 0
