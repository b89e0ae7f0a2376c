"""Edges of the apsw storage adapter the port's contract suite cannot reach: memory rows read
by column name from one list, and the database's own version constraint."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from fermix_memory.adapters.sql.rows import MEMORY_FIELDS, memory_columns
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction
from fermix_memory.application.errors import ConcurrencyConflict
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.memory import Memory
from tests.contract.conftest import message
from tests.waits import HANG_GUARD_S


def test_the_memory_columns_are_named_once_by_the_memory_fields(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "memory.db")
    try:
        table = {row[1] for row in store.reader().execute("PRAGMA table_info(memories)").fetchall()}
    finally:
        store.close()
    assert tuple(f.name for f in attrs.fields(Memory)) == MEMORY_FIELDS
    assert set(MEMORY_FIELDS) <= table
    assert memory_columns("m").split(", ")[:2] == ["m.id", "m.agent_id"]


def test_a_unique_stream_version_violation_is_a_concurrency_conflict(tmp_path: Path) -> None:
    """The database's UNIQUE(stream, version) backs the version check: should two appends ever
    compute the same version, the second is a typed conflict and nothing of its write lands."""
    store = SqliteEventStore(tmp_path / "memory.db")
    try:
        store.write(lambda tx: tx.append("a", [message("first")]))

        def stale(tx: SqliteTransaction) -> list[int]:
            tx.versions["a"] = 0  # as if another writer's append had not been seen
            return tx.append("a", [message("second")])

        with pytest.raises(ConcurrencyConflict):
            store.write(stale)
        assert [r.event.content for r in store.read_events()] == ["first"]
    finally:
        store.close()


def test_a_write_returns_only_after_the_reactions_to_its_own_events_ran(tmp_path: Path) -> None:
    """Group commit: a caller whose work another thread's batch committed is answered only when
    the after-commit reactions (the prompt files) have seen its own events, whoever led the batch."""
    store = SqliteEventStore(tmp_path / "memory.db")
    reacted: set[int] = set()
    guard = threading.Lock()
    early: list[int] = []

    def reaction(recorded: list[RecordedEvent]) -> None:
        time.sleep(0.002)  # a file written: slow enough for a released caller to run on
        with guard:
            reacted.update(item.position for item in recorded)

    store.add_after_commit(reaction)

    def writer(name: str) -> None:
        for n in range(150):
            positions = store.write(lambda tx, n=n: tx.append(f"{name}-{n}", [message(f"{name} {n}")]))
            with guard:
                early.extend(p for p in positions if p not in reacted)

    threads = [threading.Thread(target=writer, args=(f"t{i}",)) for i in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        store.close()
    assert len(reacted) == 450
    assert early == []


def test_the_writer_reads_the_log_again_after_its_own_connection_wrote_outside_its_transactions(
        tmp_path: Path) -> None:
    """What the writer knows after a commit (head, stream versions) is dropped once its own
    connection appended elsewhere (here: rows of another log through ``append_logged``)."""
    stream = "conversation/ada/chat:1"
    store, other = SqliteEventStore(tmp_path / "a.db"), SqliteEventStore(tmp_path / "b.db")
    try:
        assert store.write(lambda tx: tx.stream_version(stream)) == 0  # known: an empty log
        other.write(lambda tx: tx.append(stream, [message("one"), message("two")]))
        store.append_logged(list(other.read_log()))
        assert store.write(lambda tx: tx.append(stream, [message("three")])) == [3]
        assert store.write(lambda tx: tx.stream_version(stream)) == 3
        assert [r.version for r in store.read_events(stream=stream)] == [1, 2, 3]
    finally:
        store.close()
        other.close()


def test_a_failed_write_leaves_the_next_one_the_versions_as_committed(tmp_path: Path) -> None:
    stream = "conversation/ada/chat:1"
    store = SqliteEventStore(tmp_path / "a.db")
    try:
        store.write(lambda tx: tx.append(stream, [message("one")]))

        def fails(tx: SqliteTransaction) -> None:
            tx.append(stream, [message("lost")])
            raise RuntimeError("changed its mind")

        with pytest.raises(RuntimeError):
            store.write(fails)
        assert store.write(lambda tx: tx.append(stream, [message("two")])) == [2]
        assert [(r.position, r.version) for r in store.read_events(stream=stream)] == [(1, 1), (2, 2)]
    finally:
        store.close()


def test_a_writer_and_a_close_waiting_behind_a_batch_in_flight_go_on_when_it_commits(tmp_path: Path) -> None:
    """The batch's leader wakes those waiting for the writer (a lone writer has nobody to wake):
    a write queued behind it is committed next, and a close waits for the batch in flight."""
    store = SqliteEventStore(tmp_path / "memory.db")
    inside, release = threading.Event(), threading.Event()
    answers: dict[str, list[int]] = {}

    def held(tx: SqliteTransaction) -> list[int]:
        inside.set()
        release.wait(30)
        return tx.append("held", [message("held")])

    def write(name: str, work: Any) -> None:
        answers[name] = store.write(work)

    leader = threading.Thread(target=write, args=("leader", held))
    leader.start()
    assert inside.wait(HANG_GUARD_S)
    follower = threading.Thread(target=write, args=("follower", lambda tx: tx.append("next", [message("next")])))
    follower.start()
    deadline = time.monotonic() + HANG_GUARD_S
    while store.queued_writes() == 0 and time.monotonic() < deadline:
        inside.wait(0.001)  # until the follower is queued behind the batch in flight
    assert store.queued_writes() == 1
    release.set()
    for t in (leader, follower):
        t.join(HANG_GUARD_S)
    assert answers == {"leader": [1], "follower": [2]}

    inside.clear()
    release.clear()
    leader = threading.Thread(target=write, args=("last", held))
    leader.start()
    assert inside.wait(HANG_GUARD_S)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.05)
    assert closer.is_alive()  # the batch in flight holds the writer: the close waits for it
    release.set()
    for t in (leader, closer):
        t.join(HANG_GUARD_S)
    assert not leader.is_alive() and not closer.is_alive()
    assert answers["last"] == [3]
    reopened = SqliteEventStore(tmp_path / "memory.db")
    try:
        assert [r.stream for r in reopened.read_events()] == ["held", "next", "held"]
    finally:
        reopened.close()
