"""Retention policies (ADR-0080): what they cover is erased once due, the way forget erases it
(every byte, the prompt files re-rendered), recorded once per run; what is not due stays."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import AsyncMemorySystem, MemorySystem
from fermix_memory.adapters.sqlite import erasure
from fermix_memory.application.retention import Retention
from fermix_memory.domain import events as ev
from fermix_memory.domain.privacy_events import ErasureReceipted, RetentionRan
from tests.cli_runner import run_cli
from tests.integration.test_forget import found
from tests.integration.test_scrub_busy import writer_at_scrub
from tests.manual_clock import TestClock
from tests.waits import until

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

KIOSK = ("Zanzibarkioskpin", "Kioskmarmalade")  # said in the shop's kiosk conversation
GUEST = ("Guestlavenderfog",)  # said by a guest to ada
HEALTH = ("Bloodtypeqwertz", "Bobfirstcity")  # alice's identity row, bob's as first stated
RESTATED = "Restatedcobalt"  # bob's identity row stated again: due 14 days after that
GONE = KIOSK + GUEST + HEALTH + (RESTATED,)
KEPT = ("Operatorpumpkin", "Preferencewombat")

POLICIES: dict[str, Any] = {"fermix_core": {"retention": {"check_every_s": 0, "policy": [
    {"name": "kiosk", "after": "30d", "channel_prefix": "kiosk:"},
    {"name": "guests", "after": "7d", "trust": "guest", "agent_id": "ada"},
    {"name": "health", "after": "14d", "category": "identity"},
]}}}


def say(memory: MemorySystem, agent: str, owner: str, conversation: str, text: str, trust: str = "guest") -> None:
    memory.append_message(agent_id=agent, owner_id=owner, conversation=conversation, role="user", sender=owner,
                          content=text, trust=trust)  # type: ignore[arg-type]


def row(memory: MemorySystem, owner: str, category: str, key: str, value: str) -> int:
    outcome = memory.write_memory({"op": "add", "category": category, "key": key, "value": value},
                                  agent_id="ada", owner_id=owner, trust="operator")
    assert outcome[0].memory_id is not None
    return outcome[0].memory_id


def fill(memory: MemorySystem) -> dict[str, int]:
    say(memory, "shop", "visitor", "kiosk:7", f"my pin is {KIOSK[0]}")
    say(memory, "shop", "visitor", "kiosk:7", f"and I like {KIOSK[1]}")
    say(memory, "ada", "gina", "telegram:gina", f"call me {GUEST[0]}")
    say(memory, "ada", "olga", "telegram:olga", f"the operator says {KEPT[0]}", trust="operator")
    return {"health": row(memory, "alice", "identity", "blood_type", HEALTH[0]),
            "kept": row(memory, "alice", "preference", "animal", KEPT[1]),
            "bob": row(memory, "bob", "identity", "home", HEALTH[1])}


def values(memory: MemorySystem) -> str:
    return " ".join(m.value for m in memory.memories(agent_id="ada", include_archived=True))


def test_each_policy_erases_what_it_covers_once_due_and_nothing_else(tmp_path: Path) -> None:
    clock, home = TestClock(), tmp_path / "home"
    with MemorySystem.open(home, config=POLICIES, clock=clock) as memory:
        ids = fill(memory)
        assert memory.run_retention().items == []  # nothing due yet: nothing recorded
        assert not [e for e in memory.events() if isinstance(e.event, RetentionRan)]
        status = {p.name: p for p in memory.retention_status().policies}
        assert status["guests"].next_due == clock.t.replace(day=8)
        assert [p.name for p in memory.retention_status().policies] == ["kiosk", "guests", "health", "expires_at"]

        clock.advance(days=8)
        first = memory.run_retention()
        assert first.receipt is not None and first.receipt > first.record
        assert [(i.policy, i.conversation) for i in first.items] == [("guests", "telegram:gina")]
        assert memory.history("ada", "telegram:gina") == [] and memory.history("ada", "telegram:olga")

        clock.advance(days=2)  # bob's row is stated again: its 14 days start over
        memory.write_memory({"op": "replace", "id": ids["bob"], "value": RESTATED}, agent_id="ada", owner_id="bob",
                            trust="operator")
        clock.advance(days=5)
        preview = memory.run_retention(dry_run=True)
        assert [(i.policy, i.memory_id) for i in preview.items] == [("health", ids["health"])]
        assert HEALTH[0] in values(memory)  # a dry run changes nothing
        second = memory.run_retention()
        assert [i.memory_id for i in second.items] == [ids["health"]]
        assert HEALTH[0] not in values(memory) and KEPT[1] in values(memory) and RESTATED in values(memory)
        user_md = memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        assert HEALTH[0] not in user_md and KEPT[1] in user_md
        assert [m.content for m in memory.history("shop", "kiosk:7")]  # 15 days: the kiosk's 30 are not over

        clock.advance(days=16)
        third = memory.run_retention()
        assert [(i.policy, i.conversation or i.memory_id) for i in third.items] == [("kiosk", "kiosk:7"),
                                                                                    ("health", ids["bob"])]
        assert RESTATED not in values(memory) and KEPT[1] in values(memory)
        assert memory.history("shop", "kiosk:7") == []
        assert memory.recall(KIOSK[0], agent_id="shop", owner_id="visitor", scope="all", source="all").messages == []
        check_log(memory, tmp_path, runs=3)
    assert found(home, GONE) == {}  # SQLite: the file and its WAL; either store: the prompt files
    assert set(found(home, KEPT[1:2])) == {KEPT[1]}  # the scan sees what stays (alice's USER.md)


def check_log(memory: MemorySystem, tmp_path: Path, runs: int) -> None:
    """One retention.ran per run naming its records; each record says retention and its policy;
    no event holds an erased word; the chain verifies and the log replays to the same tables."""
    ran = [e for e in memory.events() if isinstance(e.event, RetentionRan)]
    assert len(ran) == runs
    receipted = [e.event.records for e in memory.events() if isinstance(e.event, ErasureReceipted)]
    assert [(*e.event.records, e.position) for e in ran] == receipted  # each run signed, its records named
    for item in ran:
        for position in item.event.records:
            record = next(iter(memory.events(after=position - 1))).event
            assert isinstance(record, ev.ConversationForgotten | ev.MemoryForgotten)
            assert record.provenance.source_type == "retention"
            assert record.provenance.source_id in item.event.policies
    for recorded in memory.events():
        assert not any(word in repr(recorded.event) for word in GONE), recorded
    verified = memory.verify()
    assert verified.ok, verified.problem
    assert memory.replay_into(tmp_path / "replayed")["identical"]


def test_two_memories_on_one_home_erase_it_once(tmp_path: Path) -> None:
    clock, home = TestClock(), tmp_path / "home"
    with MemorySystem.open(home, config=POLICIES, clock=clock) as memory:
        fill(memory)
    clock.advance(days=40)
    with MemorySystem.open(home, config=POLICIES, clock=clock) as one, \
            MemorySystem.open(home, config=POLICIES, clock=clock) as two:
        assert one.retention_status().due == two.retention_status().due == 4
        with ThreadPoolExecutor(2) as pool:  # both at once: each re-checks its items in its transaction
            reports = list(pool.map(lambda memory: memory.run_retention(), (one, two)))
        assert sorted(len(r.items) for r in reports) == [0, 4]
        assert sorted(r.record > 0 for r in reports) == [False, True]
        assert len([e for e in two.events() if isinstance(e.event, RetentionRan)]) == 1
        assert two.retention_status().due == 0
        assert two.verify().ok


def test_a_run_that_finds_its_items_gone_or_restated_records_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Read as due, then erased by another host (or stated again, or spoken in again) before this
    run's transaction: each is checked again inside it, and nothing is recorded."""
    clock, home = TestClock(), tmp_path / "home"
    real, kept = Retention.outlook, list[Any]()

    def stale(self: Retention, now: Any) -> Any:
        kept.append(kept[0] if kept else real(self, now))
        return kept[-1]

    monkeypatch.setattr(Retention, "outlook", stale)
    with MemorySystem.open(home, config=POLICIES, clock=clock) as memory:
        ids = fill(memory)
        clock.advance(days=40)
        assert memory.retention_status().due == 4  # read now, kept as it is
        memory.forget_conversation("shop", "kiosk:7")
        say(memory, "ada", "gina", "telegram:gina", "I am back")  # not idle any more
        memory.forget_memory(ids["health"])
        memory.write_memory({"op": "replace", "id": ids["bob"], "value": RESTATED}, agent_id="ada", owner_id="bob",
                            trust="operator")
        head = memory.head().position
        assert memory.run_retention().items == []
        assert memory.head().position == head
        assert [m.content for m in memory.history("ada", "telegram:gina")][-1] == "I am back"


def test_the_cli_shows_what_is_due_and_previews_a_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run_cli("setup", "init", home=home).returncode == 0
    with (home / "config.toml").open("a", encoding="utf-8") as config:
        config.write('\n[fermix_core.retention]\ncheck_every_s = 0\n[[fermix_core.retention.policy]]\n'
                     'name = "kiosk"\nafter = "30d"\nchannel_prefix = "kiosk:"\n')
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id="shop", owner_id="visitor", conversation="kiosk:7", role="user",
                              content=f"pin {KIOSK[0]}", created_at="2020-01-01T10:00:00+00:00")
        memory.append_message(agent_id="shop", owner_id="visitor", conversation="kiosk:8", role="user",
                              content="fresh")
    status = run_cli("retention", "status", home=home)
    assert status.returncode == 0, status.stderr
    assert "kiosk: channel_prefix 'kiosk:' after 30d; due now: 1 conversation, 0 rows" in status.stdout
    preview = run_cli("retention", "status", "--dry-run", "--json", home=home)
    assert preview.returncode == 0, preview.stderr
    assert [i["conversation"] for i in json.loads(preview.stdout)["would_erase"]] == ["kiosk:7"]
    dry = run_cli("retention", "run", "--dry-run", home=home)
    assert dry.returncode == 0 and "kiosk: conversation kiosk:7 (agent shop)" in dry.stdout
    assert KIOSK[0] not in dry.stdout
    done = run_cli("retention", "run", home=home)
    assert done.returncode == 0, done.stderr
    assert "erased 1 item" in done.stdout
    assert "nothing is due" in run_cli("retention", "run", home=home).stdout
    assert found(home, KIOSK[:1]) == {}


def test_the_background_upkeep_erases_what_falls_due(tmp_path: Path) -> None:
    clock, home = TestClock(), tmp_path / "home"
    settings = {"fermix_core": {"retention": {**POLICIES["fermix_core"]["retention"], "check_every_s": 0.05}}}
    with MemorySystem.open(home, config=settings, clock=clock) as memory:
        fill(memory)
        clock.advance(days=40)  # the next look finds four items due
        until(lambda: memory.retention_status().due == 0, "a run of the background upkeep")
        assert memory.history("shop", "kiosk:7") == [] and memory.history("ada", "telegram:olga")
        assert len([e for e in memory.events() if isinstance(e.event, RetentionRan)]) == 1
        assert memory.verify().ok


def test_the_async_twins_answer_as_the_sync_methods_do(tmp_path: Path) -> None:
    clock = TestClock()

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", config=POLICIES, clock=clock) as memory:
            await memory.append_message(agent_id="shop", owner_id="visitor", conversation="kiosk:7", role="user",
                                        content=f"pin {KIOSK[0]}")
            clock.advance(days=31)
            assert (await memory.retention_status()).due == 1
            assert [i.conversation for i in (await memory.run_retention(dry_run=True)).items] == ["kiosk:7"]
            assert len((await memory.run_retention()).items) == 1
            assert (await memory.retention_status()).due == 0

    asyncio.run(main())


@pytest.mark.sqlite_only("another writer holds the SQLite file; PostgreSQL's VACUUM waits for its locks")
def test_a_run_while_another_memory_writes_the_file_leaves_its_rewrite_pending(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The erasure is committed; the rewrite waits for the other writer, then is left pending
    (not an error), and whichever memory gets the file next finishes it (ADR-0095)."""
    clock, home = TestClock(), tmp_path / "home"
    with MemorySystem.open(home, config=POLICIES, clock=clock) as memory:
        fill(memory)
    clock.advance(days=40)
    monkeypatch.setattr(erasure, "SCRUB_WAIT_S", 0.3)
    with MemorySystem.open(home, config=POLICIES, clock=clock) as one, \
            MemorySystem.open(home, config=POLICIES, clock=clock) as two:
        with writer_at_scrub(monkeypatch, home):
            report = one.run_retention()
        assert len(report.items) == 4 and report.record > 0 and report.receipt is not None
        assert not report.finished and report.rewrite_pending and "was not rewritten yet" in report.remains[0]
        assert two.retention_status().due == 0
        assert found(home, GONE) != {}  # still in the file's free pages, as the report says
        finished = two.run_retention()  # nothing due: it finishes the rewrite left pending
        assert finished.items == [] and finished.finished and not finished.rewrite_pending
    assert found(home, GONE) == {}
