"""The event log part of the storage port: appends and stream versions, expected-version
conflicts, reads in order and by stream, atomic writes, and concurrent writers."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import fermix_memory
from fermix_memory.application.errors import ConcurrencyConflict, IntegrityError, StorageError
from tests.contract.conftest import Ports, added, message, replaced

# --- append ---------------------------------------------------------------------------------


def test_append_returns_consecutive_log_positions_across_streams(ports: Ports) -> None:
    assert ports.append("a", message("one"), message("two")) == [1, 2]
    assert ports.append("b", message("three")) == [3]
    assert ports.store.last_position() == 3


def test_append_numbers_each_streams_versions_from_one(ports: Ports) -> None:
    ports.append("a", message("one"))
    ports.append("b", message("two"))
    ports.append("a", message("three"), message("four"))
    assert [(r.stream, r.version) for r in ports.store.read_events()] == [("a", 1), ("b", 1), ("a", 2), ("a", 3)]


def test_append_of_no_events_records_nothing(ports: Ports) -> None:
    assert ports.append("a") == []
    assert ports.store.last_position() == 0


def test_an_appended_event_reads_back_equal(ports: Ports) -> None:
    event = message("Zoë — 東京 \N{GRINNING FACE}")
    ports.append("a", event)
    [recorded] = ports.store.read_events()
    assert recorded.event == event and recorded.position == 1


# --- expected versions ------------------------------------------------------------------------


def test_append_at_the_expected_version_succeeds(ports: Ports) -> None:
    assert ports.append("a", message("one"), expected_version=0) == [1]
    assert ports.append("a", message("two"), message("three"), expected_version=1) == [2, 3]
    assert ports.append("a", message("four"), expected_version=3) == [4]


@pytest.mark.parametrize("expected", [0, 2, 5])
def test_append_at_another_version_raises_a_conflict_and_appends_nothing(ports: Ports, expected: int) -> None:
    ports.append("a", message("one"))
    with pytest.raises(ConcurrencyConflict):
        ports.append("a", message("two"), expected_version=expected)
    assert [r.event.content for r in ports.store.read_events()] == ["one"]


def test_a_conflict_is_a_storage_error(ports: Ports) -> None:
    assert issubclass(ConcurrencyConflict, StorageError)
    with pytest.raises(StorageError):
        ports.append("new", message(), expected_version=1)


def test_concurrency_conflict_is_exported_at_the_top_level(ports: Ports) -> None:
    assert fermix_memory.ConcurrencyConflict is ConcurrencyConflict and "ConcurrencyConflict" in fermix_memory.__all__
    with pytest.raises(fermix_memory.ConcurrencyConflict):
        ports.append("new", message(), expected_version=1)


def test_a_conflict_undoes_the_whole_write(ports: Ports) -> None:
    def work(tx: Any) -> None:
        tx.append("b", [message("first")])
        tx.append("a", [message("second")], expected_version=4)

    with pytest.raises(ConcurrencyConflict):
        ports.write(work)
    assert list(ports.store.read_events()) == [] and ports.store.last_position() == 0


def test_the_expected_version_counts_the_transactions_own_appends(ports: Ports) -> None:
    def work(tx: Any) -> list[int]:
        tx.append("a", [message("one")], expected_version=0)
        return tx.append("a", [message("two")], expected_version=1)  # type: ignore[no-any-return]

    assert ports.write(work) == [2]


# --- reads ----------------------------------------------------------------------------------


def test_read_stream_gives_the_version_and_the_events_in_order(ports: Ports) -> None:
    ports.append("a", message("one"))
    ports.append("b", message("other"))
    ports.append("a", message("two"))
    stream = ports.write(lambda tx: tx.read_stream("a"))
    assert stream.version == 2
    assert [(r.version, r.event.content) for r in stream.events] == [(1, "one"), (2, "two")]


def test_read_stream_of_an_unknown_stream_is_empty_at_version_zero(ports: Ports) -> None:
    stream = ports.write(lambda tx: tx.read_stream("nowhere"))
    assert stream.version == 0 and stream.events == ()


def test_read_stream_sees_the_transactions_own_appends(ports: Ports) -> None:
    def work(tx: Any) -> Any:
        tx.append("a", [message("mine")])
        return tx.read_stream("a")

    stream = ports.write(work)
    assert stream.version == 1 and [r.event.content for r in stream.events] == ["mine"]


def test_read_events_after_a_position_and_of_one_stream(ports: Ports) -> None:
    ports.append("a", message("one"), message("two"))
    ports.append("b", message("three"))
    ports.append("a", message("four"))

    def contents(records: Any) -> list[str]:
        return [r.event.content for r in records]

    assert contents(ports.store.read_events()) == ["one", "two", "three", "four"]
    assert contents(ports.store.read_events(2)) == ["three", "four"]
    assert contents(ports.store.read_events(stream="a")) == ["one", "two", "four"]
    assert contents(ports.store.read_events(1, stream="a")) == ["two", "four"]
    assert contents(ports.store.read_events(4)) == []
    assert contents(ports.write(lambda tx: tx.read_events(1, stream="a"))) == ["two", "four"]


def test_read_events_inside_a_write_sees_its_own_appends_and_outside_only_after_commit(ports: Ports) -> None:
    seen_outside: list[int] = []

    def work(tx: Any) -> list[int]:
        tx.append("a", [message("one")])
        seen_outside.append(ports.store.last_position())
        return [r.position for r in tx.read_events()]

    assert ports.write(work) == [1]
    assert seen_outside == [0]
    assert ports.store.last_position() == 1


def test_last_positions_by_stream_prefix(ports: Ports) -> None:
    ports.append("owner/ada/alice", message("one"))
    ports.append("owner/ada/bob", message("two"))
    ports.append("memory/ada/alice", message("three"))
    ports.append("owner/ada/alice", message("four"))
    assert ports.store.last_positions("owner/") == {"owner/ada/alice": 4, "owner/ada/bob": 2}
    assert ports.store.last_positions("nothing/") == {}


def test_head_follows_the_last_event(ports: Ports) -> None:
    empty = ports.store.head()
    assert empty.position == 0
    ports.append("a", message("one"))
    first = ports.store.head()
    ports.append("a", message("two"))
    second = ports.store.head()
    assert (first.position, second.position) == (1, 2)
    assert len({empty.hash, first.hash, second.hash}) == 3


# --- atomicity and re-runs --------------------------------------------------------------------


def one_chain(ports: Ports) -> bool:
    """A log of one chain numbers its events without gaps; one of several chains (ADR-0031),
    whose writes commit side by side, only in increasing order."""
    return not getattr(ports.store.head(), "chains", ())


def test_a_failing_work_rolls_back_entirely(ports: Ports) -> None:
    ports.append("a", message("kept"))

    def work(tx: Any) -> None:
        tx.append("a", [message("lost")])
        tx.append("memory/ada/alice", [added()])
        raise RuntimeError("the use case changed its mind")

    with pytest.raises(RuntimeError):
        ports.write(work)
    assert [r.event.content for r in ports.store.read_events()] == ["kept"]
    assert ports.write(lambda tx: (tx.read_stream("a").version, tx.memories_of("ada", "alice"))) == (1, [])
    [position] = ports.append("a", message("next"))
    assert position == 2 if one_chain(ports) else position > 1  # several chains: positions may leave gaps
    assert [r.version for r in ports.store.read_events()] == [1, 2]


def test_an_event_its_projection_refuses_rolls_back_the_write(ports: Ports) -> None:
    with pytest.raises(IntegrityError):
        ports.append("memory/ada/alice", added(), replaced(99, "no such row"))
    assert ports.store.last_position() == 0
    with pytest.raises(IntegrityError):
        ports.append("memory/ada/alice", added(), added())  # the same key twice in one scope
    assert ports.write(lambda tx: tx.memories_of("ada", "alice")) == []


def test_a_work_run_again_after_a_failure_leaves_only_its_last_run(ports: Ports) -> None:
    runs: list[int] = []

    def work(tx: Any) -> list[int]:
        runs.append(tx.read_stream("a").version)
        positions: list[int] = tx.append("a", [message(f"run {len(runs)}")], expected_version=0)
        if len(runs) == 1:
            raise OSError("the first run fails after its append")
        return positions

    with pytest.raises(OSError):
        ports.write(work)
    [position] = ports.write(work)
    assert position == 1 if one_chain(ports) else position >= 1
    assert [r.position for r in ports.store.read_events()] == [position]
    assert runs == [0, 0]
    assert [r.event.content for r in ports.store.read_events()] == ["run 2"]


def test_a_write_returns_what_its_work_returns(ports: Ports) -> None:
    assert ports.write(lambda tx: ("anything", tx.read_stream("a").version)) == ("anything", 0)


# --- concurrency ----------------------------------------------------------------------------


THREADS = 6


def run_threads(target: Any) -> None:
    start = threading.Barrier(THREADS)

    def runner(i: int) -> None:
        start.wait()
        target(i)

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_of_writers_expecting_the_same_version_exactly_one_wins(ports: Ports) -> None:
    won: list[int] = []
    lost: list[int] = []

    def attempt(i: int) -> None:
        try:
            ports.append("contested", message(f"writer {i}"), expected_version=0)
            won.append(i)
        except ConcurrencyConflict:
            lost.append(i)

    run_threads(attempt)
    assert len(won) == 1 and len(lost) == THREADS - 1
    [record] = ports.store.read_events(stream="contested")
    assert record.version == 1 and record.event.content == f"writer {won[0]}"


def test_writers_that_read_decide_and_retry_each_win_one_version(ports: Ports) -> None:
    conflicts: list[int] = []

    def decide_and_append(i: int) -> None:
        while True:
            try:
                def work(tx: Any) -> None:
                    version = tx.read_stream("counter").version
                    tx.append("counter", [message(f"{version + 1} by {i}")], expected_version=version)

                ports.write(work)
                return
            except ConcurrencyConflict:
                conflicts.append(i)

    run_threads(decide_and_append)
    records = list(ports.store.read_events(stream="counter"))
    assert [r.version for r in records] == list(range(1, THREADS + 1))
    assert [r.event.content.split(" by ")[0] for r in records] == [str(v) for v in range(1, THREADS + 1)]
    assert sorted(int(r.event.content.split(" by ")[1]) for r in records) == list(range(THREADS))


def test_concurrent_appends_without_expected_versions_all_land(ports: Ports) -> None:
    run_threads(lambda i: ports.append("busy", message(f"writer {i}")))
    records = list(ports.store.read_events(stream="busy"))
    assert [r.version for r in records] == list(range(1, THREADS + 1))
    assert [r.position for r in records] == list(range(1, THREADS + 1))
