"""``fermix resource …`` and ``fermix memory restore`` (R-RES), the command run in-process.

Memory changes are made through the embedding API, which is closed before the command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from tests.cli_runner import CliResult, run_cli

AGENT, OWNER = "ada", "alice"
REV1 = "## Identity\n- city: Lives in Paris\n- name: Alice\n"
REV2 = "## Identity\n- city: Lives in Berlin\n- name: Alice\n"


def fermix(home: Path, *args: str) -> CliResult:
    return run_cli(*args, home=home)


def ok(home: Path, *args: str) -> str:
    result = fermix(home, *args)
    assert result.returncode == 0, (args, result.stderr)
    return result.stdout


def as_json(home: Path, *args: str) -> Any:
    return json.loads(ok(home, *args, "--json"))  # one JSON document, nothing else on stdout


def assert_one_line_error(result: CliResult, *needles: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fermix: error: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def user_md(home: Path, agent: str = AGENT, owner: str = OWNER) -> str:
    return (home / "memory" / agent / owner / "USER.md").read_text(encoding="utf-8")


def write(home: Path, *ops: dict[str, Any], owner: str = OWNER, trust: str = "operator") -> list[Any]:
    with MemorySystem.open(home) as m:
        return m.write_memory(list(ops), agent_id=AGENT, owner_id=owner, writer="reviewer", trust=trust)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """USER.md revisions 1..3 and MEMORY.md revision 1 of ada/alice."""
    home = tmp_path / "home"
    [_, city] = write(home, {"op": "add", "category": "identity", "key": "name", "value": "Alice"},
                      {"op": "add", "category": "identity", "key": "city", "value": "Lives in Paris"})
    write(home, {"op": "replace", "id": city.memory_id, "value": "Lives in Berlin"})
    write(home, {"op": "add", "category": "goal", "key": "german", "value": "Speak German fluently"})
    write(home, {"op": "add", "category": "context", "key": "project", "value": "Zeppelin launch"})
    return home


def test_resource_list(home: Path) -> None:
    header, *lines = ok(home, "resource", "list").splitlines()
    assert header.startswith("NAME\t") and len(lines) == 2
    by_name = {line.split("\t")[0]: line for line in lines}
    assert "ada/alice" in by_name["user_md"] and "rev 3" in by_name["user_md"]
    assert "rev 1" in by_name["memory_md"]
    data = as_json(home, "resource", "list")
    assert sorted((r["name"], r["revision"], r["agent_id"], r["owner_id"]) for r in data) == [
        ("memory_md", 1, AGENT, OWNER), ("user_md", 3, AGENT, OWNER)]
    assert all("content" not in r and r["reason"] == "rebuild" for r in data)


def test_resource_history_newest_first_with_limit(home: Path) -> None:
    header, *lines = ok(home, "resource", "history", "user_md", "--limit", "2").splitlines()
    assert header.startswith("NAME\t") and len(lines) == 2
    assert "rev 3" in lines[0] and "rev 2" in lines[1]
    data = as_json(home, "resource", "history", "user_md", "--limit", "2")
    assert [r["revision"] for r in data] == [3, 2]
    assert [r["revision"] for r in as_json(home, "resource", "history", "user_md")] == [3, 2, 1]
    assert [r["revision"] for r in as_json(home, "resource", "history", "memory_md")] == [1]


def test_resource_show(home: Path) -> None:
    assert ok(home, "resource", "show", "user_md", "1") == REV1
    assert ok(home, "resource", "show", "user_md", "2") == REV2
    data = as_json(home, "resource", "show", "user_md", "1")
    assert (data["name"], data["revision"], data["content"]) == ("user_md", 1, REV1)
    current = as_json(home, "resource", "show", "user_md", "3")["content"]
    assert current == user_md(home) and "Speak German fluently" in current


def test_resource_diff(home: Path) -> None:
    lines = ok(home, "resource", "diff", "user_md", "1", "2").splitlines()
    assert lines[0] == "--- user_md@1" and lines[1] == "+++ user_md@2"
    assert "-- city: Lives in Paris" in lines and "+- city: Lives in Berlin" in lines
    assert " - name: Alice" in lines  # context lines start with a space
    data = as_json(home, "resource", "diff", "user_md", "1", "2")
    assert (data["from"], data["to"], data["name"]) == (1, 2, "user_md")
    assert data["diff"].splitlines() == lines
    # Identical revisions: no diff lines.
    assert ok(home, "resource", "diff", "user_md", "2", "2").strip() == "(no difference)"


def test_resource_rollback(home: Path) -> None:
    out = ok(home, "resource", "rollback", "user_md", "1")
    assert "revision 1 restored as revision 4" in out
    assert ok(home, "resource", "show", "user_md", "4") == ok(home, "resource", "show", "user_md", "1")
    assert user_md(home) == REV1
    [latest] = as_json(home, "resource", "history", "user_md", "--limit", "1")
    assert (latest["revision"], latest["reason"]) == (4, "rollback to 1")
    # The API agrees, and a rebuild from the unchanged rows renders them again.
    with MemorySystem.open(home) as m:
        assert m.resource_revision("user_md", 4, agent_id=AGENT, owner_id=OWNER).content == REV1
        assert m.rebuild_prompt_files(AGENT, OWNER) == ["user_md"]
    assert "Speak German fluently" in user_md(home)

    data = as_json(home, "resource", "rollback", "user_md", "2")
    assert (data["rolled_back_to"], data["new_revision"]) == (2, 6)
    assert Path(data["file"]) == home / "memory" / AGENT / OWNER / "USER.md"
    assert user_md(home) == REV2


def test_several_owners_need_agent_and_owner(home: Path) -> None:
    write(home, {"op": "add", "category": "identity", "key": "name", "value": "Gus"}, owner="guest-gus",
          trust="guest")
    # list shows every owner's resources without asking.
    before = user_md(home)
    owners = {r["owner_id"] for r in as_json(home, "resource", "list")}
    assert owners == {OWNER, "guest-gus"}
    for args in (("history", "user_md"), ("show", "user_md", "1"), ("diff", "user_md", "1", "2"),
                 ("rollback", "user_md", "1")):
        assert_one_line_error(fermix(home, "resource", *args), "--agent", "--owner")
        assert_one_line_error(fermix(home, "resource", *args, "--agent", AGENT), "--owner")
    # Nothing was rolled back by the refused commands.
    assert user_md(home) == before
    assert "rev 4" not in ok(home, "resource", "history", "user_md", "--agent", AGENT, "--owner", OWNER)
    # With both given, each owner's files are reachable and separate.
    assert ok(home, "resource", "show", "user_md", "1", "--agent", AGENT, "--owner", "guest-gus") == (
        "## Identity\n- name: Gus\n")
    assert ok(home, "resource", "show", "user_md", "1", "--agent", AGENT, "--owner", OWNER) == REV1
    only_gus = as_json(home, "resource", "list", "--owner", "guest-gus")
    assert [(r["owner_id"], r["name"]) for r in only_gus] == [("guest-gus", "user_md")]


def test_unknown_revisions_and_resources_are_one_line_errors(home: Path) -> None:
    before = user_md(home)
    assert_one_line_error(fermix(home, "resource", "show", "user_md", "99"), "99")
    assert_one_line_error(fermix(home, "resource", "diff", "user_md", "1", "99"), "99")
    assert_one_line_error(fermix(home, "resource", "rollback", "user_md", "99"), "99")
    as_json_error = fermix(home, "resource", "show", "user_md", "99", "--json")
    assert as_json_error.returncode == 1 and as_json_error.stdout == ""
    assert "99" in json.loads(as_json_error.stderr)["error"]  # --json: the error is JSON too
    assert_one_line_error(fermix(home, "resource", "history", "user_md", "--agent", AGENT, "--owner", "nobody"),
                          "nobody")
    assert user_md(home) == before
    assert [r["revision"] for r in as_json(home, "resource", "history", "user_md")] == [3, 2, 1]
    # An unknown resource name is a usage error (one line, exit 1), not a crash.
    assert_one_line_error(fermix(home, "resource", "show", "soul_md", "1"), "soul_md")


def test_memory_restore_makes_the_fact_reappear_in_user_md(tmp_path: Path) -> None:
    home = tmp_path / "home"
    [name, city] = write(home, {"op": "add", "category": "identity", "key": "name", "value": "Alice"},
                         {"op": "add", "category": "identity", "key": "city", "value": "Lives in Lisbon"})
    write(home, {"op": "archive", "id": city.memory_id, "reason": "moved"})
    assert "Lisbon" not in user_md(home)

    out = ok(home, "memory", "restore", str(city.memory_id))
    assert "restored" in out and "Lives in Lisbon" in out
    assert "- city: Lives in Lisbon" in user_md(home)
    [latest] = as_json(home, "resource", "history", "user_md", "--limit", "1")
    assert latest["revision"] == 3
    assert as_json(home, "resource", "show", "user_md", "3")["content"] == user_md(home)

    assert_one_line_error(fermix(home, "memory", "restore", "999999"), "999999")
    assert name.status == "added"
