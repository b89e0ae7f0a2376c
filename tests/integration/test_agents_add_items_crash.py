"""A process killed with SIGKILL in the middle of the OpenAI Agents SDK session's ``add_items``
leaves every call recorded whole or not at all (one transaction per call).

A child process adds batches of items through ``FermixAgentsSession.add_items`` and prints each
batch's number once the call returned. The batch to be cut is held inside its write transaction,
after its rows were written and before its commit (the transaction's ``append_each`` waits there
once it printed ``holding``); the parent kills the child then, reopens the home and checks that
every acknowledged batch is there whole, in order, that the cut one left nothing, that the log
verifies, and that the same items can be added again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.openai_agents import FermixAgentsSession
from tests.child_process import kill_when

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

AGENT, OWNER = "ada", "alice"
BATCH = 400  # items of one add_items call
CUT = 3  # the batch the kill cuts, after batches 0, 1 and 2 were acknowledged

CHILD = r"""
import asyncio, sys
from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.openai_agents import FermixAgentsSession
from tests.integration.test_agents_add_items_crash import batch_items

home, cut = sys.argv[1], int(sys.argv[2])
current = [0]
appended = SqlTransaction.append_each

def append_each(self, appends):
    positions = appended(self, appends)
    if current[0] == cut:  # the rows are written, the transaction not committed: wait to be killed
        print("holding", flush=True)
        sys.stdin.readline()
    return positions

SqlTransaction.append_each = append_each
memory = MemorySystem.open(home, config={})
session = FermixAgentsSession.open(memory, "chat-1", agent_id="ada", owner_id="alice", review=False)

async def main():
    for b in range(cut + 1):
        current[0] = b
        await session.add_items(batch_items(b))
        print(f"done {b}", flush=True)

asyncio.run(main())
"""


def batch_items(b: int) -> list[dict[str, object]]:
    """Batch ``b``: user messages, tool calls and their outputs, and replies with their ids."""
    items: list[dict[str, object]] = []
    for i in range(0, BATCH, 4):
        items += [
            {"role": "user", "content": f"batch {b} item {i}"},
            {"type": "function_call", "id": f"fc_{b}_{i}", "call_id": f"call_{b}_{i}", "name": "look",
             "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"call_{b}_{i}", "output": f"batch {b} item {i + 2}"},
            {"type": "message", "role": "assistant", "id": f"msg_{b}_{i}", "status": "completed",
             "content": [{"type": "output_text", "text": f"batch {b} item {i + 3}", "annotations": []}]},
        ]
    return items


def run_and_kill(home: Path) -> list[str]:
    """The child's lines up to ``holding``, when it is killed."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    out = kill_when([sys.executable, "-c", CHILD, str(home), str(CUT)], lambda out: b"holding\n" in out,
                    "'holding'", stdin=subprocess.PIPE, cwd=root, env=env)
    return out.decode().splitlines()


def test_a_kill_inside_add_items_leaves_the_call_whole_or_absent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = run_and_kill(home)
    assert lines == [f"done {b}" for b in range(CUT)] + ["holding"]
    with MemorySystem.open(home, config={}) as memory:
        session = FermixAgentsSession.open(memory, "chat-1", agent_id=AGENT, owner_id=OWNER, review=False)
        acknowledged = [item for b in range(CUT) for item in batch_items(b)]
        assert asyncio.run(session.get_items()) == acknowledged, "every acknowledged call whole, the cut one absent"
        assert len(memory.messages(AGENT, "openai-agents:chat-1")) == len(acknowledged)
        report = memory.verify()
        assert report.ok, report.problem
        asyncio.run(session.add_items(batch_items(CUT)))  # type: ignore[arg-type]
        with_ids = [item for item in batch_items(CUT - 1) if "id" in item]  # an SDK item id is kept once
        asyncio.run(session.add_items(with_ids))  # type: ignore[arg-type]
        assert asyncio.run(session.get_items()) == acknowledged + batch_items(CUT)
        assert memory.verify().ok
