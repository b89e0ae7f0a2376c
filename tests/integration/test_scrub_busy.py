"""An erasure's scrub while another writer holds the SQLite file (another memory on the same home
running its upkeep: marks, vectors, index merges): the scrub waits for it, attempt after
attempt, and, still held out, leaves the rewrite pending and says so instead of failing the
committed erasure (ADR-0095); the next open, retention run or forget finishes it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite import erasure
from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from fermix_memory.application.errors import NotFound
from tests.cli_runner import run_cli
from tests.integration.test_forget import found
from tests.waits import HANG_GUARD_S, until

SECRET = "Quetzalbusyscrub"


class OtherWriter:
    """Another writer of the file, as another memory's upkeep is: it holds a write transaction open
    until :meth:`release` (or until ``release_when`` holds)."""

    def __init__(self, db: Path, release_when: Callable[[], bool] | None = None) -> None:
        self.db, self.release_when = db, release_when
        self.held, self.done = threading.Event(), threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is None:  # the first scrub only
            self.thread = threading.Thread(target=self.hold, daemon=True)
            self.thread.start()
            self.held.wait(HANG_GUARD_S)

    def hold(self) -> None:
        conn = apsw.Connection(str(self.db))
        conn.set_busy_timeout(int(HANG_GUARD_S * 1000))
        conn.execute("BEGIN IMMEDIATE")
        try:
            self.held.set()
            if self.release_when is not None:
                until(lambda: self.release_when() or self.done.is_set(), "the scrub to meet the other writer")
            else:
                self.done.wait(HANG_GUARD_S)
        finally:
            conn.execute("COMMIT")
            conn.close()

    def release(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join(HANG_GUARD_S)


@contextmanager
def writer_at_scrub(monkeypatch: pytest.MonkeyPatch, home: Path,
                    release_when: Callable[[], bool] | None = None) -> Iterator[OtherWriter]:
    """Another writer takes the file the moment the first scrub starts (after the erasure committed)
    and lets it go when that scrub is over, if not before (``release_when``)."""
    other, real = OtherWriter(home / "memory.db", release_when), SqliteErasure.scrub

    def scrub(self: SqliteErasure) -> Any:
        first = other.thread is None
        other.start()
        try:
            return real(self)
        finally:
            if first:
                other.release()

    monkeypatch.setattr(SqliteErasure, "scrub", scrub)
    try:
        yield other
    finally:
        other.release()
        monkeypatch.setattr(SqliteErasure, "scrub", real)


def secret_row(memory: MemorySystem) -> int:
    outcome = memory.write_memory({"op": "add", "category": "identity", "key": "code", "value": SECRET},
                                  agent_id="ada", owner_id="alice", trust="operator")
    assert outcome[0].memory_id is not None
    return outcome[0].memory_id


def test_a_scrub_waits_for_a_short_write_of_another_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fermix_memory.storage")
    home = tmp_path / "home"
    monkeypatch.setattr(erasure, "SCRUB_WAIT_S", 1.5)  # the other write ends after the first attempt (0.5 s)
    with MemorySystem.open(home) as one, MemorySystem.open(home):
        memory_id = secret_row(one)
        # The other write ends once the scrub has met it (and will try again).
        with writer_at_scrub(monkeypatch, home, release_when=lambda: "scrub tries again" in caplog.text):
            report = one.forget_memory(memory_id)
        assert "scrub tries again" in caplog.text
        assert report.finished and report.wal_truncated and report.remains == []
        assert report.receipt is not None
    assert found(home, (SECRET,)) == {}


@pytest.mark.usefixtures("short_busy_timeout")  # its own background writes meet the other too
def test_a_scrub_held_out_is_left_pending_said_so_and_finished_at_the_next_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setattr(erasure, "SCRUB_WAIT_S", 0.3)
    with MemorySystem.open(home) as one, MemorySystem.open(home) as two:
        memory_id = secret_row(one)
        with writer_at_scrub(monkeypatch, home):
            report = one.forget_memory(memory_id)  # committed; the rewrite could not run: no error
        assert report.erased_events > 0 and not report.finished and not report.wal_truncated
        assert report.receipt is not None  # what went from the log is receipted all the same
        [note] = report.remains
        assert "was not rewritten yet" in note and "pending since the erasure at log position" in note
        with pytest.raises(NotFound):  # the erasure is committed, for every memory on the home
            two.memory(memory_id)
    with MemorySystem.open(home):  # the next open finishes the rewrite
        pass
    assert found(home, (SECRET,)) == {}


@pytest.mark.usefixtures("short_busy_timeout")  # its own background writes meet the other too
def test_forget_again_finishes_a_rewrite_left_pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setattr(erasure, "SCRUB_WAIT_S", 0.3)
    with MemorySystem.open(home) as memory:
        memory_id = secret_row(memory)
        with writer_at_scrub(monkeypatch, home):
            assert not memory.forget_memory(memory_id).finished
        again = memory.forget_memory(memory_id)
        assert again.finished and again.erased_events == 0 and again.remains == []
    assert found(home, (SECRET,)) == {}


def test_the_cli_says_the_erasure_is_done_and_the_rewrite_pending(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setattr(erasure, "SCRUB_WAIT_S", 0.3)
    with MemorySystem.open(home) as memory:
        memory_id = secret_row(memory)
    with writer_at_scrub(monkeypatch, home):
        result = run_cli("forget", "--memory", str(memory_id), "--yes", home=home)
    assert result.returncode == 1
    assert f"forgot memory {memory_id} of ada/alice" in result.stdout
    assert "rewrite is pending" in result.stdout and "rewritten:" not in result.stdout
    assert "fermix: error:" in result.stderr and "was not rewritten yet" in result.stderr
    assert found(home, (SECRET,)) != {}  # still in the files, as the error said
    status = run_cli("retention", "run", home=home)  # a command that opens the memory writable finishes it
    assert found(home, (SECRET,)) == {}, status.stderr


@pytest.mark.usefixtures("every_store")
def test_forgets_beside_another_memory_writing_all_finish(tmp_path: Path) -> None:
    """Another memory on the home appends all along (its upkeep writing marks, entries, merges
    after it): every erasure's rewrite still finishes (on PostgreSQL, ``VACUUM FULL`` waits)."""
    home = tmp_path / "home"
    with MemorySystem.open(home) as one, MemorySystem.open(home) as two:
        stop = threading.Event()

        def appends() -> None:
            while not stop.is_set():
                two.append_message(agent_id="bob", owner_id="olga", conversation="tg:1", role="user", content="busy")

        writer = threading.Thread(target=appends)
        writer.start()
        try:
            reports = [one.forget_memory(secret_row(one)) for _ in range(5)]
        finally:
            stop.set()
            writer.join(HANG_GUARD_S)
        assert [(r.finished, r.rewrite_pending) for r in reports] == [(True, False)] * 5
    assert found(home, (SECRET,)) == {}
