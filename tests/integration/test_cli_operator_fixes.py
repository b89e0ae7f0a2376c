"""Fixing memory by hand with the ``fermix`` command (ADR-0023): set, archive, compact, a review
that catches up, a failed review in a few lines, and the smaller answers an operator reads."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import tomli_w

from fermix_memory import MemorySystem
from tests.cli_runner import run_cli
from tests.integration.loopback_models import LoopbackModelServer

CONV = "telegram:42"


def line(content: str, **overrides: object) -> str:
    record = {"agent_id": "ada", "owner_id": "alice", "channel": "telegram", "chat_id": "42", "role": "user",
              "sender": "alice", "content": content}
    record.update(overrides)
    return json.dumps(record)


def imported(home: Path, *contents: str, **memory: object) -> Path:
    """A home holding ``contents`` as alice's user messages, with ``memory`` settings in config.toml."""
    home.mkdir(parents=True, exist_ok=True)
    if memory:
        (home / "config.toml").write_text(tomli_w.dumps({"fermix_core": {"memory": memory}}), encoding="utf-8")
    text = "".join(line(c) + "\n" for c in contents)
    assert run_cli("history", "import", "-", home=home, stdin=text.encode()).returncode == 0
    return home


def head(home: Path) -> int:
    with MemorySystem.open(home, readonly=True) as memory:
        return memory.head().position


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return imported(tmp_path / "home", "I live in Paris")


# --- memory set / archive ----------------------------------------------------------------------------


def test_memory_set_adds_then_replaces_through_admission_and_is_recorded(home: Path) -> None:
    added = run_cli("memory", "set", "--agent", "ada", "--owner", "alice", "--category", "identity",
                    "--key", "home city", "Lives in Paris", home=home)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("added: ") and "\towner:alice\tidentity\thome_city = Lives in Paris" in added.stdout
    replaced = run_cli("memory", "set", "--agent", "ada", "--owner", "alice", "--category", "identity",
                       "--key", "home_city", "Lives in Lyon", "--reason", "ticket 12", "--json", home=home)
    data = json.loads(replaced.stdout)
    assert data["status"] == "replaced" and data["previous_value"] == "Lives in Paris"
    assert data["memory"]["value"] == "Lives in Lyon"
    row = str(data["memory"]["id"])
    again = run_cli("memory", "set", "--agent", "ada", "--owner", "alice", "--category", "identity",
                    "--key", "home_city", "Lives in Lyon", home=home)
    assert again.returncode == 0 and again.stdout.startswith("unchanged: ")
    shown = json.loads(run_cli("memory", "show", row, "--json", home=home).stdout)
    assert [(e["kind"], e["by"]["source_type"], e["by"]["trust"]) for e in shown["events"]] == [
        ("memory.added", "cli", "operator"), ("memory.replaced", "cli", "operator")]
    assert shown["events"][1]["by"]["reason"] == "ticket 12"
    assert "Lives in Lyon" in (home / "memory" / "ada" / "alice" / "USER.md").read_text(encoding="utf-8")
    assert run_cli("events", "verify", home=home).returncode == 0


def test_memory_set_refused_by_admission_is_one_line_and_writes_nothing(home: Path) -> None:
    before = head(home)
    refused = run_cli("memory", "set", "--agent", "ada", "--owner", "alice", "--category", "identity",
                      "--key", "essay", "x" * 2100, home=home)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("fermix: error: refused (value_too_long)") and refused.stderr.count("\n") == 1
    bad = run_cli("memory", "set", "--agent", "ada", "--owner", "alice", "--category", "gossip", "--key", "k",
                  "v", home=home)
    assert bad.returncode == 1 and "invalid choice: 'gossip'" in bad.stderr
    # The refusal is recorded like any refusal; no row changed.
    with MemorySystem.open(home, readonly=True) as memory:
        assert [e.kind for e in memory.log_entries(after=before)] == ["memory.operation_refused"]
        assert memory.memories() == []


def test_memory_archive_then_again_then_restore(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        [outcome] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city",
                                         "value": "Lives in Rome"}, agent_id="ada", owner_id="alice",
                                        trust="operator")
        tool = memory.dispatch_tool("memory_store", {"key": "flight", "value": "LH 1234"}, agent_id="ada",
                                    owner_id="alice", conversation="telegram:-999")
    row = str(outcome.memory_id)
    done = run_cli("memory", "archive", row, "--reason", "wrong city", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"archived: {row}\t") and "(archived: wrong city)" in done.stdout
    assert "Rome" not in (home / "memory" / "ada" / "alice" / "USER.md").read_text(encoding="utf-8")
    before = head(home)
    again = run_cli("memory", "archive", row, "--json", home=home)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "already_archived"
    assert head(home) == before
    assert run_cli("memory", "restore", row, home=home).stdout.startswith("restored: ")
    # A conversation-scoped row (the memory tool's) is archived in its own scope.
    archived = run_cli("memory", "archive", str(tool["id"]), home=home)
    assert archived.returncode == 0, archived.stderr
    assert "\tconversation:telegram:-999\tcontext\tflight = LH 1234 (archived: archived by the operator)" \
        in archived.stdout
    missing = run_cli("memory", "archive", "999", home=home)
    assert missing.returncode == 1 and missing.stderr == "fermix: error: no memory row 999\n"


# --- history compact --------------------------------------------------------------------------------


def test_history_compact_is_the_operators_compact(tmp_path: Path) -> None:
    home = imported(tmp_path / "home", *(f"Message number {i} about the garden and the roses" for i in range(12)))
    done = run_cli("history", "compact", CONV, "--agent", "ada", "--context-window", "200", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ada {CONV}: compacted: ") and "summarised into checkpoint #" in done.stdout
    with MemorySystem.open(home, readonly=True) as memory:
        assert [e.kind for e in memory.log_entries(kind="conversation.compacted")] == ["conversation.compacted"]
        assert len(memory.messages("ada", CONV)) == 13  # every message stays, plus the checkpoint
    short = imported(tmp_path / "short", "Hello")
    with MemorySystem.open(short) as memory:
        memory.clear_window("ada", CONV)  # /new: an empty window
    shown = run_cli("history", "compact", CONV, "--agent", "ada", "--json", home=short)
    assert shown.returncode == 0 and json.loads(shown.stdout)["reason"] == "nothing_to_compact"
    assert run_cli("history", "compact", CONV, "--agent", "ada", home=short).stdout.startswith(
        f"ada {CONV}: nothing to compact yet")
    nowhere = run_cli("history", "compact", "telegram:7", "--agent", "ada", home=home)
    assert nowhere.returncode == 1 and "has no messages in telegram:7" in nowhere.stderr
    bad = run_cli("history", "compact", "nocolon", "--agent", "ada", home=home)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "CHANNEL:CHAT_ID" in bad.stderr


# --- memory review --now ------------------------------------------------------------------------------


def test_review_now_reviews_until_caught_up_or_says_what_still_waits(tmp_path: Path) -> None:
    facts = ["My name is Ada Byron", "I live in Paris", "I prefer tea", "Remember that my cat is Tom"]
    messages = [*(f"Just chatting, line {i}" for i in range(8)), *facts]
    home = imported(tmp_path / "home", *messages, review_max_messages=5)
    done = run_cli("memory", "review", "--now", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ada/alice {CONV}: caught up: 12 messages in 3 reviews, 4 applied, 0 refused\n"
    assert run_cli("memory", "review", "--now", home=home).stdout == "no conversation has new messages to review\n"

    bounded = imported(tmp_path / "bounded", *messages, review_max_messages=5)
    first = run_cli("memory", "review", "--now", "--max-rounds", "1", "--json", home=bounded)
    [result] = json.loads(first.stdout)
    assert (result["status"], result["rounds"], result["messages_reviewed"], result["waiting"]) == (
        "completed", 1, 5, 7)
    rest = run_cli("memory", "review", "--now", "--max-rounds", "1", home=bounded)
    assert rest.stdout == (f"ada/alice {CONV}: 5 messages in 1 review, 2 applied, 0 refused; 2 messages still"
                           " wait (stopped after --max-rounds 1; run it again to go on)\n")


# --- a failing provider ---------------------------------------------------------------------------------


def three_failing_providers(home: Path, server: LoopbackModelServer) -> str:
    body = "overloaded " + "x" * 600
    server.always(server.error(503, body))
    home.mkdir(parents=True)
    providers = [{"name": name, "kind": "openai", "base_url": server.base_url, "model": f"m-{name}", "retries": 0}
                 for name in ("first", "second", "third")]
    (home / "config.toml").write_text(tomli_w.dumps({"fermix_core": {"providers": providers}}), encoding="utf-8")
    imported(home, "I live in Paris", "I like tea")
    return body


def test_a_failing_provider_route_prints_one_line_per_provider_then_what_happens_next(
        tmp_path: Path, openai_server: LoopbackModelServer) -> None:
    home = tmp_path / "home"
    body = three_failing_providers(home, openai_server)
    done = run_cli("memory", "review", "--now", home=home)
    assert done.returncode == 1
    out = done.stdout.splitlines()
    assert out[0] == f"ada/alice {CONV}: failed"
    assert [x.split(":", 1)[0] for x in out[1:4]] == [
        "  provider 'first' (m-first)", "  provider 'second' (m-second)", "  provider 'third' (m-third)"]
    assert all(x.split(": ", 1)[1].startswith('unavailable: HTTP 503: {"error": {"message": "overloaded xxx')
               and len(x) < 200 for x in out[1:4])
    assert out[4].startswith("  the 2 messages stay queued; a background review tries again at the first turn"
                             " after 20") and out[4].endswith(" UTC, or run 'fermix memory review --now' again"
                                                               " (details: --verbose)")
    assert len(out) == 5
    err = done.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith(f"fermix: error: 1 review failed; the first (ada/alice {CONV}): all 3"
                                               " providers failed, the last: HTTP 503: ")
    assert body not in done.stdout + done.stderr and len(done.stderr) < 300
    # --verbose: the library's warnings, whole bodies included, as before.
    verbose = run_cli("memory", "review", "--now", "--verbose", home=home)
    assert verbose.returncode == 1 and verbose.stderr.count("fermix: warning: ") >= 4
    assert verbose.stderr.count(body[:120]) >= 3  # each provider's error as the provider logged it
    # JSON: each provider tried, and when the back-off ends.
    data = json.loads(run_cli("memory", "review", "--now", "--json", home=home).stdout)
    assert [p["provider"] for p in data[0]["providers"]] == ["first", "second", "third"]
    assert data[0]["waiting"] == 2 and data[0]["retry_after"]


# --- smaller answers ---------------------------------------------------------------------------------


def test_an_unknown_event_kind_is_an_error_naming_the_known_ones(home: Path) -> None:
    result = run_cli("events", "log", "--kind", "memory.addd", home=home)
    assert result.returncode == 1 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "unknown event kind 'memory.addd'; did you mean memory.added?" in result.stderr
    assert "message.appended" in result.stderr and "review.completed" in result.stderr
    assert run_cli("events", "log", "--kind", "review.completed", home=home).stdout == "no events\n"


def test_setup_init_says_what_it_kept(tmp_path: Path) -> None:
    home = imported(tmp_path / "home", "I live in Paris")  # memory.db, no config.toml
    done = run_cli("setup", "init", home=home)
    assert done.returncode == 0
    assert done.stdout.splitlines() == [f"wrote {home / 'config.toml'} (every knob at its default)",
                                        f"kept the existing {home / 'memory.db'}"]
    again = run_cli("setup", "init", home=home)
    assert again.returncode == 1 and "already exists" in again.stderr


def test_setup_show_prints_toml_and_infinity(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[fermix_core.memory]\nmax_conversation_history = "infinity"\n'
                                      'review_interval_hours = 6.0\n', encoding="utf-8")
    shown = run_cli("setup", "show", home=home)
    assert shown.returncode == 0 and "{" not in shown.stdout and "null" not in shown.stdout
    parsed = tomllib.loads(shown.stdout)["fermix_core"]
    assert parsed["memory"]["max_conversation_history"] == "infinity"
    assert parsed["memory"]["review_interval_hours"] == 6.0 and parsed["compaction"]["threshold"] == 0.85
    data = json.loads(run_cli("setup", "show", "--json", home=home).stdout)
    assert data["settings"]["memory"]["max_conversation_history"] == "infinity"


def test_setup_show_lists_the_mcp_tokens_without_their_hash(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    digest = "ab" * 32
    (home / "config.toml").write_text(f'[[fermix_core.mcp_tokens]]\nname = "laptop"\nsha256 = "{digest}"\n'
                                      'agent_id = "ada"\nowner_id = "alice"\n', encoding="utf-8")
    shown = run_cli("setup", "show", home=home)
    assert shown.returncode == 0 and digest not in shown.stdout
    (token,) = tomllib.loads(shown.stdout)["fermix_core"]["mcp_tokens"]
    assert token["name"] == "laptop" and token["owner_id"] == "alice" and token["sha256"] == "(set)"
    assert tomllib.loads(shown.stdout)["fermix_core"]["mcp"]["conversation"] == "mcp:stdio"


def test_a_history_import_with_bad_lines_creates_no_home(tmp_path: Path) -> None:
    home = tmp_path / "new"
    every_line_bad = run_cli("history", "import", "-", home=home, stdin=b"{broken\nnot json\n")
    assert every_line_bad.returncode == 1 and "nothing was imported" in every_line_bad.stderr
    one_bad = run_cli("history", "import", "-", home=home, stdin=(line("fine") + "\n{broken\n").encode())
    assert one_bad.returncode == 1
    assert not home.exists()
    good = run_cli("history", "import", "-", home=home, stdin=(line("fine") + "\n").encode())
    assert good.returncode == 0 and (home / "memory.db").is_file()


def test_conversation_scopes_print_without_a_trailing_colon(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        plain = memory.dispatch_tool("memory_store", {"key": "flight", "value": "LH 1234"}, agent_id="ada",
                                     owner_id="alice", conversation="telegram:-999")
        threaded = memory.dispatch_tool("memory_store", {"key": "seat", "value": "12A"}, agent_id="ada",
                                        owner_id="alice", conversation="telegram:-999:t:7")
    listed = run_cli("memory", "list", home=home).stdout
    assert "\tconversation:telegram:-999\tcontext\tflight = LH 1234" in listed
    assert "\tconversation:telegram:-999:t:7\tcontext\tseat = 12A" in listed
    assert "-999:\t" not in listed
    shown = run_cli("memory", "show", str(plain["id"]), home=home).stdout
    assert shown.startswith(f"{plain['id']}\tada\talice\tconversation:telegram:-999\tcontext\t")
    found = run_cli("memory", "search", "LH", "--agent", "ada", "--owner", "alice", "--conversation",
                    "telegram:-999", home=home).stdout
    assert found == f"memory {plain['id']} (conversation:telegram:-999): flight = LH 1234\n"
    assert threaded["ok"]


def test_memory_show_names_the_message_the_reviewed_fact_came_from(tmp_path: Path) -> None:
    # The offline rules extractor names each fact's message (ADR-0034): that one only, not the batch.
    home = imported(tmp_path / "home", "Hi! My name is Alice Martin.", "The weather is nice",
                    "Actually I moved to Berlin last month.")
    assert run_cli("memory", "review", "--now", home=home).returncode == 0
    with MemorySystem.open(home, readonly=True) as memory:
        [row] = [m for m in memory.memories() if m.key == "name"]
    shown = run_cli("memory", "show", str(row.id), home=home).stdout.splitlines()
    assert shown[3:] == ["      from #1 (telegram:42, alice): Hi! My name is Alice Martin."]
