"""The memory as of a moment (ADR-0033): rows, prompt files and the composed prompt as they were,
folded from the log, on both stores; the CLI's ``--as-of``; bad moments; an erased owner stays
erased. Time is a hand-moved clock: the moments are the clock's own, never the wall's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import AsyncMemorySystem, InvalidArgument, MemorySystem
from tests.cli_runner import run_cli
from tests.manual_clock import START, TestClock

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT, OWNER, OTHER, OPERATOR = "ada", "alice", "bob", "olga"
CONV = "telegram:alice"


def minute(n: float) -> datetime:
    return START + timedelta(minutes=n)


def write(m: MemorySystem, op: dict[str, Any], *, owner: str = OWNER, trust: str = "guest") -> Any:
    [outcome] = m.write_memory(op, agent_id=AGENT, owner_id=owner, trust=trust)
    return outcome


@pytest.fixture
def story(tmp_path: Path) -> Iterator[tuple[MemorySystem, TestClock, int]]:
    """Minute 1: alice says she lives in Paris and likes tea; minute 2: bob's row; minute 3: the
    operator's standing rule (in every owner's MEMORY.md); minute 4: Paris becomes Lyon;
    minute 5: the tea row is archived. Returns the open memory, its clock, the city row's id."""
    clock = TestClock(START)
    with MemorySystem.open(tmp_path / "home", clock=clock) as m:
        clock.t = minute(1)
        m.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", sender=OWNER,
                         content="I live in Paris")
        city = write(m, {"op": "add", "category": "identity", "key": "home_city", "value": "Paris"}).memory_id
        tea = write(m, {"op": "add", "category": "preference", "key": "drink", "value": "tea"}).memory_id
        clock.t = minute(2)
        write(m, {"op": "add", "category": "identity", "key": "name", "value": "Bob"}, owner=OTHER)
        clock.t = minute(3)
        write(m, {"op": "add", "category": "directive", "key": "language", "value": "Answer in English"},
              owner=OPERATOR, trust="operator")
        clock.t = minute(4)
        m.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", sender=OWNER,
                         content="I moved to Lyon")
        write(m, {"op": "replace", "id": city, "value": "Lyon"})
        clock.t = minute(5)
        write(m, {"op": "archive", "id": tea, "reason": "gone off it"})
        clock.t = minute(10)
        yield m, clock, city


def values(rows: list[Any]) -> dict[str, tuple[str, bool]]:
    return {r.key: (r.value, r.archived) for r in rows}


def test_before_a_replace_the_old_value_after_it_the_new_one(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, _, city = story
    mine = {"agent_id": AGENT, "owner_id": OWNER}
    assert values(m.memories(**mine, as_of=minute(1))) == {"home_city": ("Paris", False), "drink": ("tea", False)}
    assert values(m.memories(**mine, as_of=minute(3.5))) == values(m.memories(**mine, as_of=minute(1)))
    assert values(m.memories(**mine, as_of=minute(4))) == {"home_city": ("Lyon", False), "drink": ("tea", False)}
    assert values(m.memories(**mine, as_of=minute(5))) == {"home_city": ("Lyon", False), "drink": ("tea", True)}
    assert values(m.memories(**mine, as_of=minute(5), include_archived=False)) == {"home_city": ("Lyon", False)}
    # The fold of the log now is the projection: the same rows, field for field.
    assert m.memories(**mine, as_of=minute(10)) == m.memories(**mine)
    assert m.memories(**mine, as_of=minute(1))[0].id == city


def test_a_moment_before_the_first_event_is_an_empty_memory(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, _, _ = story
    assert m.memories(as_of=minute(0)) == []
    assert m.resource_as_of("user_md", minute(0), agent_id=AGENT, owner_id=OWNER) is None
    assert m.compose_prompt(AGENT, OWNER, CONV, as_of=minute(0)) == []


def test_every_owner_as_of_a_moment(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, _, _ = story
    assert {(r.owner_id, r.key) for r in m.memories(as_of=minute(2))} == {
        (OWNER, "home_city"), (OWNER, "drink"), (OTHER, "name")}
    assert {r.owner_id for r in m.memories(agent_id=AGENT, as_of=minute(3))} == {OWNER, OTHER, OPERATOR}
    assert {r.key for r in m.memories(owner_id=OTHER, as_of="2026-03-01T09:02:00+00:00")} == {"name"}
    assert m.memories(agent_id="nobody", as_of=minute(9)) == []


def test_the_prompt_files_as_they_were_rendered(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, _, _ = story

    def file(name: str, at: datetime, owner: str = OWNER) -> str:
        found = m.resource_as_of(name, at, agent_id=AGENT, owner_id=owner)
        return "" if found is None else found.content

    assert "home_city: Paris" in file("user_md", minute(3)) and "Lyon" not in file("user_md", minute(3))
    assert "home_city: Lyon" in file("user_md", minute(4))
    assert "drink: tea" in file("user_md", minute(4)) and "drink" not in file("user_md", minute(5))
    # The agent's standing rule joins bob's MEMORY.md when the operator records it, not before.
    assert file("memory_md", minute(2.5), OTHER) == ""
    assert "Answer in English" in file("memory_md", minute(3), OTHER)
    now = m.resource_as_of("user_md", minute(10), agent_id=AGENT, owner_id=OWNER)
    assert now is not None
    assert now == m.resource_revision("user_md", now.revision, agent_id=AGENT, owner_id=OWNER)
    assert now.content == m.prompt_file(AGENT, OWNER, "user_md").read_text(encoding="utf-8")


def test_the_prompt_composed_at_a_moment(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, _, _ = story
    then = m.compose_prompt(AGENT, OWNER, CONV, as_of=minute(3))
    assert "home_city: Paris" in then[0]["content"] and "Answer in English" in then[0]["content"]
    assert [t["content"] for t in then[1:]] == ["I live in Paris"]
    later = m.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV).compose_prompt(as_of=minute(4))
    assert "home_city: Lyon" in later[0]["content"]
    assert [t["content"] for t in later[1:]] == ["I live in Paris", "I moved to Lyon"]
    assert m.compose_prompt(AGENT, OWNER, CONV, as_of=minute(10)) == m.compose_prompt(AGENT, OWNER, CONV)
    system, turns = m.compose_prompt(AGENT, OWNER, CONV, style="anthropic", as_of=minute(1))
    assert "Paris" in system and [t["content"] for t in turns] == ["I live in Paris"]


def test_the_async_api_forwards_the_moment(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, clock, _ = story

    async def ask() -> tuple[Any, Any, Any]:
        async with AsyncMemorySystem.open(m.home, clock=clock) as a:
            rows = await a.memories(agent_id=AGENT, owner_id=OWNER, as_of=minute(1))
            prompt = await a.compose_prompt(AGENT, OWNER, CONV, as_of=minute(1))
            file = await a.resource_as_of("user_md", minute(1), agent_id=AGENT, owner_id=OWNER)
            return rows, prompt, file

    rows, prompt, file = asyncio.run(ask())
    assert values(rows)["home_city"] == ("Paris", False)
    assert "home_city: Paris" in prompt[0]["content"] and "home_city: Paris" in file.content


@pytest.mark.parametrize("moment", [datetime(2026, 3, 1, 9, 1), minute(10.5), "yesterday", "2026-13-01T00:00Z", 42])
def test_a_bad_moment_is_a_typed_error(story: tuple[MemorySystem, TestClock, int], moment: Any) -> None:
    m, _, _ = story
    with pytest.raises(InvalidArgument):
        m.memories(agent_id=AGENT, owner_id=OWNER, as_of=moment)
    with pytest.raises(InvalidArgument):
        m.compose_prompt(AGENT, OWNER, CONV, as_of=moment)
    with pytest.raises(InvalidArgument):
        m.resource_as_of("user_md", moment, agent_id=AGENT, owner_id=OWNER)


def test_an_erased_owner_stays_erased_at_every_moment(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, _, _ = story
    m.forget_owner(OWNER, agent_id=AGENT)
    for n in (1, 3, 4, 5, 10):
        assert m.memories(agent_id=AGENT, owner_id=OWNER, as_of=minute(n)) == []
        assert m.resource_as_of("user_md", minute(n), agent_id=AGENT, owner_id=OWNER) is None
        prompt = json.dumps(m.compose_prompt(AGENT, OWNER, CONV, as_of=minute(n)))
        assert "Paris" not in prompt and "Lyon" not in prompt
    assert values(m.memories(agent_id=AGENT, owner_id=OTHER, as_of=minute(2))) == {"name": ("Bob", False)}


def test_the_cli_lists_and_shows_as_of_a_moment(story: tuple[MemorySystem, TestClock, int]) -> None:
    m, _, _ = story
    home = m.home
    listed = run_cli("memory", "list", "--agent", AGENT, "--owner", OWNER, "--as-of", "2026-03-01T09:03Z", "--json",
                     home=home)
    assert listed.returncode == 0, listed.stderr
    assert {r["key"]: r["value"] for r in json.loads(listed.stdout)} == {"home_city": "Paris", "drink": "tea"}
    human = run_cli("memory", "list", "--owner", OWNER, "--as-of", "2026-03-01T09:04Z", home=home)
    assert "home_city = Lyon" in human.stdout
    assert run_cli("memory", "list", "--as-of", "2026-03-01T08:00Z", home=home).stdout == "no memory rows\n"

    shown = run_cli("resource", "show", "user_md", "--agent", AGENT, "--owner", OWNER, "--as-of", "2026-03-01T09:03Z",
                    "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert "home_city: Paris" in data["content"] and data["revision"] >= 1
    empty = run_cli("resource", "show", "user_md", "--agent", AGENT, "--owner", OWNER, "--as-of",
                    "2026-03-01T08:00Z", "--json", home=home)
    assert json.loads(empty.stdout)["revision"] is None and json.loads(empty.stdout)["content"] == ""
    text = run_cli("resource", "show", "user_md", "--agent", AGENT, "--owner", OWNER, "--as-of", "2026-03-01T09:04Z",
                   home=home)
    assert "- home_city: Lyon" in text.stdout.splitlines()


@pytest.mark.parametrize("argv", [
    ("memory", "list", "--as-of", "2026-03-01T09:03"),
    ("memory", "list", "--as-of", "not a time"),
    ("memory", "list", "--as-of", "2999-01-01T00:00Z"),
    ("resource", "show", "user_md", "--agent", AGENT, "--owner", OWNER, "--as-of", "soon"),
    ("resource", "show", "user_md", "--agent", AGENT, "--owner", OWNER),
    ("resource", "show", "user_md", "1", "--agent", AGENT, "--owner", OWNER, "--as-of", "2026-03-01T09:03Z"),
])
def test_the_cli_says_what_is_wrong_with_a_moment_in_one_line(story: tuple[MemorySystem, TestClock, int],
                                                              argv: tuple[str, ...]) -> None:
    m, _, _ = story
    result = run_cli(*argv, home=m.home)
    assert result.returncode == 1 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("fermix: ")
    as_json = run_cli(*argv, "--json", home=m.home)
    assert as_json.returncode == 1 and "error" in json.loads(as_json.stderr)
