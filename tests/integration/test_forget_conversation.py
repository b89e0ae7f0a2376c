"""Forgetting one conversation: its messages, checkpoints, reviews and the facts learnt only
from it go, with every byte; another conversation and the facts it taught stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fermix_memory import DomainError, MemorySystem
from tests.cli_runner import run_cli
from tests.integration.test_forget import found

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

SECRET = ("Zanzibarquince", "Pomegranatefjord")  # said only in the forgotten conversation
KEPT = ("Kilimanjarotea", "Operatorwalrus")  # said elsewhere, or written by the operator


def fill(home: Path) -> None:
    """Alice in two conversations with ada, each reviewed (the offline rules reviewer makes a
    row from each); an operator's row of hers; a tool row scoped to the forgotten conversation."""
    with MemorySystem.open(home) as memory:
        for conversation, thing, word in (("telegram:secret", "wifi code", SECRET[0]),
                                          ("telegram:other", "door code", KEPT[0])):
            memory.append_message(agent_id="ada", owner_id="alice", conversation=conversation, role="user",
                                  sender="alice", content=f"remember that the {thing} is {word}")
            memory.append_message(agent_id="ada", owner_id="alice", conversation=conversation, role="assistant",
                                  sender="ada", content=f"Noted: {word}")
            memory.review_now(agent_id="ada", owner_id="alice", conversation=conversation)
        memory.dispatch_tool("memory_store", {"key": "note", "value": f"Note {SECRET[1]}"}, agent_id="ada",
                             owner_id="alice", conversation="telegram:secret")
        memory.write_memory({"op": "add", "category": "interest", "key": "walrus", "value": KEPT[1]},
                            agent_id="ada", owner_id="alice", trust="operator")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    fill(tmp_path / "home")
    return tmp_path / "home"


def texts(memory: MemorySystem) -> str:
    return " ".join(m.value for m in memory.memories(agent_id="ada", owner_id="alice", include_archived=True))


def test_a_dry_run_lists_what_would_go_and_changes_nothing(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        last = memory.head().position
        assert SECRET[0] in texts(memory)  # the reviewer learnt it
        report = memory.forget_conversation("ada", "telegram:secret", dry_run=True)
        assert report.dry_run and report.messages == 2 and report.checkpoints == 0
        assert report.review_records >= 2 and len(report.memory_ids) == 2  # the reviewed fact and the tool note
        assert memory.head().position == last and SECRET[0] in texts(memory)


def test_the_conversation_and_what_was_learnt_only_from_it_go(home: Path, tmp_path: Path) -> None:
    with MemorySystem.open(home) as memory:
        other = memory.history("ada", "telegram:other")
        report = memory.forget_conversation("ada", "telegram:secret", reason="asked by alice")
        assert report.erased_events > 4 and report.wal_truncated
        assert memory.history("ada", "telegram:secret", limit=None) == []
        assert memory.history("ada", "telegram:other") == other
        rows = texts(memory)
        assert not any(word in rows for word in SECRET) and all(word in rows for word in KEPT)
        user_md = memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        assert SECRET[0] not in user_md and KEPT[1] in user_md
        assert memory.recall(SECRET[0], agent_id="ada", owner_id="alice", scope="all", source="all").messages == []
        verified = memory.verify()
        assert verified.ok, verified.problem
        assert memory.replay_into(tmp_path / "replayed")["identical"]
        for recorded in memory.events():
            assert not any(word in repr(recorded.event) for word in SECRET), recorded
        # The conversation may start again.
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:secret", role="user",
                              content="hello again")
        assert [m.content for m in memory.history("ada", "telegram:secret")] == ["hello again"]
        assert memory.forget_conversation("ada", "telegram:nothing-here").erased_events == 0
        with pytest.raises(DomainError):
            memory.forget_conversation("ada", "no-colon")


@pytest.mark.sqlite_only("reads the bytes of memory.db, its WAL and the prompt files")
def test_no_byte_of_the_conversation_is_left_in_the_files(home: Path) -> None:
    assert set(found(home, SECRET)) == set(SECRET)
    with MemorySystem.open(home) as memory:
        memory.forget_conversation("ada", "telegram:secret")
    assert found(home, SECRET) == {}
    assert set(found(home, KEPT)) == set(KEPT)


def test_the_cli_forgets_a_conversation_with_dry_run_yes_and_json(home: Path) -> None:
    dry = run_cli("forget", "--conversation", "telegram:secret", "--agent", "ada", "--dry-run", "--json", home=home)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["dry_run"] is True and json.loads(dry.stdout)["messages"] == 2
    no_yes = run_cli("forget", "--conversation", "telegram:secret", "--agent", "ada", home=home)
    assert no_yes.returncode != 0 and "--yes" in no_yes.stderr and no_yes.stderr.count("\n") == 1
    no_agent = run_cli("forget", "--conversation", "telegram:secret", "--yes", home=home)
    assert no_agent.returncode != 0 and "--agent" in no_agent.stderr and no_agent.stderr.count("\n") == 1
    both = run_cli("forget", "--conversation", "telegram:secret", "--memory", "1", "--yes", home=home)
    assert both.returncode != 0 and both.stderr.count("\n") == 1
    done = run_cli("forget", "--conversation", "telegram:secret", "--agent", "ada", "--yes", home=home)
    assert done.returncode == 0 and done.stdout.startswith("erased telegram:secret of ada: 2 messages"), done
