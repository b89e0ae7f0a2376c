"""``history export`` then ``history import``: an export re-imported into its own home adds
nothing, one imported into a fresh home exports to the same lines, and a replayed older
statement never overwrites an operator's newer fact (ADR-0012, ADR-0050); on every store."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER, CONV = "ada", "alice", "telegram:42"


@pytest.fixture
def another_store(every_store: str, request: pytest.FixtureRequest) -> Callable[[], None]:
    """Makes the memories opened from now on use a store of their own (on PostgreSQL, a new
    database: the home folder alone does not name the store there). Set outside ``monkeypatch``,
    as ``every_store`` sets it, which removes it after the test."""

    def switch() -> None:
        if every_store == "postgres":
            os.environ["FERMIX_DATABASE_URL"] = request.getfixturevalue("postgres_server").fresh_database()

    return switch


def home_city(memory: MemorySystem) -> str:
    [row] = [m for m in memory.memories(agent_id=AGENT, owner_id=OWNER) if m.key == "home_city"]
    return row.value


def chat(memory: MemorySystem) -> None:
    """Messages appended through the API (none with a key), two of them identical, a tool call,
    and a message taken back; then the reviewer's fact, corrected by the operator."""
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    s.append("user", "I live in Paris")
    s.append("assistant", "Noted.")
    s.append("user", "hi")
    s.append("user", "hi")
    s.append("assistant", "", tool_calls=[{"id": "call_1", "name": "weather", "arguments": "{}"}])
    s.append("tool", "sunny", tool_call_id="call_1")
    s.append("user", "oops")
    s.retract_newest()
    memory.append_message(agent_id=AGENT, owner_id="bob", conversation="slack:C1", role="user", sender="bob",
                          content="hello", metadata={"lang": "en"})
    memory.review_now(agent_id=AGENT)
    assert home_city(memory) == "Paris"
    [out] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Lyon"},
                                agent_id=AGENT, owner_id=OWNER, trust="operator")
    assert out.status == "replaced"


def test_an_export_imported_into_its_own_home_adds_nothing(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        chat(memory)
        lines = list(memory.export_history())
        assert len(lines) == 7 and all("message_id" in json.loads(line) for line in lines)
        stored = len(memory.messages(AGENT, CONV))
        assert memory.import_history(lines) == []
        assert len(memory.messages(AGENT, CONV)) == stored
        assert memory.review_now(agent_id=AGENT) == []  # no message to review again
        assert home_city(memory) == "Lyon"
    export = tmp_path / "history.jsonl"
    assert run_cli("history", "export", "-o", str(export), home=tmp_path / "home").returncode == 0
    result = run_cli("history", "import", str(export), home=tmp_path / "home")
    assert result.returncode == 0 and "imported 0 messages" in result.stdout, result.stdout
    assert "skipped 7 messages already imported" in result.stdout


def test_an_export_without_message_ids_is_recognised_in_its_own_home_too(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        chat(memory)
        old_style = [json.dumps({k: v for k, v in json.loads(line).items() if k != "message_id"})
                     for line in memory.export_history()]
        assert memory.import_history(old_style) == []


def test_an_export_imported_into_a_fresh_home_exports_to_the_same_lines(
        tmp_path: Path, another_store: Callable[[], None]) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        chat(memory)
        lines = list(memory.export_history())
    another_store()
    with MemorySystem.open(tmp_path / "fresh") as fresh:
        assert len(fresh.import_history(lines)) == len(lines)
        assert list(fresh.export_history()) == lines
        assert fresh.import_history(lines) == []


def test_a_replayed_older_statement_never_overwrites_the_operators_newer_fact(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        chat(memory)
        replayed = json.dumps({"agent_id": AGENT, "owner_id": OWNER, "channel": "telegram", "chat_id": "42",
                               "role": "user", "sender": OWNER, "content": "I live in Paris",
                               "created_at": "2020-01-01T00:00:00+00:00", "message_id": "old-1"})
        assert len(memory.import_history([replayed])) == 1
        [review] = memory.review_now(agent_id=AGENT)
        assert [(o.status, o.reason) for o in review.outcomes] == [("refused", "older_than_operator")]
        assert home_city(memory) == "Lyon"
        refusals = [e.event for e in memory.events() if e.event.kind == "memory.operation_refused"]
        assert [getattr(e, "reason", "") for e in refusals] == ["older_than_operator"]
        # A newer statement of the owner still wins: the latest statement is the fact.
        memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", sender=OWNER,
                              content="I live in Berlin")
        memory.review_now(agent_id=AGENT)
        assert home_city(memory) == "Berlin"
