"""``fermix history show``: a conversation read a page at a time, on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("every_store")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with MemorySystem.open(tmp_path / "home") as memory:
        for n in range(1, 8):
            owner = "alice" if n % 2 else "bob"
            memory.append_message(agent_id="ada", owner_id=owner, conversation="chat:1", role="user", sender=owner,
                                  content=f"message {n}\nsecond line")
        memory.append_message(agent_id="ada", owner_id="alice", conversation="chat:2", role="user", sender="alice",
                              content="elsewhere")
    return tmp_path / "home"


def page(home: Path, *argv: str) -> dict[str, object]:
    result = run_cli("history", "show", "chat:1", "--agent", "ada", "--json", *argv, home=home)
    assert result.returncode == 0, result.stderr
    shown: dict[str, object] = json.loads(result.stdout)
    return shown


def ids(shown: dict[str, object]) -> list[int]:
    return [m["id"] for m in shown["messages"]]  # type: ignore[attr-defined, index]


def test_paging_back_and_forth_covers_the_conversation_once(home: Path) -> None:
    newest = page(home, "--limit", "3")
    assert ids(newest) == [5, 6, 7] and newest["older_before"] == 5 and newest["newer_after"] is None
    before = page(home, "--limit", "3", "--before", "5")
    assert ids(before) == [2, 3, 4] and (before["older_before"], before["newer_after"]) == (2, 4)
    first = page(home, "--limit", "3", "--before", "2")
    assert ids(first) == [1] and first["older_before"] is None
    assert ids(page(home, "--limit", "3", "--after", "1")) == [2, 3, 4]
    assert ids(page(home, "--limit", "3", "--page", "2")) == [2, 3, 4]
    assert ids(page(home, "--limit", "3", "--page", "9")) == []
    assert ids(page(home, "--owner", "bob")) == [2, 4, 6]
    assert ids(page(home, "--limit", "0")) == []


def test_the_human_page_is_one_line_a_message_with_the_way_on(home: Path) -> None:
    result = run_cli("history", "show", "chat:1", "--agent", "ada", "--limit", "2", "--before", "4", home=home)
    assert result.returncode == 0
    first, second, older, newer = result.stdout.splitlines()
    assert first.startswith("#2 ") and first.endswith(" user bob: message 2\\nsecond line")
    assert second.startswith("#3 ")
    assert older == "older: fermix history show chat:1 --agent ada --before 2"
    assert newer == "newer: fermix history show chat:1 --agent ada --after 3"


@pytest.mark.parametrize(("argv", "said"), [
    (["--before", "8"], "message 8 is not in ada's conversation chat:1"),  # chat:2's
    (["--after", "999"], "message 999 is not in ada's conversation chat:1"),
    (["--before", "3", "--page", "2"], "give one of --before, --after and --page, not --before and --page"),
    (["--page", "0"], "argument --page: must be a positive number"),
    (["--before", "-3"], "argument --before: must be a positive number"),
])
def test_a_bad_page_is_one_line_and_exit_1(home: Path, argv: list[str], said: str) -> None:
    result = run_cli("history", "show", "chat:1", "--agent", "ada", *argv, home=home)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert said in line


def test_a_bad_conversation_key_is_one_line(home: Path) -> None:
    result = run_cli("history", "show", "nocolon", "--agent", "ada", home=home)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "CHANNEL:CHAT_ID" in result.stderr
