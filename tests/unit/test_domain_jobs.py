"""Memory sources, jobs and runs: given an aggregate's events, when a command, then the events;
the exact text limits, which characters a one-line field refuses, the error type of malformed
text and the defaults of a job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fermix_memory.domain import events as ev
from fermix_memory.domain import jobs
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.values import MAX_ID_CHARS

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)


def source(name: str = "Feed", *, owner: str = "alice", source_id: str = "src", at: datetime = T0
           ) -> ev.MemorySourceRegistered:
    return ev.MemorySourceRegistered(at=at, source_id=source_id, agent_id="ada", owner_id=owner, source_type="feed",
                                     name=name)


def save(**kw: Any) -> jobs.SaveJob:
    fields: dict[str, Any] = {"at": T1, "job_id": "daily", "agent_id": "ada", "owner_id": "alice",
                              "name": "Digest", "schedule": "0 9 * * *", "prompt": "Summarise"}
    return jobs.SaveJob.checked(**{**fields, **kw})


def run(status: str, **kw: Any) -> jobs.ReportRun:
    return jobs.ReportRun.checked(at=T1, run_id="r1", job_id="daily", status=status, started_at=T0, **kw)


def fold_job(*events: ev.DomainEvent) -> jobs.ScheduledJob | None:
    return jobs.fold(jobs.evolve_job, events, ev.ScheduledJobSaved)


def fold_run(*events: ev.DomainEvent) -> jobs.JobRun | None:
    return jobs.fold(jobs.evolve_run, events, ev.JobRunRecorded)


def test_a_source_keeps_its_first_owner_and_time_and_a_restatement_records_nothing() -> None:
    state = jobs.fold(jobs.evolve_source, [source(), source("Renamed", at=T1)], ev.MemorySourceRegistered)
    assert state is not None and (state.name, state.created_at, state.updated_at) == ("Renamed", T0, T1)
    assert jobs.decide_source(state, source("Renamed", at=T1)) == []
    assert jobs.decide_source(None, source()) == [source()]
    with pytest.raises(jobs.IdentifierInUse):
        jobs.decide_source(state, source(owner="mallory"))


def test_a_new_job_gets_its_own_source_and_a_resave_records_nothing() -> None:
    events = jobs.decide_save_job(None, None, save())
    assert [type(e) for e in events] == [ev.MemorySourceRegistered, ev.ScheduledJobSaved]
    own, saved = events
    assert isinstance(own, ev.MemorySourceRegistered) and own.source_id == "job:daily"
    assert isinstance(saved, ev.ScheduledJobSaved) and saved.memory_source_id == "job:daily"
    own_source = jobs.fold(jobs.evolve_source, events, ev.MemorySourceRegistered)
    assert jobs.decide_save_job(fold_job(*events), own_source, save()) == []


def test_a_job_keeps_a_source_it_was_given_and_refuses_another_owners_source_or_job() -> None:
    given = jobs.evolve_source(None, source())
    [saved] = jobs.decide_save_job(None, given, save(memory_source_id="src"))
    job = fold_job(saved)
    assert job is not None and job.memory_source_id == "src"
    [resaved] = jobs.decide_save_job(job, None, save(schedule="hourly"))  # no source named: keeps "src"
    assert isinstance(resaved, ev.ScheduledJobSaved) and resaved.memory_source_id == "src"
    with pytest.raises(jobs.IdentifierInUse):
        jobs.decide_save_job(None, jobs.evolve_source(None, source(owner="mallory")), save(memory_source_id="src"))
    with pytest.raises(jobs.IdentifierInUse):
        jobs.decide_save_job(job, None, save(owner_id="mallory"))
    with pytest.raises(jobs.UnknownSource):
        jobs.decide_save_job(None, None, save(memory_source_id="nowhere"))


@pytest.mark.parametrize(("fields", "error"), [
    ({"name": " "}, jobs.InvalidJob), ({"schedule": "a\nb"}, jobs.InvalidJob), ({"enabled": "yes"}, jobs.InvalidJob),
    ({"job_id": ""}, InvalidIdentifier), ({"job_id": "j" * 254}, jobs.InvalidJob),
])
def test_malformed_jobs_are_refused_with_a_typed_error(fields: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        jobs.decide_save_job(None, None, save(**fields))


def test_a_run_starts_ends_once_and_then_cannot_change() -> None:
    [started] = jobs.decide_run_report(None, run("running"))
    state = fold_run(started)
    [ended] = jobs.decide_run_report(state, run("succeeded", output="ok"))
    assert isinstance(ended, ev.JobRunRecorded) and ended.finished_at == T1  # no finished_at: ends now
    done = fold_run(started, ended)
    assert jobs.decide_run_report(done, run("succeeded", output="ok")) == []  # a repeated report
    assert jobs.decide_run_report(done, run("running")) == []  # a late "running" after the end
    with pytest.raises(jobs.InvalidJob):
        jobs.decide_run_report(done, run("failed", error="late"))


def test_only_the_first_claim_of_a_run_starts_it_and_a_disabled_job_is_not_claimed() -> None:
    job = fold_job(*jobs.decide_save_job(None, None, save()))
    assert job is not None
    [started] = jobs.decide_run_claim(job, None, run("running"))
    assert isinstance(started, ev.JobRunRecorded) and (started.status, started.started_at) == ("running", T0)
    claimed = fold_run(started)
    assert jobs.decide_run_claim(job, claimed, run("running")) == []  # another claimant: not its run
    later = jobs.ReportRun.checked(at=T1, run_id="r1", job_id="daily", status="running", started_at=T1)
    assert jobs.decide_run_claim(job, claimed, later) == []  # whatever start it would give
    done = fold_run(started, *jobs.decide_run_report(claimed, run("succeeded")))
    assert jobs.decide_run_claim(job, done, run("running")) == []  # a finished run is not run again
    other = fold_job(*jobs.decide_save_job(None, None, save(job_id="other")))
    assert other is not None
    with pytest.raises(jobs.IdentifierInUse):  # a run id of another job
        jobs.decide_run_claim(other, claimed, jobs.ReportRun.checked(
            at=T1, run_id="r1", job_id="other", status="running", started_at=T0))
    with pytest.raises(jobs.InvalidJob):
        jobs.decide_run_claim(job, None, run("succeeded"))
    paused = fold_job(*jobs.decide_save_job(None, None, save(enabled=False)))
    assert paused is not None and jobs.decide_run_claim(paused, None, run("running")) == []


def test_a_run_keeps_its_job_and_start_and_checks_its_times() -> None:
    state = fold_run(*jobs.decide_run_report(None, run("running")))
    with pytest.raises(jobs.IdentifierInUse):
        jobs.decide_run_report(state, jobs.ReportRun.checked(at=T1, run_id="r1", job_id="other", status="running",
                                                             started_at=T0))
    with pytest.raises(jobs.InvalidJob):
        jobs.decide_run_report(state, jobs.ReportRun.checked(at=T1, run_id="r1", job_id="daily", status="running",
                                                             started_at=T1))
    for bad in ({"status": "done"}, {"finished_at": T0 - timedelta(seconds=1), "status": "failed"},
                {"finished_at": T1, "status": "running"}, {"started_at": T0.replace(tzinfo=None)}):
        with pytest.raises(jobs.InvalidJob):
            jobs.ReportRun.checked(**{"at": T1, "run_id": "r1", "job_id": "daily", "status": "running",
                                      "started_at": T0, **bad})


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
