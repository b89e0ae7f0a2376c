"""An erasure killed after its commit but before the file rewrite is finished by the next open."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from tests.integration.held_store import memory_on_held_store
from tests.integration.test_forget import found
from tests.waits import HANG_GUARD_S

SECRETS = ("Quasarlemonpie", "Hiddenmarmotvalley")

KILLED_BEFORE_SCRUB = """
import os, sys
from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.erasure import SqliteErasure

SqliteErasure.scrub = lambda self: os._exit(9)  # the process dies right before the rewrite
with MemorySystem.open(sys.argv[1]) as memory:
    memory.forget_owner("alice")
"""

KILLED_DURING_VACUUM = """
import os, sys
from pathlib import Path
from fermix_memory import MemorySystem
from fermix_memory.entrypoints.bootstrap import bootstrap
from fermix_memory.entrypoints.home import open_store

def die_inside_vacuum(cursor, sql, bindings):
    if sql.lstrip().upper().startswith("VACUUM"):
        cursor.connection.set_progress_handler(lambda: os._exit(9), 50)
    return True

home = Path(sys.argv[1])
store = open_store(home)
with store.exclusive("traced") as writer:
    writer.exec_trace = die_inside_vacuum
with MemorySystem(bootstrap(home, store=store)) as memory:
    memory.forget_owner("alice")
"""


def alice_and_bob(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        for i in range(20):
            memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                                  content=f"I hide {SECRETS[0]} number {i}")
            memory.append_message(agent_id="ada", owner_id="bob", conversation="telegram:bob", role="user",
                                  content=f"bob message {i}")
        memory.write_memory({"op": "add", "category": "preference", "key": "place", "value": SECRETS[1]},
                            agent_id="ada", owner_id="alice", trust="operator")


def killed_forget(home: Path, script: str = KILLED_BEFORE_SCRUB) -> None:
    done = subprocess.run([sys.executable, "-c", script, str(home)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, check=False)
    assert done.returncode == 9, done.stderr
    assert found(home, SECRETS), "the erased text should still be in the files before the next open"


@pytest.mark.parametrize("script", [KILLED_BEFORE_SCRUB, KILLED_DURING_VACUUM], ids=["before", "during-vacuum"])
def test_a_forget_killed_during_the_scrub_is_finished_by_the_next_open(tmp_path: Path, script: str) -> None:
    home = tmp_path / "home"
    alice_and_bob(home)
    killed_forget(home, script)
    with memory_on_held_store(home) as (memory, store):
        assert not SqliteErasure(store).scrub_pending()
        assert memory.memories(owner_id="alice") == []
        assert memory.verify().ok
    assert found(home, SECRETS) == {}


def test_an_unfinished_scrub_that_cannot_run_at_open_is_reported_and_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, short_busy_timeout: None) -> None:
    home = tmp_path / "home"
    alice_and_bob(home)
    killed_forget(home)
    other = apsw.Connection(str(home / "memory.db"))  # another process keeps a read open: WAL pinned
    other.execute("BEGIN")
    other.execute("SELECT count(*) FROM messages").fetchall()
    try:
        with caplog.at_level(logging.WARNING), memory_on_held_store(home) as (_, store):
            assert SqliteErasure(store).scrub_pending()
        assert "an erasure is not finished" in caplog.text
    finally:
        other.execute("COMMIT")
        other.close()
    with memory_on_held_store(home) as (_, store):
        assert not SqliteErasure(store).scrub_pending()
    assert found(home, SECRETS) == {}
