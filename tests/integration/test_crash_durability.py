"""A process killed with SIGKILL mid-write loses no acknowledged message (SPEC §13, R-DURABLE).

A child process appends messages in a loop (two threads, so group commit is in play) and
prints each id only after ``append_message`` returned it. The parent kills the child with
SIGKILL in the middle of the stream, reopens the home and checks that every printed id is
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

home, config = sys.argv[1], json.loads(sys.argv[2])
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

threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def expected_content(thread: int, i: int) -> str:
    return f"t{thread} message {i} \u00e9t\u00e9 \u2713 " + "x" * (i % 50)


def run_and_kill(home: Path, config: dict[str, Any] | None) -> list[tuple[int, int, int]]:
    """Start the child, read at least IDS_BEFORE_KILL acknowledged ids, SIGKILL it mid-stream.

    Returns every complete line the child printed (including lines still in the pipe after
    the kill: those were acknowledged too).
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), json.dumps(config or {})],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    buffer = b""
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        fd = proc.stdout.fileno()
        while buffer.count(b"\n") < IDS_BEFORE_KILL:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                got = buffer.count(b"\n")
                pytest.fail(f"child printed only {got} ids in {READ_TIMEOUT_S}s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                err = proc.stderr.read().decode(errors="replace")
                pytest.fail(f"child exited early (rc={proc.wait()}): {err[-2000:]}")
            buffer += chunk
        # Kill it while it is still writing.
        assert proc.poll() is None, "the child must still be running when it is killed"
        os.kill(proc.pid, signal.SIGKILL)
        buffer += proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    lines = buffer.split(b"\n")[:-1]  # a last, unterminated line was never fully acknowledged
    acked = []
    for line in lines:
        mid, thread, i = line.decode().split()
        acked.append((int(mid), int(thread), int(i)))
    return acked


def check_after_crash(home: Path, acked: list[tuple[int, int, int]], config: dict[str, Any] | None) -> None:
    assert len(acked) >= IDS_BEFORE_KILL
    ids = [mid for mid, _, _ in acked]
    assert len(set(ids)) == len(ids), "every acknowledged id is distinct"

    # The raw table first, with a connection of our own.
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        stored = dict(conn.execute("SELECT id, content FROM messages").fetchall())
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    for mid, thread, i in acked:
        assert stored.get(mid) == expected_content(thread, i), f"acknowledged message {mid} lost or altered"

    with MemorySystem.open(home, config=config) as memory:
        for thread in (0, 1):
            window = memory.history(AGENT, f"test:chat-{thread}")
            by_id = {m.id: m for m in window}
            mine = [(mid, i) for mid, t, i in acked if t == thread]
            assert mine, "both writer threads were acknowledged at least once"
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


def test_sigkill_mid_stream_loses_no_acknowledged_message(tmp_path: Path) -> None:
    home = tmp_path / "home"
    acked = run_and_kill(home, None)
    check_after_crash(home, acked, None)


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
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        stored = dict(conn.execute("SELECT id, content FROM messages").fetchall())
    finally:
        conn.close()
    for mid, thread, i in first + second:
        assert stored[mid] == expected_content(thread, i)
    assert min(mid for mid, _, _ in second) > max(mid for mid, _, _ in first)
    with MemorySystem.open(home) as memory:
        report = memory.verify()
        assert report.ok, report.problem
