"""Command-line options: an unknown or misspelt option is named in the one-line error, and every
``--limit`` takes a count (0 or more)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from tests.cli_runner import leaf_commands, run_cli


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="chat:1", role="user",
                              sender="alice", content="I live in Paris")
    assert run_cli("memory", "set", "--agent", "ada", "--owner", "alice", "--category", "identity", "--key", "home",
                   "Paris", home=tmp_path / "home").returncode == 0
    return tmp_path / "home"


@pytest.mark.parametrize(("argv", "flag", "meant"), [
    (["--hom", "X", "memory", "list"], "--hom", "--home"),
    (["--hom", "X"], "--hom", "--home"),
    (["memory", "list", "--hom", "X"], "--hom", "--home"),
    (["memory", "list", "--agnet", "ada"], "--agnet", "--agent"),
    (["events", "log", "--lim", "3"], "--lim", "--limit"),
    (["--jsno", "events", "head"], "--jsno", "--json"),
    (["resource", "history", "user_md", "--limt=3"], "--limt", "--limit"),
])
def test_an_unknown_option_is_named_with_the_one_meant(tmp_path: Path, argv: list[str], flag: str,
                                                       meant: str) -> None:
    result = run_cli(*argv, home=None)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"fermix: error: unknown option {flag} for 'fermix") and f"did you mean {meant}?" in line


def test_an_option_of_another_command_is_unknown_here() -> None:
    result = run_cli("memory", "list", "--limit", "3")  # --limit is events log's, not memory list's
    assert result.returncode == 1 and "unknown option --limit for 'fermix memory list'" in result.stderr


def test_what_is_not_an_option_is_left_to_the_command(home: Path) -> None:
    assert run_cli("memory", "search", "--agent", "ada", "--owner", "alice", "--", "-Paris", home=home).returncode == 0
    assert run_cli("history", "export", "-o" + str(home / "out.jsonl"), home=home).returncode == 0
    assert run_cli("events", "log", "--after=0", "--limit=1", home=home).returncode == 0


def limit_commands() -> list[tuple[str, ...]]:
    return [words for words, command in leaf_commands().items()
            if any("--limit" in option.flags for option in command.options)]


def test_every_limit_is_checked() -> None:
    assert len(limit_commands()) >= 3


@pytest.mark.parametrize("words", limit_commands())
def test_a_negative_limit_says_0_or_more(home: Path, words: tuple[str, ...]) -> None:
    extra = {("memory", "search"): ["Paris", "--agent", "ada", "--owner", "alice"],
             ("resource", "history"): ["user_md", "--agent", "ada", "--owner", "alice"],
             ("history", "show"): ["chat:1", "--agent", "ada"]}.get(words, [])
    result = run_cli(*words, *extra, "--limit", "-1", home=home)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert "argument --limit: must be 0 or more" in line
    one = run_cli(*words, *extra, "--limit", "1", "--json", home=home)
    assert one.returncode == 0 and one.stdout, one
    assert json.loads(one.stdout)  # there is one...
    zero = run_cli(*words, *extra, "--limit", "0", "--json", home=home)  # ...and 0 asks for none
    assert zero.returncode == 0, zero.stderr
    shown = json.loads(zero.stdout)
    assert shown == [] or all(shown[k] == [] for k in ("ranked", "memories", "messages") if k in shown)
