"""The writer's WAL is checkpointed in the pauses between commits, off the committing thread, and
by the committing thread only once appends that never pause made the log long (ADR-0046). Real
SQLite files."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.wal_checkpoints import WalCheckpoints
from fermix_memory.application.errors import StorageError
from tests.waits import HANG_GUARD_S, until

FRAME = 4096 + 24
THREAD = "fermix-wal-checkpoint"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "log.db"
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL").fetchall()
    conn.execute("CREATE TABLE t(x BLOB)")
    conn.close()
    return path


def writer(path: Path, checkpoints: WalCheckpoints) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.setbusytimeout(5000)
    checkpoints.install(conn)
    return conn


@contextmanager
def checkpointed(db: Path, **settings: Any) -> Iterator[tuple[WalCheckpoints, apsw.Connection]]:
    """A writer of ``db`` whose log ``WalCheckpoints(**settings)`` checkpoints; both closed after."""
    checkpoints = WalCheckpoints(lambda: apsw.Connection(str(db)), **settings)
    conn = writer(db, checkpoints)
    try:
        yield checkpoints, conn
    finally:
        checkpoints.close()
        conn.close()


def commit_rows(conn: apsw.Connection, n: int) -> None:
    for _ in range(n):
        conn.execute("INSERT INTO t VALUES (randomblob(3000))")  # about a page per commit


def wait_idle(checkpoints: WalCheckpoints, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not checkpoints.idle():
        assert time.monotonic() < deadline, "the background checkpoint did not finish"
        time.sleep(0.01)


def checkpoint_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == THREAD}


def test_commits_leave_the_checkpoints_to_a_thread_of_their_own(db: Path) -> None:
    opened: list[str] = []  # the threads the background's connection was opened in

    def connect() -> apsw.Connection:
        opened.append(threading.current_thread().name)
        return apsw.Connection(str(db))

    checkpoints = WalCheckpoints(connect, every_pages=20, backstop_pages=10**6)
    conn = writer(db, checkpoints)
    before = db.stat().st_size
    commit_rows(conn, 300)
    wait_idle(checkpoints)
    assert checkpoints.background_runs >= 1 and checkpoints.inline_runs == 0
    assert opened == [THREAD]
    # The pages reached the database file: the background checkpoints copied them there.
    assert db.stat().st_size > before + 100 * 4096
    checkpoints.close()
    conn.close()


def test_pauses_between_bursts_keep_the_log_short_and_no_commit_checkpoints(db: Path) -> None:
    with checkpointed(db, every_pages=20, quiet_s=0.02, backstop_pages=200) as (checkpoints, conn):
        for _ in range(10):  # bursts of some 30-60 pages: 300-600 in all
            commit_rows(conn, 30)
            wait_idle(checkpoints)  # a pause: the background empties the log, the next commit starts it afresh
        assert checkpoints.inline_runs == 0 and checkpoints.background_runs >= 5
        assert Path(f"{db}-wal").stat().st_size <= 32 + 200 * FRAME


def test_without_pauses_the_background_waits_and_the_backstop_checkpoints(db: Path) -> None:
    with checkpointed(db, every_pages=1, quiet_s=0.5, backstop_pages=100) as (checkpoints, conn):
        commit_rows(conn, 300)  # no pause of half a second among these
        assert checkpoints.background_runs == 0 and checkpoints.inline_runs >= 2
        wait_idle(checkpoints)  # the pause after them
        assert checkpoints.background_runs == 1


def host_turns(conn: apsw.Connection, checkpoints: WalCheckpoints, *, commits: int, tails: int) -> None:
    """Commits of a page each with a host's work between them and no pause, at least ``commits``
    of them and until a commit copied what ``tails`` catch-ups left."""
    deadline, done = time.monotonic() + HANG_GUARD_S, 0
    while done < commits or checkpoints.tail_runs < tails:
        assert time.monotonic() < deadline, "the background never caught up"
        commit_rows(conn, 1)
        hashlib.sha256(bytes(20_000)).digest()  # the host's own work between two appends
        done += 1


def test_appends_that_never_pause_are_caught_up_with_by_the_background_and_no_commit_checkpoints(db: Path) -> None:
    """ADR-0067: past the catch-up mark the background checkpoints without waiting for a pause (a
    minute here, never given), a commit copies the few pages it left, and the log starts afresh
    long before the backstop, where a commit would copy the whole log."""
    with checkpointed(db, every_pages=10**6, quiet_s=60.0, nonstop_pages=100, backstop_pages=2_000) as (
            checkpoints, conn):
        host_turns(conn, checkpoints, commits=6_000, tails=3)
        assert checkpoints.inline_runs == 0 and checkpoints.background_runs >= 3
        # Some 6,000 frames went through a log that never held a third of them.
        assert Path(f"{db}-wal").stat().st_size <= 32 + 2_000 * FRAME


def test_the_committing_thread_copies_a_tail_only_once_the_log_reached_the_reset_mark(db: Path) -> None:
    """A tail copy syncs two files on the committing thread: the log is left to grow to the reset
    mark, caught up with again meanwhile; the backstop counts the pages no catch-up copied, so a
    log past it but caught up with is not copied whole by a commit."""
    with checkpointed(db, every_pages=10**6, quiet_s=60.0, nonstop_pages=100, reset_pages=400,
                      backstop_pages=250) as (checkpoints, conn):
        host_turns(conn, checkpoints, commits=1_500, tails=2)
        assert checkpoints.background_runs >= 2 * checkpoints.tail_runs
        assert Path(f"{db}-wal").stat().st_size <= 32 + (400 + 250 + 4) * FRAME


def test_a_reader_on_old_pages_holds_no_commit_back_and_the_catch_up_ends_after_it(db: Path) -> None:
    with checkpointed(db, every_pages=10**6, quiet_s=60.0, nonstop_pages=50, backstop_pages=10**6) as (
            checkpoints, conn):
        commit_rows(conn, 1)
        reader = apsw.Connection(str(db))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchall()  # keeps the pages of this moment
        commit_rows(conn, 400)  # catch-ups were asked for, and none could copy past the reader's pages
        wait_idle(checkpoints)
        assert checkpoints.inline_runs == 0  # no commit waited on a whole-log copy
        reader.execute("COMMIT")
        reader.close()
        host_turns(conn, checkpoints, commits=1, tails=1)
        assert checkpoints.inline_runs == 0


def test_a_log_that_reaches_the_backstop_is_checkpointed_by_the_commit_and_starts_afresh(db: Path) -> None:
    with checkpointed(db, every_pages=10**6, backstop_pages=50) as (checkpoints, conn):
        commit_rows(conn, 400)  # some 800 frames without the backstop
        assert checkpoints.inline_runs >= 5 and checkpoints.background_runs == 0
        wal = Path(f"{db}-wal")
        assert wal.stat().st_size <= 32 + (50 + 4) * FRAME  # never far beyond the backstop


def test_without_the_backstop_the_same_commits_grow_the_log(db: Path) -> None:
    """The counterpart of the test above: what the backstop prevents."""
    with checkpointed(db, every_pages=10**6, backstop_pages=10**6) as (_, conn):
        commit_rows(conn, 400)
        assert Path(f"{db}-wal").stat().st_size > 32 + 400 * FRAME


def test_no_background_checkpoint_runs_while_the_store_holds_them_back(db: Path) -> None:
    with checkpointed(db, every_pages=1, backstop_pages=10**6) as (checkpoints, conn):
        with checkpoints.held():
            commit_rows(conn, 5)  # each asks for one
            time.sleep(0.2)
            assert checkpoints.background_runs == 0
        wait_idle(checkpoints)
        assert checkpoints.background_runs >= 1


class _FailingConnection:
    filename = "failing.db"

    def wal_checkpoint(self, dbname: str | None = None, mode: int = 0) -> tuple[int, int]:
        raise apsw.IOError("disk I/O error")


def test_a_checkpoint_that_fails_never_fails_the_commit_that_asked_for_it() -> None:
    checkpoints = WalCheckpoints(lambda: apsw.Connection(":memory:"), every_pages=10, backstop_pages=20)
    assert checkpoints.after_commit(_FailingConnection(), "main", 25) == apsw.SQLITE_OK  # type: ignore[arg-type]
    assert checkpoints.inline_runs == 1
    checkpoints.close()


def test_a_background_checkpoint_that_fails_is_one_warning_and_the_next_request_tries_again(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    attempts: list[int] = []

    def connect() -> apsw.Connection:
        attempts.append(1)
        if len(attempts) == 1:
            raise StorageError("cannot open memory.db")
        return apsw.Connection(str(db))

    checkpoints = WalCheckpoints(connect, every_pages=1, backstop_pages=10**6)
    conn = writer(db, checkpoints)
    commit_rows(conn, 1)
    wait_idle(checkpoints)
    assert checkpoints.background_runs == 0
    [record] = [r for r in caplog.records if "checkpoint" in r.getMessage()]
    assert record.levelname == "WARNING" and "cannot open" in record.getMessage()
    commit_rows(conn, 1)
    wait_idle(checkpoints)
    assert checkpoints.background_runs == 1
    checkpoints.close()
    conn.close()


def test_close_stops_the_background_thread(db: Path) -> None:
    others = checkpoint_threads()  # of stores other tests may have left open
    checkpoints = WalCheckpoints(lambda: apsw.Connection(str(db)), every_pages=1, backstop_pages=10**6)
    conn = writer(db, checkpoints)
    commit_rows(conn, 3)
    wait_idle(checkpoints)
    assert checkpoint_threads() - others
    checkpoints.close()
    assert not checkpoint_threads() - others
    commit_rows(conn, 3)  # asks again: nothing starts after close
    assert not checkpoint_threads() - others
    conn.close()


def test_a_memory_checkpoints_in_the_background_and_leaves_no_log_once_closed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    others = checkpoint_threads()
    with MemorySystem.open(home) as memory:
        for i in range(600):  # several thousand frames: past the background's first request
            memory.append_message(agent_id="companion", owner_id="alice", conversation=f"chat:{i % 7}",
                                  role="user", sender="alice", content=f"message number {i} " * 20)
        assert checkpoint_threads() - others
        assert memory.verify().ok
    assert not checkpoint_threads() - others
    wal = home / "memory.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0


def rows_in_file_alone(db: Path, tmp_path: Path, table: str) -> int:
    """The rows of ``table`` in a copy of the database file without its log: what checkpoints
    have copied there."""
    copy = tmp_path / "file-alone.db"
    copy.write_bytes(db.read_bytes())
    conn = apsw.Connection(str(copy))
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
    finally:
        conn.close()


def test_settle_checkpoints_at_once_what_waits_for_a_pause(db: Path, tmp_path: Path) -> None:
    with checkpointed(db, every_pages=1, quiet_s=60.0, backstop_pages=10**6) as (checkpoints, conn):
        commit_rows(conn, 40)
        assert not checkpoints.idle() and rows_in_file_alone(db, tmp_path, "t") == 0  # waiting a minute
        started = time.monotonic()
        assert checkpoints.settle(timeout=10.0)
        assert time.monotonic() - started < 10.0 and checkpoints.settled_runs == 1
        assert checkpoints.idle() and checkpoints.background_runs == 0  # the request was answered
        assert rows_in_file_alone(db, tmp_path, "t") == 40


def test_a_request_settle_answered_is_not_run_again_by_the_background(db: Path) -> None:
    with checkpointed(db, every_pages=1, quiet_s=0.2, backstop_pages=10**6) as (checkpoints, conn):
        commit_rows(conn, 5)  # the background now waits 0.2 s for its pause
        assert checkpoints.settle(timeout=10.0) and checkpoints.settled_runs == 1
        time.sleep(0.5)  # its pause came
        assert checkpoints.background_runs == 0 and checkpoints.idle()


def test_settle_checkpoints_a_log_too_short_to_have_asked(db: Path, tmp_path: Path) -> None:
    with checkpointed(db, every_pages=10**6, backstop_pages=10**6) as (checkpoints, conn):
        commit_rows(conn, 3)
        assert checkpoints.settle() and rows_in_file_alone(db, tmp_path, "t") == 3
        assert checkpoints.settle()  # nothing left: a checkpoint that copies nothing


def test_settle_gives_up_after_its_timeout_while_whole_file_work_holds_checkpoints(db: Path) -> None:
    with checkpointed(db, every_pages=1, quiet_s=60.0, backstop_pages=10**6) as (checkpoints, conn):
        commit_rows(conn, 5)
        with checkpoints.held():
            started = time.monotonic()
            assert not checkpoints.settle(timeout=0.2)
            assert 0.15 < time.monotonic() - started < 5.0
        assert checkpoints.settle(timeout=5.0) and checkpoints.settled_runs == 1


def test_settle_after_close_does_nothing(db: Path) -> None:
    checkpoints = WalCheckpoints(lambda: apsw.Connection(str(db)), every_pages=1, backstop_pages=10**6)
    conn = writer(db, checkpoints)
    commit_rows(conn, 3)
    checkpoints.close()
    assert checkpoints.settle(timeout=1.0) and checkpoints.settled_runs == 0
    conn.close()


def test_wait_for_background_leaves_every_message_in_the_database_file(tmp_path: Path) -> None:
    """A host that waits for the background has the log checkpointed: the file alone is whole,
    even when the log was too short to ask for a checkpoint."""
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        for i in range(5):
            memory.append_message(agent_id="companion", owner_id="alice", conversation="chat:1",
                                  role="user", sender="alice", content=f"message number {i}")
        memory.wait_for_background()
        assert rows_in_file_alone(home / "memory.db", tmp_path, "messages") == 5


def test_a_commit_asked_at_once_runs_no_checkpoint_and_leaves_the_backstop_to_the_background(db: Path) -> None:
    """ADR-0110: a commit on a thread that must not wait (an async caller's own) copies nothing,
    which would sync two files there: at the backstop it says a checkpoint is due and asks the
    background for one now; the next commit that may wait finds it done, or runs it."""
    with checkpointed(db, every_pages=1, quiet_s=60.0, backstop_pages=100) as (checkpoints, conn):
        checkpoints.at_once = True
        commit_rows(conn, 300)
        assert checkpoints.inline_runs == 0 and checkpoints.tail_runs == 0
        assert checkpoints.due
        until(lambda: checkpoints.background_runs >= 1, "a checkpoint asked now, not after a quiet minute")
        checkpoints.at_once = False
        commit_rows(conn, 1)
        assert not checkpoints.due
    with checkpointed(db, every_pages=1, quiet_s=60.0, backstop_pages=100) as (checkpoints, conn):
        checkpoints.at_once = True
        with checkpoints.held():  # the background may not run one: the next commit that may wait does
            commit_rows(conn, 150)
            assert checkpoints.due and checkpoints.inline_runs == 0
            checkpoints.at_once = False
            commit_rows(conn, 1)
            assert checkpoints.inline_runs == 1 and not checkpoints.due


def test_a_commit_asked_at_once_leaves_the_tail_of_a_catch_up_to_the_background(db: Path) -> None:
    """Where a commit that may wait copies the tail a catch-up left (and syncs), one asked at
    once does not: the log goes on to the next catch-up."""
    with checkpointed(db, every_pages=10**6, quiet_s=60.0, nonstop_pages=100, reset_pages=400,
                      backstop_pages=10**6) as (checkpoints, conn):
        checkpoints.at_once = True
        for _ in range(1_500):  # as many as give a commit that may wait two tails to copy (above)
            commit_rows(conn, 1)
            hashlib.sha256(bytes(20_000)).digest()
        assert checkpoints.tail_runs == 0 and checkpoints.inline_runs == 0
        assert checkpoints.background_runs >= 2
