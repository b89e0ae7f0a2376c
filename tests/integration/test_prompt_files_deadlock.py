"""Concurrent writers of one owner never deadlock (R-PROMPT), on SQLite and on PostgreSQL.

Apart from ``test_prompt_files.py`` because it is the longest test of the prompt files: in a module
of its own, the suite's two processes (``--dist loadfile``) can run it beside the others.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.waits import HANG_GUARD_S

_DEADLOCK_SCRIPT = textwrap.dedent("""
    import faulthandler, sys, threading
    from fermix_memory import MemorySystem

    # A hang guard, not a time limit: only a deadlock reaches it, and then every thread's stack
    # is printed (the writers stuck, and where) before the process exits.
    faulthandler.dump_traceback_later(float(sys.argv[2]), exit=True)
    writes = int(sys.argv[3])
    m = MemorySystem.open(sys.argv[1])
    def work(t, r, start):
        start.wait()  # the round's writers all set off at once: their commits overlap from the first
        for i in range(writes):
            m.write_memory({"op": "add", "category": "identity", "key": f"k{t}", "value": f"v{r} {i}"},
                           agent_id="ada", owner_id="alice", writer="reviewer")
    for r in range(25):
        start = threading.Barrier(6)
        threads = [threading.Thread(target=work, args=(t, r, start), daemon=True) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()  # until every writer of the round is done: the condition, however long load makes it
    m.close()
    faulthandler.cancel_dump_traceback_later()
    print("ok")
""")

# Writes per writer and round. The deadlock this guards against (PromptFiles.rebuild once held
# the owner's file lock across its write, while the thread leading a commit ran the after-commit
# file writes of every writer in its batch, for the same owner) needs writers of one owner whose
# commits are in flight together, not many commits: each of the 25 rounds starts its 6 writers
# at once (a barrier). SQLite keeps 20 writes each, 3,000 in all: its group commit batches them.
# PostgreSQL commits each write on its own, one owner's one after another (the chain's row lock,
# ADR-0031), at about 50 a second on the test server, so 3,000 took two minutes and more under
# load: 3 each (450 in all) still have every round's six writers contending for the chain, the
# delivery of commits and the files, in a fifth of the time.
DEADLOCK_WRITES = {"sqlite": 20, "postgres": 3}


def test_concurrent_writers_to_one_owner_never_deadlock(tmp_path: Path, every_store: str) -> None:
    home = tmp_path / "home"
    # In a subprocess so that a deadlock fails the test (the child's hang guard) instead of hanging the suite.
    result = subprocess.run([sys.executable, "-c", _DEADLOCK_SCRIPT, str(home), str(HANG_GUARD_S),
                             str(DEADLOCK_WRITES[every_store])],
                            capture_output=True, text=True, timeout=2 * HANG_GUARD_S, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.stdout, result.stderr[-4000:])
