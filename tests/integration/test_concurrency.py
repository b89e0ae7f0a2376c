"""Concurrent writers (group commit across threads, WAL across processes) and a busy database
(R-RETRY): nothing lost, nothing half-written, a typed error when the lock never comes."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
import pytest

from fermix_memory import MemorySystem, StorageBusy

AGENT = "conc-agent"
CHILD_TIMEOUT_S = 60


def count(path: Path, sql: str) -> int:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute(sql).fetchall()[0][0])
    finally:
        conn.close()


def test_eight_threads_appending_on_one_system(tmp_path: Path) -> None:
    threads_n, per_thread = 8, 200
    results: dict[int, list[tuple[int, str]]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)
    with MemorySystem.open(tmp_path / "home") as memory:
        # One window is cached before the storm, so the write-through path is exercised too.
        assert memory.history(AGENT, "test:shared") == []

        def worker(n: int) -> None:
            mine = []
            try:
                start.wait()
                for i in range(per_thread):
                    content = f"thread {n} message {i} \u2713"
                    conv = "test:shared" if i % 2 == 0 else f"test:own-{n}"
                    mid = memory.append_message(agent_id=AGENT, owner_id=f"owner-{n}", conversation=conv,
                                                role="user", content=content)
                    mine.append((mid, content))
            except BaseException as exc:
                errors.append(exc)
            results[n] = mine

        workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == []
        every = [pair for n in range(threads_n) for pair in results[n]]
        ids = [mid for mid, _ in every]
        assert len(every) == threads_n * per_thread
        assert len(set(ids)) == len(ids), "ids are distinct"
        # Each thread saw its own ids grow: an acknowledged id is never reused or reordered.
        for n in range(threads_n):
            assert [mid for mid, _ in results[n]] == sorted(mid for mid, _ in results[n])

        shared = memory.history(AGENT, "test:shared")
        assert sorted((m.id, m.content) for m in shared) == sorted(
            (mid, c) for n in range(threads_n) for i, (mid, c) in enumerate(results[n]) if i % 2 == 0)
        # A window is ordered like the messages index, by (created_at, id): two threads may stamp
        # their messages in one order and commit them in the other.
        assert [(m.created_at, m.id) for m in shared] == sorted((m.created_at, m.id) for m in shared)
        for n in range(threads_n):
            own = memory.history(AGENT, f"test:own-{n}")
            assert [(m.id, m.content) for m in own] == [p for i, p in enumerate(results[n]) if i % 2 == 1]
        report = memory.verify()
        assert report.ok, report.problem
        assert report.events == threads_n * per_thread

    # The cache served the same as the database: a fresh process view agrees.
    with MemorySystem.open(tmp_path / "home") as again:
        assert again.history(AGENT, "test:shared") == shared


CHILD = r"""
import sys
from fermix_memory import MemorySystem
home, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with MemorySystem.open(home) as memory:
    ids = []
    for i in range(n):
        ids.append(memory.append_message(agent_id="conc-agent", owner_id=name, conversation="test:both",
                                         role="user", content=f"{name} {i}"))
    memory.write_memory({"op": "add", "category": "goal", "key": "finish", "value": name},
                        agent_id="conc-agent", owner_id=name)
    assert len(set(ids)) == n
print(" ".join(map(str, ids)))
print("ok")
"""


def run_children(home: Path, per_child: int) -> list[list[int]]:
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(home), name, str(per_child)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in ("p1", "p2")
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        assert proc.returncode == 0, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        lines = out.splitlines()
        assert lines[-1] == "ok"
        outputs.append([int(x) for x in lines[0].split()])
    return outputs


def check_two_processes(home: Path, outputs: list[list[int]], per_child: int) -> None:
    all_ids = outputs[0] + outputs[1]
    assert len(all_ids) == 2 * per_child and len(set(all_ids)) == 2 * per_child
    with MemorySystem.open(home) as memory:
        window = memory.history(AGENT, "test:both")
        assert sorted(m.id for m in window) == sorted(all_ids)
        by_id = {m.id: m.content for m in window}
        for name, ids in zip(("p1", "p2"), outputs, strict=True):
            assert [by_id[mid] for mid in ids] == [f"{name} {i}" for i in range(per_child)]
        assert len(memory.memories(agent_id=AGENT)) == 2
        report = memory.verify()
        assert report.ok, report.problem
    assert count(home / "memory.db", "SELECT count(*) FROM messages") == 2 * per_child


def test_two_processes_appending_to_one_existing_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    MemorySystem.open(home).close()  # the database exists before the writers start
    outputs = run_children(home, 300)
    check_two_processes(home, outputs, 300)


def test_two_processes_creating_the_same_home_at_once(tmp_path: Path) -> None:
    """Two workers starting together on a home that does not exist yet: both must get in."""
    home = tmp_path / "fresh"
    outputs = run_children(home, 300)
    check_two_processes(home, outputs, 300)


def test_a_process_sees_what_another_process_wrote(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id=AGENT, owner_id="me", conversation="test:both", role="user",
                              content="mine")
        assert [m.content for m in memory.history(AGENT, "test:both")] == ["mine"]  # cached now
        run_children(home, 5)
        window = memory.history(AGENT, "test:both")
        assert len(window) == 11
        assert window[0].content == "mine"
        memory.append_message(agent_id=AGENT, owner_id="me", conversation="test:both", role="user",
                              content="mine again")
        assert len(memory.history(AGENT, "test:both")) == 12
        assert memory.verify().ok


# --- a busy database -------------------------------------------------------------------------------


def hold_write_lock(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_a_lock_held_past_every_retry_gives_storage_busy(tmp_path: Path, short_busy_timeout: None) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        first = memory.append_message(agent_id=AGENT, owner_id="o", conversation="test:busy", role="user",
                                      content="before the lock")
        assert [m.id for m in memory.history(AGENT, "test:busy")] == [first]
        holder = hold_write_lock(home / "memory.db")
        try:
            started = time.monotonic()
            with pytest.raises(StorageBusy) as caught:
                memory.append_message(agent_id=AGENT, owner_id="o", conversation="test:busy", role="user",
                                      content="while locked")
            elapsed = time.monotonic() - started
            assert not isinstance(caught.value, apsw.Error)
            assert "locked" in str(caught.value)
            assert elapsed < 5, "three short attempts, not the default busy timeout"
            # Memory writes are refused the same way.
            with pytest.raises(StorageBusy):
                memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": "v"},
                                    agent_id=AGENT, owner_id="o", trust="operator")
            # Reads still work while another connection writes (WAL).
            assert [m.content for m in memory.history(AGENT, "test:busy")] == ["before the lock"]
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        # Nothing of the failed writes was applied, and the cache does not pretend otherwise.
        assert [m.content for m in memory.history(AGENT, "test:busy")] == ["before the lock"]
        assert memory.memories() == []
        assert memory.head().position == first
        assert count(home / "memory.db", "SELECT count(*) FROM events") == 1
        # The store is usable again once the lock is gone.
        second = memory.append_message(agent_id=AGENT, owner_id="o", conversation="test:busy", role="user",
                                       content="after the lock")
        assert second == first + 1
        assert [m.content for m in memory.history(AGENT, "test:busy")] == ["before the lock", "after the lock"]
        assert memory.verify().ok


def test_storage_busy_from_the_busy_writer_of_a_thread_pool(tmp_path: Path, short_busy_timeout: None) -> None:
    """Every caller waiting in one group-commit batch gets the typed error, none is acknowledged."""
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        holder = hold_write_lock(home / "memory.db")
        outcomes: list[object] = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            try:
                result: object = memory.append_message(agent_id=AGENT, owner_id="o", conversation="test:busy",
                                                       role="user", content=f"w{n}")
            except BaseException as exc:
                result = exc
            with lock:
                outcomes.append(result)

        try:
            workers = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert len(outcomes) == 4
        assert all(isinstance(o, StorageBusy) for o in outcomes), outcomes
        assert memory.history(AGENT, "test:busy") == []
        assert count(home / "memory.db", "SELECT count(*) FROM events") == 0


def test_a_lock_released_within_the_retry_window_lets_the_write_through(tmp_path: Path,
                                                                        short_busy_timeout: None) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        holder = hold_write_lock(home / "memory.db")
        # Longer than one busy timeout (50 ms), well inside three attempts.
        release = threading.Timer(0.07, lambda: (holder.execute("ROLLBACK"), holder.close()))
        release.start()
        try:
            mid = memory.append_message(agent_id=AGENT, owner_id="o", conversation="test:busy", role="user",
                                        content="made it")
        finally:
            release.join()
        assert [(m.id, m.content) for m in memory.history(AGENT, "test:busy")] == [(mid, "made it")]
        assert count(home / "memory.db", "SELECT count(*) FROM messages") == 1
        assert memory.verify().ok


def test_reader_connections_of_finished_threads_are_released(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="tg:1", role="user", sender="a",
                              content="hello")

        def read() -> None:
            assert memory.recall("hello", agent_id="ada", owner_id="alice", conversation="tg:1",
                                 source="history").messages

        for _ in range(50):
            thread = threading.Thread(target=read)
            thread.start()
            thread.join()
        gc.collect()
        database = os.path.realpath(memory.home / "memory.db")
        open_files = [p for p in Path("/proc/self/fd").iterdir() if os.path.realpath(p) == database]
        assert 0 < len(open_files) < 10, "one reader connection per finished thread would leak"
