"""What an event records when its writer leaves an optional field out: every default of the
provenance and of a job run, written out as literals (a changed default changes stored events)."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.values import Trust

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_a_provenance_names_only_its_agent_and_owner_by_default() -> None:
    who = ev.Provenance(agent_id="ada", owner_id="alice")
    assert attrs.asdict(who, recurse=False) == {
        "agent_id": "ada", "owner_id": "alice", "trust": Trust.GUEST, "source_type": "", "source_id": "",
        "session_id": "", "run_id": "", "source_message_id": None, "reason": "", "source_message_ids": None,
        "dropped_source_message_ids": ()}
    assert who.source_id == ""


def test_a_job_run_has_no_output_no_error_and_no_end_by_default() -> None:
    run = ev.JobRunRecorded(at=AT, run_id="r1", job_id="j1", status="running", started_at=AT)
    assert (run.output, run.error, run.finished_at) == ("", "", None)
    assert run.output == ""
