"""Two processes on one home: while one makes an owner's prompt files match their revisions
(reads the revision, then writes), the other neither writes nor removes prompt files. Without
it a process holding an older revision could write it over a newer one, or write back the files
of an owner the other process has just forgotten. Only a second real process can show this."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
from tests.waits import HANG_GUARD_S

pytest.importorskip("fcntl")

HOLDER = """
import sys
from pathlib import Path
from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
files = PromptFileFolder(Path(sys.argv[1]))
with files.syncing("ada", "alice"):
    files.write("ada", "alice", "user_md", "from the other process")
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_sync_in_another_process_holds_back_this_processes_writes_and_removals(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        files = PromptFileFolder(tmp_path)
        done = threading.Event()

        def remove_then_write() -> None:
            with files.syncing("ada", "bob"):  # another owner: the lock is the whole home's
                files.remove("ada", "alice")
            done.set()

        worker = threading.Thread(target=remove_then_write)
        worker.start()
        assert not done.wait(0.5), "this process went ahead while the other one was syncing"
        assert files.read("ada", "alice", "user_md") == "from the other process"
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert done.wait(HANG_GUARD_S), "released by the other process, this one goes on"
        worker.join(HANG_GUARD_S)
        assert files.read("ada", "alice", "user_md") is None
    finally:
        holder.kill()
        holder.wait(30)


def test_nested_syncing_in_one_thread_does_not_wait_for_itself(tmp_path: Path) -> None:
    files = PromptFileFolder(tmp_path)
    with files.syncing("ada", "alice"), files.syncing("ada", "alice"):
        files.write("ada", "alice", "memory_md", "x")
    assert files.remove("ada", "alice")  # takes the lock again once released
    assert not (tmp_path / "memory" / "ada" / "alice").exists()
    assert (tmp_path / "memory" / ".lock").read_bytes() == b"", "the lock file holds nothing and names no one"
