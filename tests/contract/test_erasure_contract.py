"""The ``Erasure`` port: which agents hold an owner, which events may carry their content,
redaction inside a write, and the scrub that finishes an erasure."""

from __future__ import annotations

from typing import Any

import pytest

from fermix_memory.application.forget import Forgetting
from fermix_memory.domain import events as ev
from tests.contract.conftest import (
    AT,
    FixedClock,
    Ports,
    added,
    at,
    forgotten,
    job_saved,
    message,
    prompt_files,
    review_key,
    revised,
    source_registered,
)


def test_agents_of_owner_are_those_holding_anything_of_theirs(ports: Ports) -> None:
    assert ports.erase(lambda tx, e: e.agents_of_owner("alice")) == []
    ports.append("conversation/a", message(agent="ada"))
    ports.append("memory/bea/alice", added(agent="bea"))
    ports.append("resource/cy/alice", revised(1, "# alice", agent="cy"))
    ports.append("review/dee/alice", ev.ReviewSkipped(at=AT, reason="too_soon", **review_key(agent="dee")))
    ports.append("job/j", job_saved())  # agent ada
    ports.append("source/s", source_registered(agent="eve"))
    ports.append("conversation/b", message(agent="fay", owner="bob"))
    assert ports.erase(lambda tx, e: e.agents_of_owner("alice")) == ["ada", "bea", "cy", "dee", "eve"]
    assert ports.erase(lambda tx, e: e.agents_of_owner("bob")) == ["fay"]


def test_erasure_candidates_hold_every_event_naming_the_owner_and_every_event_of_the_kinds(ports: Ports) -> None:
    mine = ports.append("conversation/a", message("hi"), message("quoting", owner="bob", quoted=("alice",)))
    [row] = ports.append("memory/ada/alice", added())
    ports.append("conversation/c", message("unrelated", agent="eve", owner="bob"))  # a store may list it or not
    [archive] = ports.append("memory/ada/alice", ev.MemoryArchived(
        at=at(1), memory_id=row, archived_by="test", reason="", provenance=ev.Provenance(agent_id="x", owner_id="y")))

    def candidates(tx: Any, e: Any) -> list[int]:
        return [r.position for r in e.erasure_candidates("alice", {"memory.archived"})]

    found = ports.erase(candidates)
    assert set(mine) | {row, archive} <= set(found)
    assert found == sorted(found)  # log order


def test_redact_hides_payloads_from_every_read_and_keeps_the_stream_versions(ports: Ports) -> None:
    first, second, third = ports.append("conversation/a", message("one"), message("secret"), message("three"))

    assert ports.erase(lambda tx, e: e.redact([second])) == 1
    assert [r.position for r in ports.store.read_events()] == [first, third]
    assert [r.position for r in ports.store.read_events(stream="conversation/a")] == [first, third]
    stream = ports.write(lambda tx: tx.read_stream("conversation/a"))
    assert stream.version == 3 and [r.version for r in stream.events] == [1, 3]
    assert ports.store.last_position() == 3
    assert ports.append("conversation/a", message("four")) == [4]
    assert ports.write(lambda tx: tx.read_stream("conversation/a")).version == 4
    assert ports.erase(lambda tx, e: [r.position for r in e.erasure_candidates("alice", set())]) == [first, third, 4]


def test_redact_nothing_is_a_no_op(ports: Ports) -> None:
    ports.append("conversation/a", message("one"))
    assert ports.erase(lambda tx, e: e.redact([])) == 0
    assert not ports.erasure.scrub_pending()
    assert len(list(ports.store.read_events())) == 1


def test_a_redaction_is_pending_a_scrub_until_one_succeeds(ports: Ports) -> None:
    [position] = ports.append("conversation/a", message("secret"))
    assert not ports.erasure.scrub_pending()
    ports.erase(lambda tx, e: e.redact([position]))
    assert ports.erasure.scrub_pending()
    report = ports.erasure.scrub()
    assert report.wal_truncated and report.bytes_before >= 0 and report.bytes_after >= 0
    assert not ports.erasure.scrub_pending()
    assert list(ports.store.read_events()) == []


def test_a_failing_erasure_redacts_nothing(ports: Ports) -> None:
    [position] = ports.append("conversation/a", message("kept"))

    def work(tx: Any, e: Any) -> None:
        e.redact([position])
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        ports.erase(work)
    assert [r.event.content for r in ports.store.read_events()] == ["kept"]
    assert not ports.erasure.scrub_pending()


def test_an_erasure_redacts_and_records_in_one_write(ports: Ports) -> None:
    [msg] = ports.append("conversation/a", message("secret"))
    [row] = ports.append("memory/ada/alice", added())

    def work(tx: Any, e: Any) -> list[int]:
        e.redact([msg, row])
        return tx.append("owner/ada/alice", [forgotten((msg, row))], expected_version=0)  # type: ignore[no-any-return]

    [record] = ports.erase(work)
    assert [r.position for r in ports.store.read_events()] == [record]
    assert ports.write(lambda tx: (tx.by_id(row), tx.last_message_id("ada", message().conversation))) == (None, 0)
    assert ports.erase(lambda tx, e: e.agents_of_owner("alice")) == []
    assert ports.store.last_positions("owner/") == {"owner/ada/alice": record}


def test_forgetting_an_owner_erases_the_same_events_on_every_store(ports: Ports) -> None:
    said = ports.append("conversation/a", message("I live in Paris"), message("Bob here", owner="bob"))
    [row] = ports.append("memory/ada/alice", added())
    ports.append("memory/ada/bob", added(owner="bob"))
    forgetting = Forgetting(ports.store, ports.erasure, prompt_files(ports), FixedClock())

    report = forgetting.forget_owner("alice")
    assert report.erased_events == {"ada": 2}
    assert not ports.erasure.scrub_pending()
    readable = [r.event for r in ports.store.read_events()]
    assert [e.kind for e in readable] == ["message.appended", "memory.added", "owner.forgotten"]
    assert readable[0].owner_id == "bob" and readable[2].redacted_positions == (said[0], row)
    assert ports.load("memories_of", "ada", "alice") == [] and len(ports.load("memories_of", "ada", "bob")) == 1
    again = forgetting.forget_owner("alice")
    assert again.erased_events == {} and ports.store.last_position() == 5
