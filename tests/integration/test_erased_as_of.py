"""Erased rows in the as-of answers (ADR-0083): at a moment before its erasure a row shows as a
placeholder naming its id, when it was recorded, when and by what it was erased and its receipt,
never what it said; at and after the erasure it is gone. On both stores, after an export and
import and after a replay. Time is a hand-moved clock."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.streams import RECEIPT_STREAM
from fermix_memory.domain import events as ev
from tests.cli_runner import run_cli
from tests.manual_clock import START, TestClock

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT, OWNER, OTHER = "ada", "alice", "bob"
CONV = "kiosk:alice"
# Identity rows go 25 minutes after their last statement (none of the story's is due before minute 26).
POLICIES = {"fermix_core": {"retention": {"check_every_s": 0, "policy": [
    {"name": "health", "after": "25m", "category": "identity"}]}}}
SECRETS = ("Quetzalcoatlus", "Marzipanmountain", "Tangerinevolcano", "Wolframpomegranate")


def minute(n: float) -> datetime:
    return START + timedelta(minutes=n)


def add(m: MemorySystem, key: str, value: str, *, owner: str = OWNER, category: str = "preference",
        **more: str) -> int:
    [outcome] = m.write_memory({"op": "add", "category": category, "key": key, "value": value, **more},
                               agent_id=AGENT, owner_id=owner, trust="guest")
    return int(outcome.memory_id)


@pytest.fixture
def story(tmp_path: Path) -> Iterator[tuple[MemorySystem, TestClock, dict[str, int]]]:
    """Minute 1: alice's drink and city; minute 2: a note learnt in the kiosk conversation, bob's
    row and a code that expires at minute 28; minute 3: the drink is replaced. Nothing is erased
    yet; the city falls due to the ``health`` policy at minute 26."""
    clock = TestClock(START)
    with MemorySystem.open(tmp_path / "home", clock=clock, config=POLICIES) as m:
        clock.t = minute(1)
        rows = {"drink": add(m, "drink", f"tea from {SECRETS[0]}"),
                "city": add(m, "home_city", SECRETS[1], category="identity")}
        clock.t = minute(2)
        m.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", sender=OWNER,
                         content=f"the locker code is {SECRETS[2]}")
        m.dispatch_tool("memory_store", {"key": "locker", "value": f"code {SECRETS[2]}"}, agent_id=AGENT,
                        owner_id=OWNER, conversation=CONV)
        rows["locker"] = next(r.id for r in m.memories(agent_id=AGENT, owner_id=OWNER) if r.key == "locker")
        rows["bob"] = add(m, "drink", "coffee", owner=OTHER)
        rows["code"] = add(m, "door_code", "4711", expires_at=minute(28).isoformat())
        clock.t = minute(3)
        m.write_memory({"op": "replace", "id": rows["drink"], "value": f"green tea {SECRETS[3]}"}, agent_id=AGENT,
                       owner_id=OWNER, trust="guest")
        clock.t = minute(10)
        yield m, clock, rows


def receipt_of(m: MemorySystem, record: int | None) -> int | None:
    """The receipt in the log that covers erasure record ``record`` (``None``: none does)."""
    return next((item.position for item in m.events(stream=RECEIPT_STREAM)
                 if isinstance(item.event, ev.ErasureReceipted) and record in item.event.records), None)


def placeholders(m: MemorySystem, n: float, owner: str | None = OWNER) -> dict[int, tuple[str, bool]]:
    """The placeholders at minute ``n``: who erased each row, and whether its receipt is named
    (always the receipt in the log covering the row's record)."""
    found = m.erased_memories(agent_id=AGENT, owner_id=owner, as_of=minute(n))
    for r in found:
        assert r.receipt == receipt_of(m, r.record)
    return {r.memory_id: (r.erased_by, r.receipt is not None) for r in found}


def no_content(rows: list[Any]) -> None:
    text = repr(rows)
    assert not any(s in text for s in SECRETS) and "drink" not in text and "preference" not in text


def test_a_forgotten_fact_shows_before_its_erasure_and_is_gone_at_it(
        story: tuple[MemorySystem, TestClock, dict[str, int]]) -> None:
    m, clock, rows = story
    clock.t = minute(20)
    m.forget_memory(rows["drink"], by="olga")
    clock.t = minute(60)
    assert placeholders(m, 0.5) == {}  # not yet recorded
    for n in (1, 3, 19.9):
        assert placeholders(m, n) == {rows["drink"]: ("operator olga", True)}
        assert rows["drink"] not in {r.id for r in m.memories(agent_id=AGENT, owner_id=OWNER, as_of=minute(n))}
    for n in (20, 30):
        assert placeholders(m, n) == {}
    [row] = m.erased_memories(agent_id=AGENT, owner_id=OWNER, as_of=minute(2))
    assert (row.recorded_at, row.erased_at, row.source_type, row.record_kind) == (
        minute(1), minute(20), "forget", "memory.forgotten")
    no_content(m.erased_memories(as_of=minute(2)))
    assert placeholders(m, 2, owner=OTHER) == {}


def test_a_retained_then_erased_fact_disappears_at_its_erasure_not_before(
        story: tuple[MemorySystem, TestClock, dict[str, int]]) -> None:
    m, clock, rows = story
    clock.t = minute(30)
    report = m.run_retention()
    assert {item.memory_id for item in report.items} == {rows["city"], rows["code"]}
    clock.t = minute(60)
    assert placeholders(m, 5) == {rows["city"]: ("retention policy health", True),
                                  rows["code"]: ("its own expiry", True)}
    # Due at minute 26 and 28, erased by the run at minute 30: standing until then.
    assert set(placeholders(m, 29.9)) == {rows["city"], rows["code"]}
    assert placeholders(m, 30) == {}
    keys = {r.key for r in m.memories(agent_id=AGENT, owner_id=OWNER, as_of=minute(29.9))}
    assert "home_city" not in keys and "door_code" not in keys and "drink" in keys
    [city] = [r for r in m.erased_memories(as_of=minute(5)) if r.memory_id == rows["city"]]
    assert (city.recorded_at, city.erased_at, city.source_type, city.source_id) == (
        minute(1), minute(30), "retention", "health")
    no_content(m.erased_memories(as_of=minute(5)))


def test_an_owner_and_a_conversation_forgotten(story: tuple[MemorySystem, TestClock, dict[str, int]]) -> None:
    m, clock, rows = story
    clock.t = minute(40)
    m.forget_conversation(AGENT, CONV, by="olga")
    assert placeholders(m, 2) == {rows["locker"]: ("operator olga (a conversation)", True)}
    clock.t = minute(50)
    m.forget_owner(OWNER, agent_id=AGENT, by="olga")
    clock.t = minute(60)
    assert placeholders(m, 2) == {rows["locker"]: ("operator olga (a conversation)", True),
                                  rows["drink"]: ("operator olga (the whole owner)", True),
                                  rows["city"]: ("operator olga (the whole owner)", True),
                                  rows["code"]: ("operator olga (the whole owner)", True)}
    assert set(placeholders(m, 45)) == {rows["drink"], rows["city"], rows["code"]}
    assert m.memories(agent_id=AGENT, owner_id=OWNER, as_of=minute(45)) == []
    assert placeholders(m, 50) == {}
    assert [r.memory_id for r in m.erased_memories(as_of=minute(45))] == [rows["drink"], rows["city"], rows["code"]]
    assert {r.owner_id for r in m.memories(as_of=minute(45))} == {OTHER}


def test_the_placeholders_survive_an_export_an_import_and_a_replay(
        story: tuple[MemorySystem, TestClock, dict[str, int]], tmp_path: Path, every_store: str,
        request: pytest.FixtureRequest) -> None:
    m, clock, rows = story
    clock.t = minute(20)
    m.forget_conversation(AGENT, CONV, by="olga")
    clock.t = minute(30)
    m.run_retention()
    clock.t = minute(60)
    before = m.erased_memories(as_of=minute(5))
    assert [r.memory_id for r in before] == sorted([rows["city"], rows["code"], rows["locker"]])
    assert all(r.receipt is not None for r in before)
    lines = list(m.export_events())
    if every_store == "postgres":  # the home folder alone does not name the store there: a database of its own
        os.environ["FERMIX_DATABASE_URL"] = request.getfixturevalue("postgres_server").fresh_database()
    with MemorySystem.open(tmp_path / "imported", clock=clock) as imported:
        imported.import_events(lambda: lines)
        assert imported.erased_memories(as_of=minute(5)) == before
        assert imported.memories(as_of=minute(5)) == m.memories(as_of=minute(5))
    assert m.replay_into(tmp_path / "replayed")["identical"]
    assert m.verify().ok
    saved = os.environ.pop("FERMIX_DATABASE_URL", None)  # the replay is a SQLite file on either store
    try:
        with MemorySystem.open(tmp_path / "replayed", clock=clock, readonly=True) as replayed:
            assert replayed.erased_memories(as_of=minute(5)) == before
    finally:
        if saved is not None:
            os.environ["FERMIX_DATABASE_URL"] = saved


def test_the_cli_lists_the_placeholders(story: tuple[MemorySystem, TestClock, dict[str, int]]) -> None:
    m, clock, rows = story
    clock.t = minute(20)
    m.forget_memory(rows["city"], by="olga")
    clock.t = minute(60)
    home = m.home
    human = run_cli("memory", "list", "--owner", OWNER, "--as-of", minute(5).isoformat(), home=home)
    assert human.returncode == 0, human.stderr
    receipt = receipt_of(m, m.erased_memories(as_of=minute(5))[0].record)
    line = f"{rows['city']}\t{AGENT}\t{OWNER}\t[erased at 2026-03-01T09:20:00Z by operator olga; receipt at {receipt}]"
    assert line in human.stdout.splitlines()
    assert SECRETS[1] not in human.stdout
    listed = run_cli("memory", "list", "--owner", OWNER, "--as-of", minute(5).isoformat(), "--json", home=home)
    data = json.loads(listed.stdout)
    assert [r["id"] for r in data if r.get("erased")] == [rows["city"]]
    [erased] = [r for r in data if r.get("erased")]
    assert erased["erased_by"] == "operator olga" and erased["erased_at"] == "2026-03-01T09:20:00+00:00"
    assert erased["receipt"] == receipt and "key" not in erased and "value" not in erased
    log = run_cli("events", "log", "--kind", "erasure.receipted", home=home)
    assert f"receipt of records [{erased['record']}]: " in log.stdout and "asked by forget olga" in log.stdout
    after = run_cli("memory", "list", "--owner", OWNER, "--as-of", minute(20).isoformat(), home=home)
    assert "erased" not in after.stdout
