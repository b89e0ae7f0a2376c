"""Forgetting one memory row removes every byte of each value it had, and nothing else."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from fermix_memory import AsyncMemorySystem, DomainError, MemorySystem, NotFound
from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from tests.cli_runner import run_cli
from tests.integration.held_store import memory_on_held_store
from tests.integration.test_forget import found
from tests.waits import HANG_GUARD_S

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

# Every value the row ever had, and the words of the rows that must stay.
ROW_VALUES = ("Takes Xylophonemedicine", "Takes Quokkapillsdaily", "Takes Narwhaltonic")
KEPT = ("Likes Kestrelwatching", "Bobzebrafacts", "Ada says Umbrellaprotocol")
RULE = "Always whisper Vermilionrule"


def fill(home: Path) -> int:
    """Alice's row (added, replaced twice, archived, restored, Bob's refused replace naming it),
    another row of hers, Bob's row, an operator's standing rule and the messages beside."""
    with MemorySystem.open(home) as memory:
        for owner in ("alice", "bob"):
            memory.append_message(agent_id="ada", owner_id=owner, conversation=f"telegram:{owner}", role="user",
                                  sender=owner, content=f"hello from {owner}")
        [row] = memory.write_memory({"op": "add", "category": "identity", "key": "medicine",
                                     "value": ROW_VALUES[0]}, agent_id="ada", owner_id="alice", trust="operator")
        assert row.memory_id is not None
        for value in ROW_VALUES[1:]:
            memory.write_memory({"op": "replace", "id": row.memory_id, "value": value}, agent_id="ada",
                                owner_id="alice", trust="operator")
        memory.write_memory({"op": "archive", "id": row.memory_id, "reason": "stopped"}, agent_id="ada",
                            owner_id="alice", trust="operator")
        memory.restore(row.memory_id)
        [refused] = memory.write_memory({"op": "replace", "id": row.memory_id, "value": "bob was here"},
                                        agent_id="ada", owner_id="bob", writer="tool", trust="guest")
        assert refused.status == "refused"
        memory.write_memory({"op": "add", "category": "interest", "key": "birds", "value": KEPT[0]},
                            agent_id="ada", owner_id="alice", trust="operator")
        memory.write_memory({"op": "add", "category": "interest", "key": "zebras", "value": KEPT[1]},
                            agent_id="ada", owner_id="bob", trust="operator")
        memory.write_memory({"op": "add", "category": "directive", "key": "tone", "value": KEPT[2]},
                            agent_id="ada", owner_id="alice", trust="operator")
        assert ROW_VALUES[2] in memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        return row.memory_id


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.mark.sqlite_only("reads the bytes of memory.db, its WAL and the prompt files")
def test_every_value_of_the_row_leaves_the_database_its_wal_and_the_files(home: Path) -> None:
    row = fill(home)
    assert set(found(home, ROW_VALUES)) == set(ROW_VALUES)  # the scan can see them at all
    with MemorySystem.open(home) as memory:
        report = memory.forget_memory(row, reason="asked by alice")
        assert (report.agent_id, report.owner_id, report.memory_id) == ("ada", "alice", row)
        assert report.wal_truncated and report.erased_events >= 7 and report.redacted_revisions >= 3
        assert ROW_VALUES[2] not in memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        assert not (home / "memory.db-wal").exists() or found(home, ROW_VALUES) == {}
    assert found(home, ROW_VALUES) == {}
    assert set(found(home, KEPT)) == set(KEPT)


def test_only_the_row_goes_the_log_verifies_and_replays_to_the_same_tables(home: Path, tmp_path: Path) -> None:
    row = fill(home)
    with MemorySystem.open(home) as memory:
        others = [m for m in memory.memories(include_archived=True) if m.id != row]
        history = {o: memory.history("ada", f"telegram:{o}") for o in ("alice", "bob")}
        bob_files = {n: memory.prompt_file("ada", "bob", n).read_text(encoding="utf-8") for n in ("memory_md",)}
        report = memory.forget_memory(row)
        assert memory.memories(include_archived=True) == others
        assert {o: memory.history("ada", f"telegram:{o}") for o in ("alice", "bob")} == history
        assert {n: memory.prompt_file("ada", "bob", n).read_text(encoding="utf-8") for n in bob_files} == bob_files
        with pytest.raises(NotFound):
            memory.memory(row)
        assert memory.recall("Narwhaltonic", agent_id="ada", owner_id="alice", scope="all").memories == []
        user_md = memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        assert KEPT[0] in user_md and not any(v in user_md for v in ROW_VALUES)
        for revision in memory.resource_history("user_md", agent_id="ada", owner_id="alice"):
            text = memory.resource_revision("user_md", revision.revision, agent_id="ada", owner_id="alice").content
            assert not any(v in text for v in ROW_VALUES)
        verified = memory.verify()
        assert verified.ok, verified.problem
        assert verified.redacted == report.erased_events
        replay = memory.replay_into(tmp_path / "replayed")
        assert replay["identical"], replay["differing_tables"]
        [record] = [r for r in memory.events() if r.event.kind == "memory.forgotten"]
        assert (record.event.memory_id, record.event.owner_id, len(record.event.redacted_positions)) == (
            row, "alice", report.erased_events)
        for recorded in memory.events():  # no readable event carries any value the row had
            assert not any(v in repr(recorded.event) for v in ROW_VALUES), recorded


def test_a_standing_rule_leaves_every_owners_memory_md(home: Path, tmp_path: Path) -> None:
    fill(home)
    with MemorySystem.open(home) as memory:
        [rule] = memory.write_memory({"op": "add", "category": "directive", "key": "voice", "value": RULE},
                                     agent_id="ada", owner_id="alice", trust="operator")
        assert rule.memory_id is not None
        assert RULE in memory.prompt_file("ada", "bob", "memory_md").read_text(encoding="utf-8")
        report = memory.forget_memory(rule.memory_id)
        assert report.redacted_revisions >= 2  # alice's MEMORY.md and bob's
        for owner in ("alice", "bob"):
            text = memory.prompt_file("ada", owner, "memory_md").read_text(encoding="utf-8")
            assert RULE not in text and KEPT[2] in text
        assert memory.compose_prompt("ada", "bob", "telegram:bob")[0]["content"].count(RULE) == 0
        assert memory.verify().ok
        assert memory.replay_into(tmp_path / "replayed")["identical"]
        for recorded in memory.events():
            assert RULE not in repr(recorded.event)


def test_forgetting_then_forgetting_the_owner_and_coming_back_still_verifies(home: Path, tmp_path: Path) -> None:
    row = fill(home)
    with MemorySystem.open(home) as memory:
        memory.forget_memory(row)
        with pytest.raises(NotFound, match=f"memory {row}"):
            memory.forget_memory(row)  # erased already, nothing pending: nothing to do
        memory.write_memory({"op": "add", "category": "identity", "key": "medicine", "value": "Takes nothing"},
                            agent_id="ada", owner_id="alice", trust="operator")  # the key is free again
        memory.forget_owner("alice")
        verified = memory.verify()
        assert verified.ok, verified.problem
        assert memory.replay_into(tmp_path / "replayed")["identical"]


def test_bad_ids_and_reasons_are_refused_and_nothing_is_written(home: Path) -> None:
    fill(home)
    with MemorySystem.open(home) as memory:
        last = memory.head().position
        for bad in ("7", 1.5, True, None):
            with pytest.raises(DomainError):
                memory.forget_memory(bad)  # type: ignore[arg-type]
        for missing in (-1, 10**6, 2**70):
            with pytest.raises(NotFound):
                memory.forget_memory(missing)
        with pytest.raises(DomainError, match="reason"):
            memory.forget_memory(1, reason="x" * 501)
        assert memory.head().position == last


def test_the_async_api_forwards_forget_memory(home: Path) -> None:
    row = fill(home)

    async def forget() -> int:
        async with AsyncMemorySystem.open(home) as memory:
            report = await memory.forget_memory(row)
            return report.erased_events

    assert asyncio.run(forget()) >= 7


def test_the_cli_forgets_one_row_with_yes_json_and_one_line_errors(home: Path) -> None:
    row = fill(home)
    refused = run_cli("forget", "--memory", str(row), home=home)
    assert refused.returncode != 0 and "--yes" in refused.stderr and refused.stderr.count("\n") == 1
    both = run_cli("forget", "alice", "--memory", str(row), "--yes", home=home)
    assert both.returncode != 0 and both.stderr.count("\n") == 1 and "no owner" in both.stderr
    neither = run_cli("forget", "--yes", home=home)
    assert neither.returncode != 0 and "--memory ID" in neither.stderr and neither.stderr.count("\n") == 1
    bad = run_cli("forget", "--memory", "abc", "--yes", home=home)
    assert bad.returncode != 0 and "whole number" in bad.stderr
    done = run_cli("forget", "--memory", str(row), "--yes", "--json", home=home)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["memory_id"] == row and report["owner_id"] == "alice" and report["erased_events"] >= 7
    human = run_cli("forget", "--memory", str(row), "--yes", home=home)
    assert human.returncode == 1 and human.stderr.count("\n") == 1 and f"memory {row}" in human.stderr
    assert "erase this memory row instead of an owner" in run_cli("forget", "--help", home=home).stdout


KILLED_BEFORE_SCRUB = """
import os, sys
from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.erasure import SqliteErasure

SqliteErasure.scrub = lambda self: os._exit(9)  # the process dies right before the rewrite
with MemorySystem.open(sys.argv[1]) as memory:
    memory.forget_memory(int(sys.argv[2]))
"""


@pytest.mark.sqlite_only("kills a process holding memory.db and reads its bytes")
def test_a_forget_killed_before_the_rewrite_is_finished_by_the_next_open(home: Path) -> None:
    row = fill(home)
    done = subprocess.run([sys.executable, "-c", KILLED_BEFORE_SCRUB, str(home), str(row)], capture_output=True,
                          text=True, timeout=HANG_GUARD_S, check=False)
    assert done.returncode == 9, done.stderr
    assert found(home, ROW_VALUES), "the erased text should still be in the files before the next open"
    with memory_on_held_store(home) as (memory, store):
        assert not SqliteErasure(store).scrub_pending()
        assert memory.verify().ok
    assert found(home, ROW_VALUES) == {}


@pytest.mark.sqlite_only("nulls a payload in memory.db behind the library's back")
def test_verify_names_a_redaction_no_erasure_record_accounts_for(home: Path) -> None:
    row = fill(home)
    with MemorySystem.open(home) as memory:
        report = memory.forget_memory(row)
        kept = next(r.position for r in memory.events() if r.event.kind == "memory.added" and r.position != row)
    db = apsw.Connection(str(home / "memory.db"))
    db.execute("UPDATE events SET payload = NULL WHERE position = ?", (kept,))  # tidy tampering
    db.close()
    with MemorySystem.open(home) as memory:
        verified = memory.verify()
        assert not verified.ok and verified.first_bad_position == kept
        assert "no recorded erasure names it" in verified.problem
        assert verified.redacted == report.erased_events + 1
