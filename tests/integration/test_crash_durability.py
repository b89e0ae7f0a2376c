"""A process killed with SIGKILL mid-write loses no acknowledged message (SPEC §13, R-DURABLE).

A child process appends messages in a loop (two threads, so group commit is in play) and
prints each id only after ``append_message`` returned it. The parent kills the child with
SIGKILL in the middle of the stream (or one of four such children, on either store: the others
must go on writing), reopens the home and checks that every printed id is
there with its exact content, that the log still verifies, and that writing goes on.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

AGENT = "crash-agent"
OWNER = "crash-owner"
IDS_BEFORE_KILL = 300
READ_TIMEOUT_S = 30.0

# The child: two writer threads, each on its own conversation. A line "id thread index" is
# printed (and flushed) only once the id has been returned, i.e. acknowledged.
CHILD = r"""
import json, sys, threading
from fermix_memory import MemorySystem

home, config, process = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
memory = MemorySystem.open(home, config=config or None)
out_lock = threading.Lock()

def content(thread, i):
    return f"t{thread} message {i} \u00e9t\u00e9 \u2713 " + "x" * (i % 50)

def writer(thread):
    i = 0
    while True:
        mid = memory.append_message(
            agent_id="crash-agent", owner_id="crash-owner", conversation=f"test:chat-{thread}",
            role="user", sender="u", content=content(thread, i),
        )
        with out_lock:
            sys.stdout.write(f"{mid} {thread} {i}\n")
            sys.stdout.flush()
        i += 1

threads = [threading.Thread(target=writer, args=(2 * process + t,), daemon=True) for t in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def expected_content(thread: int, i: int) -> str:
    return f"t{thread} message {i} \u00e9t\u00e9 \u2713 " + "x" * (i % 50)


def run_and_kill(home: Path, config: dict[str, Any] | None, processes: int = 1) -> list[tuple[int, int, int]]:
    """Start ``processes`` children, read at least IDS_BEFORE_KILL acknowledged ids, SIGKILL the
    first mid-stream, let the others go on writing a while (nothing it held may stop them), then
    SIGKILL them too. Child ``p``'s threads are numbered ``2p`` and ``2p + 1``.

    Returns every complete line the children printed (including lines still in the pipes after
    the kills: those were acknowledged too).
    """
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(home), json.dumps(config or {}), str(p)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for p in range(processes)]
    buffers = [b""] * processes
    deadline = time.monotonic() + READ_TIMEOUT_S

    def read_until(enough: Any, alive: list[int]) -> None:
        fds = {procs[p].stdout.fileno(): p for p in alive}  # type: ignore[union-attr]
        while not enough():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                counts = [b.count(b"\n") for b in buffers]
                pytest.fail(f"the children printed only {counts} ids in {READ_TIMEOUT_S}s")
            ready, _, _ = select.select(list(fds), [], [], remaining)
            for fd in ready:
                p = fds[fd]
                chunk = os.read(fd, 65536)
                if not chunk:
                    err = procs[p].stderr.read().decode(errors="replace")  # type: ignore[union-attr]
                    pytest.fail(f"child {p} exited early (rc={procs[p].wait()}): {err[-2000:]}")
                buffers[p] += chunk

    def both_threads(p: int) -> bool:
        """Whether each of child ``p``'s two writer threads was acknowledged (a loaded machine may
        run one of them late: the kill waits for it, so every thread has something to check)."""
        lines = buffers[p].split(b"\n")[:-1]
        return {int(line.split()[1]) for line in lines} >= {2 * p, 2 * p + 1}

    def kill(p: int) -> None:
        assert procs[p].poll() is None, "a child must still be running when it is killed"
        os.kill(procs[p].pid, signal.SIGKILL)
        buffers[p] += procs[p].stdout.read()  # type: ignore[union-attr]

    try:
        read_until(lambda: buffers[0].count(b"\n") >= IDS_BEFORE_KILL // processes and both_threads(0)
                   and sum(b.count(b"\n") for b in buffers) >= IDS_BEFORE_KILL, list(range(processes)))
        kill(0)  # while it is still writing
        if processes > 1:
            after = [b.count(b"\n") for b in buffers]
            read_until(lambda: all(buffers[p].count(b"\n") >= after[p] + 20 and both_threads(p)
                                   for p in range(1, processes)), list(range(1, processes)))
            for p in range(1, processes):
                kill(p)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]
            proc.stderr.close()  # type: ignore[union-attr]
    assert all(proc.returncode == -signal.SIGKILL for proc in procs)
    acked = []
    for buffer in buffers:
        for line in buffer.split(b"\n")[:-1]:  # a last, unterminated line was never fully acknowledged
            mid, thread, i = line.decode().split()
            acked.append((int(mid), int(thread), int(i)))
    return acked


def stored_messages(home: Path) -> dict[int, str]:
    """Every stored message's content by id, read with a connection of our own (the raw table);
    the SQLite file is checked for integrity too."""
    url = os.environ.get("FERMIX_DATABASE_URL")
    if url:
        import psycopg

        with psycopg.connect(url) as pg:
            return {int(i): str(c) for i, c in pg.execute("SELECT id, content FROM messages").fetchall()}
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        stored = dict(conn.execute("SELECT id, content FROM messages").fetchall())
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    return stored


def check_after_crash(home: Path, acked: list[tuple[int, int, int]], config: dict[str, Any] | None,
                      processes: int = 1) -> None:
    assert len(acked) >= IDS_BEFORE_KILL
    ids = [mid for mid, _, _ in acked]
    assert len(set(ids)) == len(ids), "every acknowledged id is distinct"

    stored = stored_messages(home)  # the raw table first
    for mid, thread, i in acked:
        assert stored.get(mid) == expected_content(thread, i), f"acknowledged message {mid} lost or altered"

    with MemorySystem.open(home, config=config) as memory:
        for thread in range(2 * processes):
            window = memory.history(AGENT, f"test:chat-{thread}")
            by_id = {m.id: m for m in window}
            mine = [(mid, i) for mid, t, i in acked if t == thread]
            assert mine, "every writer thread was acknowledged at least once"
            for mid, i in mine:
                assert by_id[mid].content == expected_content(thread, i)
                assert by_id[mid].owner_id == OWNER
            # What survived (acknowledged or not) is a gap-free prefix of what the thread wrote.
            indexes = sorted(int(m.content.split()[2]) for m in window)
            assert indexes == list(range(len(indexes)))
            assert [m.id for m in window] == sorted(m.id for m in window)
        report = memory.verify()
        assert report.ok, report.problem
        assert report.events >= len(acked)

        # The store keeps working after the crash: the next id follows on from the log.
        last = max(stored)
        new_id = memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="test:chat-0",
                                       role="user", content="after the crash")
        assert new_id > last
        assert memory.history(AGENT, "test:chat-0")[-1].content == "after the crash"
        assert memory.verify().ok


@pytest.mark.usefixtures("every_store")
@pytest.mark.parametrize("processes", [1, 4])
def test_sigkill_mid_stream_loses_no_acknowledged_message(tmp_path: Path, processes: int) -> None:
    """One writing process killed, or one of four (the others go on writing, then are killed too)."""
    home = tmp_path / "home"
    acked = run_and_kill(home, None, processes)
    check_after_crash(home, acked, None, processes)


def test_sigkill_with_full_durability_loses_no_acknowledged_message(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = {"fermix_core": {"memory": {"durability": "full"}}}
    acked = run_and_kill(home, config)
    check_after_crash(home, acked, config)


def test_two_crashes_in_a_row_keep_every_acknowledged_message(tmp_path: Path) -> None:
    """A second kill, on top of a database recovered from the first, still loses nothing."""
    home = tmp_path / "home"
    first = run_and_kill(home, None)
    # The second child restarts every counter at 0 on the same conversations: compare by id.
    with MemorySystem.open(home) as memory:
        before = {m.id: m.content for t in (0, 1) for m in memory.history(AGENT, f"test:chat-{t}")}
    for mid, thread, i in first:
        assert before[mid] == expected_content(thread, i)
    second = run_and_kill(home, None)
    stored = stored_messages(home)
    for mid, thread, i in first + second:
        assert stored[mid] == expected_content(thread, i)
    assert min(mid for mid, _, _ in second) > max(mid for mid, _, _ in first)
    with MemorySystem.open(home) as memory:
        report = memory.verify()
        assert report.ok, report.problem
