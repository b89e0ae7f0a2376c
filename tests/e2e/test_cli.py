"""The ``fermix`` command against a temporary home: in-process through ``cli.main`` (the
installed command itself is smoke-tested in a subprocess in test_installed_command.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import apsw
import pytest

from tests.cli_runner import run_cli as fermix


def line(**overrides: object) -> str:
    record = {"agent_id": "ada", "owner_id": "alice", "channel": "telegram", "chat_id": "42",
              "role": "user", "sender": "alice", "content": "I live in Paris"}
    record.update(overrides)
    return json.dumps(record)


def files_holding(home: Path, word: str) -> list[Path]:
    """Every file under ``home`` whose bytes contain ``word`` (any case)."""
    return [p for p in home.rglob("*") if p.is_file() and word.lower().encode() in p.read_bytes().lower()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.mark.usefixtures("recall_by_meaning_default")  # as a user runs it: by meaning where the extra is
def test_demo_runs_the_whole_loop_offline(home: Path) -> None:
    first = fermix("demo", "--json", home=home)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["imported"] == 12 and data["verified"] is True
    [review] = data["reviews"]
    assert review["status"] == "completed" and review["applied"] > 0
    # "I live in Paris" then "I moved to Berlin": one row, the latest statement.
    assert "- home_city: Berlin" in data["user_md"] and "Paris" not in data["user_md"]
    assert "- name: Alice Martin" in data["user_md"]
    assert "Always answer in English" in data["memory_md"]
    first_hit = data["recall_memories"][0]
    assert (first_hit["key"], first_hit["value"]) == ("home_city", "Berlin")
    # With the [semantic] extra the demo asks as a person would, and still finds the home city first.
    semantic = importlib.util.find_spec("onnxruntime") is not None
    assert data["question"] == ("where does the user live" if semantic else "home city")
    assert (home / "memory" / "ada" / "alice" / "USER.md").read_text(encoding="utf-8") == data["user_md"]
    again = json.loads(fermix("demo", "--json", home=home).stdout)
    assert again["imported"] == 0 and again["reviews"] == [] and again["user_md"] == data["user_md"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_demo_never_writes_into_a_home_that_holds_data(home: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(line(content="My name is Ada Lovelace") + "\n", encoding="utf-8")
    assert fermix("history", "import", str(source), home=home).returncode == 0
    before = snapshot(home)
    refused = fermix("demo", home=home)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith(f"fermix: error: {home} already holds data (") and "memory.db" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "--home" in refused.stderr
    assert snapshot(home) == before
    # Without --home: ./fermix-demo, never $FERMIX_HOME (nor ~/.fermix).
    monkeypatch.setenv("FERMIX_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    ran = fermix("demo", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["home"] == "fermix-demo" and (tmp_path / "fermix-demo" / "memory.db").is_file()
    assert snapshot(home) == before
    # A folder holding anything else is refused too, and left as it was.
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine", encoding="utf-8")
    refused = fermix("demo", "--home", str(tmp_path / "notes"))
    assert refused.returncode == 1 and "todo.txt" in refused.stderr
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["todo.txt"]


def test_the_readme_demo_command_runs_twice_in_a_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = fermix("--home", "./fermix-demo", "demo")
    second = fermix("--home", "./fermix-demo", "demo")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "imported 12 sample messages" in first.stdout and "imported 0 sample messages" in second.stdout
    # The mark alone makes a folder the demo's: without it, even the demo's own files are refused.
    (tmp_path / "fermix-demo" / "DEMO").unlink()
    refused = fermix("--home", "./fermix-demo", "demo")
    assert refused.returncode == 1 and "already holds data" in refused.stderr
    assert not (tmp_path / "fermix-demo" / "DEMO").exists()
    # A folder holding only a config.toml (a provider to try the demo with) is accepted.
    (tmp_path / "tried").mkdir()
    (tmp_path / "tried" / "config.toml").write_text("[fermix_core.memory]\nreview_interval_hours = 1.0\n")
    assert fermix("demo", "--home", str(tmp_path / "tried")).returncode == 0


def test_import_export_round_trip(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join([
        line(),
        line(role="assistant", sender="ada", content="Noted — Paris ✨", trust="operator"),
        line(chat_id="43", thread_scope="t:1", content="other thread", metadata={"k": [1, 2]},
             created_at="2026-01-02T03:04:05+00:00"),
    ]) + "\n", encoding="utf-8")
    result = fermix("history", "import", str(source), "--json", home=home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["imported"] == 3
    exported = fermix("history", "export", home=home)
    records = [json.loads(x) for x in exported.stdout.splitlines()]
    assert [r["content"] for r in records] == ["I live in Paris", "Noted — Paris ✨", "other thread"]
    assert records[2]["thread_scope"] == "t:1" and records[2]["metadata"] == {"k": [1, 2]}
    assert records[2]["created_at"] == "2026-01-02T03:04:05+00:00"
    # What export writes, import reads back.
    again = tmp_path / "again.jsonl"
    again.write_text(exported.stdout, encoding="utf-8")
    other = tmp_path / "other"
    assert fermix("history", "import", str(again), home=other).returncode == 0
    assert fermix("history", "export", home=other).stdout == exported.stdout


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("{not json", "line 2"),
        (json.dumps({"agent_id": "ada"}), "missing"),
        (line(role="wizard"), "role"),
        (line(trust="root"), "trust"),
        (line(extra=1), "unknown key"),
        (line(created_at="yesterday"), "created_at"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_written(home: Path, tmp_path: Path, bad: str, needle: str) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(line() + "\n" + bad + "\n" + line() + "\n", encoding="utf-8")
    result = fermix("history", "import", str(source), home=home)
    assert result.returncode == 1
    assert result.stderr.startswith("fermix: error: line 2:"), result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert fermix("history", "export", home=home).stdout == ""


def test_verify_names_a_tampered_event(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(line(content=f"message {i}") for i in range(10)) + "\n", encoding="utf-8")
    assert fermix("history", "import", str(source), home=home).returncode == 0
    assert fermix("events", "verify", home=home).returncode == 0
    conn = apsw.Connection(str(home / "memory.db"))
    conn.execute("DROP TRIGGER events_redact_only")
    conn.execute("UPDATE events SET payload = replace(payload, 'message 6', 'message X') WHERE position = 7")
    conn.close()
    result = fermix("events", "verify", "--json", home=home)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["first_bad_position"] == 7
    assert "event 7" in result.stderr


def test_replay_into_a_new_folder(home: Path, tmp_path: Path) -> None:
    assert fermix("demo", home=home).returncode == 0
    result = fermix("events", "replay", "--into", str(tmp_path / "rebuilt"), "--json", home=home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["identical"] is True
    refused = fermix("events", "replay", "--into", str(tmp_path / "rebuilt"), home=home)
    assert refused.returncode == 1 and "already exists" in refused.stderr


def test_memory_commands(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(line() + "\n", encoding="utf-8")
    assert fermix("history", "import", str(source), home=home).returncode == 0
    from fermix_memory import MemorySystem

    with MemorySystem.open(home) as memory:
        [outcome] = memory.write_memory({"op": "add", "category": "identity", "key": "home city",
                                         "value": "Lives in Paris"}, agent_id="ada", owner_id="alice", trust="operator")
        memory.write_memory({"op": "archive", "id": outcome.memory_id, "reason": "moved"},
                            agent_id="ada", owner_id="alice", trust="operator")
    listed = json.loads(fermix("memory", "list", "--json", home=home).stdout)
    assert [row["key"] for row in listed] == ["home_city"] and listed[0]["archived_at"]
    assert json.loads(fermix("memory", "list", "--active", "--json", home=home).stdout) == []
    restored = fermix("memory", "restore", str(outcome.memory_id), "--json", home=home)
    assert restored.returncode == 0 and json.loads(restored.stdout)["archived_at"] is None
    shown = json.loads(fermix("memory", "show", str(outcome.memory_id), "--json", home=home).stdout)
    assert [e["kind"] for e in shown["events"]] == ["memory.added", "memory.archived", "memory.restored"]
    found = json.loads(fermix("memory", "search", "Paris", "--agent", "ada", "--owner", "alice",
                              "--source", "all", "--json", home=home).stdout)
    assert found["memories"][0]["memory"]["value"] == "Lives in Paris"
    assert found["messages"]
    other = json.loads(fermix("memory", "search", "Paris", "--agent", "ada", "--owner", "bob",
                              "--source", "all", "--scope", "all", "--json", home=home).stdout)
    assert other == {"memories": [], "messages": [], "ranked": [], "vectors_waiting": None}  # searched by words


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "restore", "999"),
        ("memory", "show", "999"),
        ("memory", "search", "x", "--agent", "", "--owner", "o"),
        ("memory", "search", "x", "--agent", "a", "--owner", "o", "--conversation", "nocolon"),
        ("history", "import", "/nonexistent/file.jsonl"),
    ],
)
def test_user_errors_are_one_line_and_non_zero(home: Path, args: tuple[str, ...]) -> None:
    result = fermix(*args, home=home)
    assert result.returncode == 1
    assert result.stderr.startswith("fermix: error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_a_foreign_file_is_refused_and_left_alone(home: Path) -> None:
    home.mkdir(parents=True)
    db = home / "memory.db"
    db.write_bytes(b"this is not a database at all" * 100)
    before = db.read_bytes()
    result = fermix("memory", "list", home=home)
    assert result.returncode == 1 and "not a fermix-memory database" in result.stderr
    assert db.read_bytes() == before


def test_setup_writes_the_config_and_keeps_the_rest(home: Path) -> None:
    assert fermix("setup", "init", home=home).returncode == 0
    again = fermix("setup", "init", home=home)
    assert again.returncode == 1 and "already exists" in again.stderr
    config = home / "config.toml"
    config.write_text(config.read_text(encoding="utf-8") + '\n[host_app]\ncolour = "blue"\n', encoding="utf-8")
    assert fermix("setup", "review-interval", "6", home=home).returncode == 0
    shown = json.loads(fermix("setup", "show", "--json", home=home).stdout)
    assert shown["settings"]["memory"]["review_interval_hours"] == 6
    assert 'colour = "blue"' in config.read_text(encoding="utf-8")
    assert fermix("setup", "review-interval", "0", home=home).returncode == 0
    bad = fermix("setup", "review-interval", "-3", home=home)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "hours must be 0" in bad.stderr
    # A config the memory refuses to open with can still be inspected and mended by setup.
    config.write_text("[fermix_core.memory]\nreview_intervl_hours = 3\n", encoding="utf-8")
    refused = fermix("memory", "list", home=home)
    assert refused.returncode == 1 and "did you mean review_interval_hours" in refused.stderr


def test_forget_asks_for_yes_then_erases_the_owner(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join([line(content="I keep a pet Axolotlbertram"),
                                 line(owner_id="bob", sender="bob", chat_id="7", content="bob stays")]) + "\n",
                      encoding="utf-8")
    assert fermix("history", "import", str(source), home=home).returncode == 0
    refused = fermix("forget", "alice", home=home)
    assert refused.returncode == 1
    assert "--yes" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert files_holding(home, "axolotlbertram")  # refused: still there
    done = fermix("forget", "alice", "--yes", "--reason", "request 7", "--json", home=home)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["owner_id"] == "alice" and report["erased_events"] == {"ada": 1} and report["wal_truncated"]
    assert files_holding(home, "axolotlbertram") == []
    exported = fermix("history", "export", home=home)
    assert "bob stays" in exported.stdout and "Axolotl" not in exported.stdout
    assert fermix("events", "verify", home=home).returncode == 0
    human = fermix("forget", "nobody", "--yes", home=home)
    assert human.returncode == 0 and "nothing erased" in human.stdout


def test_events_log_shows_redacted_events_as_such(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join([line(content="first words"), line(owner_id="bob", sender="bob", content="hi"),
                                 line(content="second words")]) + "\n", encoding="utf-8")
    assert fermix("history", "import", str(source), home=home).returncode == 0
    assert fermix("forget", "alice", "--agent", "ada", "--yes", home=home).returncode == 0
    result = fermix("events", "log", "--json", home=home)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["position"], r["kind"], r["redacted"]) for r in rows] == [
        (1, "message.appended", True), (2, "message.appended", False), (3, "message.appended", True),
        (4, "owner.forgotten", False), (5, "export_keys.destroyed", False), (6, "erasure.receipted", False)]
    assert rows[0]["event"] is None and len(rows[0]["payload_sha256"]) == 64
    assert rows[1]["event"]["content"] == "hi"
    assert rows[3]["event"]["erased_events"] == 2
    logged = fermix("events", "log", "--kind", "message.appended", "--limit", "2", home=home)
    header, *human = logged.stdout.splitlines()
    assert header.split("\t") == ["POSITION", "KIND", "STREAM", "EVENT"]
    assert len(human) == 2 and human[0].endswith("[redacted]") and "\tada/bob  user bob: hi  " in human[1]
    assert fermix("events", "log", "--after", "3", home=home).stdout.count("\n") == 4


def test_forget_with_a_reader_elsewhere_exits_1_and_says_to_run_it_again(home: Path, tmp_path: Path,
                                                                         short_busy_timeout: None) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(line(content="Capybaraquince") + "\n", encoding="utf-8")
    assert fermix("history", "import", str(source), home=home).returncode == 0
    reader = apsw.Connection(str(home / "memory.db"))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchall()  # an open read pins the WAL
    try:
        pinned = fermix("forget", "alice", "--yes", home=home)
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert pinned.returncode == 1
    assert pinned.stderr.count("\n") == 1 and "run forget again" in pinned.stderr
    assert "forgot owner 'alice'" in pinned.stdout
    again = fermix("forget", "alice", "--yes", home=home)
    assert again.returncode == 0 and "nothing erased" in again.stdout
    assert files_holding(home, "capybaraquince") == []
