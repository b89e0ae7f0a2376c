"""Pins for domain/jobs.py: the exact text limits, which characters a one-line field refuses,
the error type of malformed text and the defaults of a job."""

from __future__ import annotations

from typing import Any

import pytest

from fermix_memory.domain import events as ev
from fermix_memory.domain import jobs
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.values import MAX_ID_CHARS
from tests.unit.test_domain_jobs import T0, T1, run, save


def refused(**kw: Any) -> None:
    with pytest.raises(jobs.InvalidJob):
        save(**kw)


def test_job_text_limits() -> None:
    assert (jobs.MAX_NAME_CHARS, jobs.MAX_DESCRIPTION_CHARS, jobs.MAX_SCHEDULE_CHARS, jobs.MAX_PROMPT_CHARS,
            jobs.MAX_RUN_TEXT_CHARS) == (200, 2_000, 256, 20_000, 100_000)
    assert save(name="n" * 200).name == "n" * 200
    refused(name="n" * 201)
    assert save(schedule="s" * 256).schedule == "s" * 256
    refused(schedule="s" * 257)
    assert save(prompt="p" * 20_000).prompt == "p" * 20_000
    refused(prompt="p" * 20_001)
    assert run("succeeded", output="o" * 100_000, error="e" * 100_000).output == "o" * 100_000
    with pytest.raises(jobs.InvalidJob):
        run("succeeded", output="o" * 100_001)
    with pytest.raises(jobs.InvalidJob):
        run("failed", error="e" * 100_001)


def test_a_description_is_checked_at_2000_characters() -> None:
    assert jobs.check_job_text("d" * 2_000, "description", jobs.MAX_DESCRIPTION_CHARS) == "d" * 2_000
    with pytest.raises(jobs.InvalidJob):
        jobs.check_job_text("d" * 2_001, "description", jobs.MAX_DESCRIPTION_CHARS)


def test_malformed_text_is_an_invalid_job() -> None:
    for bad in (3, None, "a\x00b", "\ud800"):
        with pytest.raises(jobs.InvalidJob):
            jobs.check_job_text(bad, "prompt", 10)
    refused(name=3)
    refused(prompt=None)


def test_one_line_fields_refuse_c0_controls_and_delete_only() -> None:
    for bad in ("\x01", "\x1f", "\t", "\n", "\x7f"):
        refused(name=f"a{bad}b")
        refused(schedule=f"0 9{bad}* * *")
    for fine in (" ", "~", "\x80", "\u00e9"):
        assert save(name=f"a{fine}b").name == f"a{fine}b"
    assert jobs.check_job_text("a\x1fb\x7f", "what", 10) == "a\x1fb\x7f"  # only when asked for one line
    assert save(prompt="line one\nline two\x1f").prompt == "line one\nline two\x1f"


def test_a_job_is_enabled_unless_said_otherwise() -> None:
    job = jobs.ScheduledJob(id="j", agent_id="a", owner_id="o", name="n", schedule="s", prompt="p",
                            memory_source_id="job:j", created_at=T0, updated_at=T1)
    assert job.enabled is True
    assert save().enabled is True


def test_a_schedule_must_not_be_blank_and_a_given_source_id_must_be_an_identifier() -> None:
    refused(schedule="   ")
    with pytest.raises(InvalidIdentifier):
        save(memory_source_id="bad\x00id")
    assert save(memory_source_id="src").source_to_load() == "src"
    assert save().source_to_load() == "job:daily"


def test_a_save_command_is_enabled_and_uses_its_own_source_by_default() -> None:
    cmd = jobs.SaveJob(at=T1, job_id="j", agent_id="a", owner_id="o", name="n", schedule="s", prompt="p")
    assert cmd.enabled is True and cmd.memory_source_id is None


def test_a_job_id_may_be_as_long_as_its_source_id_allows() -> None:
    longest = "j" * (MAX_ID_CHARS - len(jobs.JOB_SOURCE_PREFIX))
    [own, _] = jobs.decide_save_job(None, None, save(job_id=longest))
    assert isinstance(own, ev.MemorySourceRegistered) and len(own.source_id) == MAX_ID_CHARS
    with pytest.raises(jobs.InvalidJob):
        jobs.decide_save_job(None, None, save(job_id=longest + "j"))


def test_run_ids_are_checked_and_a_run_may_end_when_it_starts() -> None:
    for ids in ({"run_id": "r\x00"}, {"job_id": "j\x00"}):
        with pytest.raises(InvalidIdentifier):
            jobs.ReportRun.checked(**{"at": T1, "run_id": "r1", "job_id": "daily", "status": "running",
                                      "started_at": T0, **ids})
    assert run("succeeded", finished_at=T0).finished_at == T0


def test_a_running_report_has_no_end() -> None:
    [recorded] = jobs.decide_run_report(None, run("running"))
    assert isinstance(recorded, ev.JobRunRecorded) and recorded.finished_at is None
    [ended] = jobs.decide_run_report(None, run("failed"))
    assert isinstance(ended, ev.JobRunRecorded) and ended.finished_at == T1
