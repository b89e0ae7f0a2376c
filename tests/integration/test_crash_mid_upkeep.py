"""A process killed with SIGKILL in the middle of a merge of the history index, or in the middle
of a batched import, loses nothing acknowledged and leaves no half of anything (R-DURABLE).

The child appends messages and prints each id once ``append_message`` returned it, imports a
file and prints its ids once ``import_history`` returned them. It says when a merge step starts
(the background's, in a pause after the import) or when the import's transaction has recorded
its first thousand lines (its progress callback); the parent kills it right then. Real SQLite
files, a real process.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.full_text_catch_up import index_new
from tests.child_process import kill_when

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

AGENT, OWNER = "crash-agent", "crash-owner"
APPENDS = 100
IMPORTED = 4_000

# argv: home, phase ("merge": import, then pause while the background merges; "import": an
# import killed midway). Lines: "acked ID I", "imported ID...", "merging", "importing".
CHILD = r"""
import json, sys, time
from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.search_index import SqliteSearchIndex

home, phase, appends, imported = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()

merge_step = SqliteSearchIndex.merge_step
after_import = []
def announced_merge_step(self, *, whole=None):
    if after_import:  # the merges of the index the import grew
        say("merging")
    return merge_step(self, whole=whole)
SqliteSearchIndex.merge_step = announced_merge_step

memory = MemorySystem.open(home)
for i in range(appends):
    mid = memory.append_message(agent_id="crash-agent", owner_id="crash-owner", conversation="test:typed",
                                role="user", sender="u", content=f"typed message {i} lighthouse")
    say(f"acked {mid} {i}")

def lines(chat):
    return [json.dumps({"agent_id": "crash-agent", "owner_id": "crash-owner", "channel": "test", "chat_id": chat,
                        "role": "user", "sender": "u", "content": f"imported line {i} harbour {i % 97}",
                        "message_id": f"{chat}-{i}"}) for i in range(imported)]

if phase == "merge":
    ids = memory.import_history(lines("first"))
    say("imported " + " ".join(map(str, ids)))
    after_import.append(True)
    while True:
        time.sleep(0.05)  # a pause: the background merges the index the import grew
else:
    started = []
    def importing(done, total):
        if not started:
            started.append(done)
            say("importing")
    memory.import_history(lines("second"), importing=importing)
    say("import returned")
"""


def run_and_kill(home: Path, phase: str, marker: str) -> list[str]:
    """Run the child until it prints ``marker``, SIGKILL it at once, and return every complete
    line it printed (those still in the pipe too: they were acknowledged before the kill)."""
    out = kill_when([sys.executable, "-c", CHILD, str(home), phase, str(APPENDS), str(IMPORTED)],
                    lambda out: f"\n{marker}\n".encode() in b"\n" + out, repr(marker))
    return out.decode().split("\n")[:-1]  # an unterminated last line was never acknowledged


def acked(lines: list[str]) -> dict[int, str]:
    """The acknowledged appends: id -> the content it was given."""
    return {int(mid): f"typed message {i} lighthouse"
            for kind, mid, i in (line.split() for line in lines if line.startswith("acked "))}


def stored(home: Path) -> dict[int, str]:
    """Every message's content by id, read with a connection of our own; the file and its
    full-text index are checked for integrity on the way."""
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # Rows above the index's mark wait for their entries (ADR-0091; the kill may come before
        # the catch-up): with them added, the index must match its table exactly. Rolled back.
        conn.execute("BEGIN")
        try:
            index_new(conn.cursor(), None)
            conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        finally:
            conn.execute("ROLLBACK")
        return {int(i): str(c) for i, c in conn.execute("SELECT id, content FROM messages").fetchall()}
    finally:
        conn.close()


def imported_contents(memory: MemorySystem, chat: str) -> list[str]:
    return [m.content for m in memory.history(AGENT, ("test", chat), limit=IMPORTED + 10)]


def expected_imported() -> list[str]:
    return [f"imported line {i} harbour {i % 97}" for i in range(IMPORTED)]


def test_a_kill_in_the_middle_of_a_merge_loses_nothing_and_the_index_stays_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = run_and_kill(home, "merge", "merging")
    [ids_line] = [line for line in lines if line.startswith("imported ")]
    imported_ids = [int(x) for x in ids_line.split()[1:]]
    assert len(imported_ids) == IMPORTED and len(acked(lines)) == APPENDS

    rows = stored(home)
    for mid, content in acked(lines).items():
        assert rows[mid] == content
    assert [rows[mid] for mid in imported_ids] == expected_imported()

    with MemorySystem.open(home) as memory:
        assert memory.verify().ok
        hits = memory.recall("harbour", agent_id=AGENT, owner_id=OWNER, scope="owner", source="history")
        assert hits.messages and all("harbour" in h.message.content for h in hits.messages if h.context_of is None)
        assert imported_contents(memory, "first") == expected_imported()
        new_id = memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="test:typed", role="user",
                                       content="after the crash")
        assert new_id > max(rows)
        memory.wait_for_background()  # the merge the kill cut short is taken up again
        assert memory.verify().ok
    stored(home)


def test_a_kill_in_the_middle_of_an_import_leaves_none_of_it_and_the_file_imports_whole_again(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = run_and_kill(home, "import", "importing")
    assert "import returned" not in lines and len(acked(lines)) == APPENDS

    rows = stored(home)
    for mid, content in acked(lines).items():
        assert rows[mid] == content
    assert not [c for c in rows.values() if c.startswith("imported line")], "an import is all or nothing"

    with MemorySystem.open(home) as memory:
        assert memory.verify().ok
        again = [json.dumps({"agent_id": AGENT, "owner_id": OWNER, "channel": "test", "chat_id": "second",
                             "role": "user", "sender": "u", "content": content, "message_id": f"second-{i}"})
                 for i, content in enumerate(expected_imported())]
        assert len(memory.import_history(again)) == IMPORTED
        assert memory.import_history(again) == []  # once: the keys are in
        assert imported_contents(memory, "second") == expected_imported()
        assert memory.verify().ok
