"""Pins for domain/jobs.py: the exact text limits, which characters a one-line field refuses,
the error type of malformed text and the defaults of a job."""

from __future__ import annotations

from typing import Any

import pytest

from fermix_memory.domain import jobs
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
