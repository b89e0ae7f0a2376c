"""A dry run of forgetting an owner or one memory row says what would go (counts, and the rows,
revisions and messages concerned) and changes nothing: not a byte of memory.db, its WAL or the
prompt files, not an event, not a row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import InvalidArgument, MemorySystem, NotFound
from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

WHO = {"agent_id": "ada", "owner_id": "alice"}


def fill(home: Path) -> dict[str, int]:
    """Alice: two messages, a profile row stated twice (USER.md 1 and 2), a tool note; Bob: a row."""
    with MemorySystem.open(home) as memory:
        said = [memory.append_message(conversation="telegram:alice", role=role, sender=role,
                                      content=f"{role} says Wombatgate", **WHO) for role in ("user", "assistant")]
        [name] = memory.write_memory({"op": "add", "category": "identity", "key": "name", "value": "Ada"},
                                     trust="operator", **WHO)
        assert name.memory_id is not None
        memory.write_memory({"op": "replace", "id": name.memory_id, "value": "Ada Lovelace"}, trust="operator", **WHO)
        note = memory.dispatch_tool("memory_store", {"key": "note", "value": "Parcel Wombatgate"},
                                    conversation="telegram:alice", **WHO)
        memory.write_memory({"op": "add", "category": "interest", "key": "birds", "value": "Likes Kestrels"},
                            agent_id="ada", owner_id="bob", trust="operator")
        return {"name": name.memory_id, "note": note["id"], "first": said[0], "second": said[1]}


def state(memory: MemorySystem, home: Path) -> dict[str, Any]:
    """Everything a dry run must leave as it was, as either store shows it."""
    files = {str(p.relative_to(home)): p.read_bytes() for p in sorted((home / "memory").rglob("*")) if p.is_file()}
    return {"head": str(memory.head()), "events": [repr(r) for r in memory.events()], "files": files,
            "rows": memory.memories(include_archived=True),
            "revisions": {n: memory.resource_history(n, **WHO) for n in ("user_md", "memory_md")}}


def db_bytes(home: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(home.glob("memory.db*"))}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_an_owner_dry_run_lists_what_would_go_and_changes_nothing(home: Path) -> None:
    ids = fill(home)
    with MemorySystem.open(home) as memory:
        before = state(memory, home)
        report = memory.forget_owner("alice", dry_run=True)
        assert report.dry_run and not report.wal_truncated and report.bytes_before == report.bytes_after == 0
        [(agent, content)] = report.content.items()
        assert agent == "ada" and report.erased_events == {"ada": content.events} and content.events >= 7
        assert content.messages == [ids["first"], ids["second"]] and content.conversations == ["telegram:alice"]
        assert content.memory_ids == [ids["name"], ids["note"]]
        assert [(r.owner_id, r.name, r.revision) for r in content.revisions] == [
            ("alice", "user_md", 1), ("alice", "user_md", 2)]
        assert state(memory, home) == before
        assert memory.forget_owner("carol", dry_run=True).erased_events == {}
        with pytest.raises(InvalidArgument):
            memory.forget_owner("alice", dry_run="yes")  # type: ignore[arg-type]
        done = memory.forget_owner("alice")  # the erasure takes what the dry run listed
        assert done.erased_events == report.erased_events and done.content == report.content and not done.dry_run


def test_a_memory_dry_run_lists_what_would_go_and_changes_nothing(home: Path) -> None:
    ids = fill(home)
    with MemorySystem.open(home) as memory:
        before = state(memory, home)
        report = memory.forget_memory(ids["name"], dry_run=True)
        assert report.dry_run and not report.wal_truncated and (report.agent_id, report.owner_id) == ("ada", "alice")
        assert report.erased_events == 4 and report.redacted_revisions == 2  # add, replace, USER.md 1 and 2
        assert [(r.owner_id, r.name, r.revision) for r in report.revisions] == [
            ("alice", "user_md", 1), ("alice", "user_md", 2)]
        assert state(memory, home) == before
        with pytest.raises(NotFound):
            memory.forget_memory(10**6, dry_run=True)
        done = memory.forget_memory(ids["name"])
        assert (done.erased_events, done.revisions) == (report.erased_events, report.revisions)


@pytest.mark.sqlite_only("compares the bytes of memory.db and its WAL")
def test_no_dry_run_changes_a_byte_of_the_database_its_wal_or_the_prompt_files(home: Path) -> None:
    ids = fill(home)
    with MemorySystem.open(home) as memory:
        # Taken once the store is open (opening it for writing may stamp the file's header).
        before, files = db_bytes(home), state(memory, home)["files"]
        memory.forget_owner("alice", dry_run=True)
        memory.forget_memory(ids["name"], dry_run=True)
        conversation = memory.forget_conversation("ada", "telegram:alice", dry_run=True)
        assert conversation.dry_run and not conversation.wal_truncated and conversation.messages == 2
        assert db_bytes(home) == before and state(memory, home)["files"] == files


def test_the_cli_dry_runs_need_no_yes_and_speak_json(home: Path) -> None:
    ids = fill(home)
    with MemorySystem.open(home) as memory:
        before = state(memory, home)
    owner = run_cli("forget", "alice", "--dry-run", home=home)
    assert owner.returncode == 0, owner.stderr
    assert owner.stdout.startswith("would erase owner 'alice' with ada:")
    assert "2 messages in telegram:alice" in owner.stdout
    assert f"memory rows: {ids['name']}, {ids['note']}" in owner.stdout and "user_md rev 2 of alice" in owner.stdout
    as_json = json.loads(run_cli("forget", "alice", "--dry-run", "--json", home=home).stdout)
    assert as_json["dry_run"] is True and as_json["wal_truncated"] is False
    assert as_json["content"]["ada"]["messages"] == [ids["first"], ids["second"]]
    row = run_cli("forget", "--memory", str(ids["name"]), "--dry-run", home=home)
    assert row.returncode == 0 and row.stdout == (
        f"would erase memory {ids['name']} of ada/alice: 4 events; prompt-file revisions: user_md rev 1 of alice,"
        " user_md rev 2 of alice\n"), row
    row_json = json.loads(run_cli("forget", "--memory", str(ids["name"]), "--dry-run", "--json", home=home).stdout)
    assert row_json["dry_run"] is True and [r["revision"] for r in row_json["revisions"]] == [1, 2]
    conversation = json.loads(run_cli("forget", "--conversation", "telegram:alice", "--agent", "ada", "--dry-run",
                                      "--json", home=home).stdout)
    assert conversation["dry_run"] is True and conversation["wal_truncated"] is False
    with MemorySystem.open(home) as memory:
        assert state(memory, home) == before
    no_yes = run_cli("forget", "alice", home=home)
    assert no_yes.returncode != 0 and "--dry-run" in no_yes.stderr and no_yes.stderr.count("\n") == 1
