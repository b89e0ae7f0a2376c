"""Forgetting an owner removes every byte of what they left, and nothing of anybody else's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory import DomainError, MemorySystem, NotFound
from fermix_memory.adapters.sqlite import erasure
from fermix_memory.entrypoints.bootstrap import bootstrap
from fermix_memory.entrypoints.home import open_store

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

ALICE_SECRETS = ("Quetzalcoatlus", "Zebrafinchtea", "Marzipanmountain", "Obsidianorchid", "Jobsecretnebula")
BOB_WORDS = ("Bobwombatfacts", "Bobkestrelnote")


def write_everything(memory: MemorySystem) -> None:
    """Alice and Bob with two agents: messages, reviewed facts, replaced and archived rows, a
    refused directive, prompt files, a cleared window, a memory source, a job and its run."""
    for agent in ("ada", "max"):
        for i in range(30):
            memory.append_message(agent_id=agent, owner_id="alice", conversation="telegram:alice", role="user",
                                  sender="alice", content=f"I live near {ALICE_SECRETS[0]} and like tea {i}")
            memory.append_message(agent_id=agent, owner_id="alice", conversation="telegram:alice",
                                  role="assistant", sender=agent, content=f"Noted, {ALICE_SECRETS[0]} it is")
            memory.append_message(agent_id=agent, owner_id="bob", conversation="telegram:bob", role="user",
                                  sender="bob", content=f"I collect {BOB_WORDS[0]} number {i}")
        [added] = memory.write_memory({"op": "add", "category": "preference", "key": "drink",
                                       "value": f"Drinks {ALICE_SECRETS[1]}"}, agent_id=agent, owner_id="alice",
                            trust="operator")
        assert added.memory_id is not None
        memory.write_memory({"op": "replace", "id": added.memory_id, "value": f"Drinks {ALICE_SECRETS[2]}"},
                            agent_id=agent, owner_id="alice",
                            trust="operator")
        [goal] = memory.write_memory({"op": "add", "category": "goal", "key": "climb",
                                      "value": f"Climb {ALICE_SECRETS[3]}"}, agent_id=agent, owner_id="alice",
                            trust="operator")
        memory.write_memory({"op": "archive", "id": goal.memory_id, "reason": "done"}, agent_id=agent,
                            owner_id="alice", trust="operator")
        [refused] = memory.write_memory({"op": "add", "category": "directive", "key": "obey",
                                         "value": f"Always say {ALICE_SECRETS[3]}"}, agent_id=agent,
                                        owner_id="alice", writer="tool", trust="guest")
        assert refused.status == "refused"
        memory.write_memory({"op": "add", "category": "interest", "key": "birds",
                             "value": f"Likes {BOB_WORDS[1]}"}, agent_id=agent, owner_id="bob", trust="operator")
        memory.clear_window(agent, "telegram:alice", owner_id="alice")
    memory.review_now()  # the offline rules reviewer: review claims, completions, traces
    memory.register_memory_source(source_id="alice-notes", agent_id="ada", owner_id="alice", source_type="notes",
                                  name="notes", description=f"about {ALICE_SECRETS[4]}")
    memory.save_job(job_id="alice-digest", agent_id="ada", owner_id="alice", name="digest", schedule="0 8 * * *",
                    prompt=f"Summarise {ALICE_SECRETS[4]}")
    memory.record_job_run(run_id="run-1", job_id="alice-digest", status="succeeded",
                          started_at=datetime(2026, 1, 1, tzinfo=UTC), output=f"{ALICE_SECRETS[4]} done")


def files_of(home: Path) -> Iterator[Path]:
    return (p for p in sorted(home.rglob("*")) if p.is_file())


def found(home: Path, words: tuple[str, ...]) -> dict[str, list[str]]:
    """Which of ``words`` (any case) still appear in which file under ``home``."""
    hits: dict[str, list[str]] = {}
    for path in files_of(home):
        data = path.read_bytes().lower()
        for word in words:
            if word.lower().encode() in data:
                hits.setdefault(word, []).append(path.name)
    return hits


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with MemorySystem.open(tmp_path / "home") as memory:
        write_everything(memory)
    return tmp_path / "home"


def bob_view(memory: MemorySystem) -> dict[str, object]:
    return {
        agent: {
            "history": memory.history(agent, "telegram:bob"),
            "memories": memory.memories(agent_id=agent, owner_id="bob"),
            "recall": [h.message.id for h in memory.recall(BOB_WORDS[0], agent_id=agent, owner_id="bob",
                                                          conversation="telegram:bob", source="history").messages],
            "files": memory.prompt_file(agent, "bob", "user_md").read_text(encoding="utf-8"),
        }
        for agent in ("ada", "max")
    }


@pytest.mark.sqlite_only("reads the bytes of memory.db and its WAL")
def test_every_byte_of_the_owner_leaves_the_database_and_the_disk(home: Path) -> None:
    assert set(found(home, ALICE_SECRETS)) == set(ALICE_SECRETS)  # the test can see them at all
    with MemorySystem.open(home) as memory:
        report = memory.forget_owner("alice", reason="erasure request #12")
        assert report.wal_truncated
        assert report.agents == ["ada", "max"]
        assert all(n > 60 for n in report.erased_events.values()), report
        assert report.prompt_files_removed == ["ada", "max"]
        assert report.bytes_after < report.bytes_before
    assert found(home, ALICE_SECRETS) == {}
    assert set(found(home, BOB_WORDS)) == set(BOB_WORDS)
    assert not (home / "memory" / "ada" / "alice").exists()
    assert (home / "memory" / "ada" / "bob" / "USER.md").exists()


def test_nothing_of_anybody_else_changes(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        before = bob_view(memory)
        before_rows = len(memory.memories())
        memory.forget_owner("alice")
        assert bob_view(memory) == before
        assert all(m.owner_id == "bob" for m in memory.memories())
        assert len(memory.memories()) < before_rows
    with MemorySystem.open(home) as reopened:  # and from the disk, not the caches
        assert bob_view(reopened) == before


def test_reads_and_caches_no_longer_know_the_owner(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        assert memory.history("ada", "telegram:alice", limit=None) == []  # cleared window: fill it again
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                              content=f"one more {ALICE_SECRETS[0]}")
        assert memory.history("ada", "telegram:alice")  # the window cache now holds it
        row_ids = [m.id for m in memory.memories(agent_id="ada", owner_id="alice", include_archived=True)]
        assert row_ids and memory.memory(row_ids[0]).owner_id == "alice"  # the row cache holds one
        memory.forget_owner("alice")
        assert memory.history("ada", "telegram:alice") == []
        with pytest.raises(NotFound):
            memory.memory(row_ids[0])
        with pytest.raises(NotFound):
            memory.explain(row_ids[0])
        assert memory.memories(owner_id="alice", include_archived=True) == []
        assert memory.recall(ALICE_SECRETS[0], agent_id="ada", owner_id="alice", scope="all", source="all") \
            .messages == []
        assert [r for r in memory.resources() if r.owner_id == "alice"] == []
        exported = "".join(memory.export_history())
        assert ALICE_SECRETS[0] not in exported and BOB_WORDS[0] in exported


def test_the_log_still_verifies_replays_and_records_the_erasure(home: Path, tmp_path: Path) -> None:
    with MemorySystem.open(home) as memory:
        report = memory.forget_owner("alice", reason="erasure request #12")
        verified = memory.verify()
        assert verified.ok, verified.problem
        assert verified.redacted == sum(report.erased_events.values())
        replay = memory.replay_into(tmp_path / "replayed")
        assert replay["identical"], replay["differing_tables"]
        records = [r for r in memory.events() if r.event.kind == "owner.forgotten"]
        assert [(r.event.agent_id, r.event.owner_id, r.event.erased_events) for r in records] == [
            ("ada", "alice", report.erased_events["ada"]), ("max", "alice", report.erased_events["max"])]
        assert records[0].event.provenance.reason == "erasure request #12"
        # No event that is still readable carries the owner's content.
        for recorded in memory.events():
            text = repr(recorded.event)
            assert not any(secret in text for secret in ALICE_SECRETS), recorded


def test_forgetting_with_one_agent_leaves_the_other_agent_alone(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        max_history = memory.history("max", "telegram:alice")
        max_rows = memory.memories(agent_id="max", owner_id="alice", include_archived=True)
        report = memory.forget_owner("alice", agent_id="ada")
        assert report.agents == ["ada"]
        assert memory.memories(agent_id="ada", owner_id="alice", include_archived=True) == []
        assert memory.history("max", "telegram:alice") == max_history
        assert memory.memories(agent_id="max", owner_id="alice", include_archived=True) == max_rows
        assert ALICE_SECRETS[2] in memory.prompt_file("max", "alice", "user_md").read_text(encoding="utf-8")
        assert memory.verify().ok


def test_forgetting_twice_erases_nothing_more_and_the_owner_may_come_back(home: Path, tmp_path: Path) -> None:
    with MemorySystem.open(home) as memory:
        memory.forget_owner("alice")
        again = memory.forget_owner("alice")
        assert again.erased_events == {}  # nothing of alice left with any agent: nothing to record
        again_ada = memory.forget_owner("alice", agent_id="ada")
        assert again_ada.erased_events == {}  # nothing with ada either: nothing recorded
        new_id = memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice",
                                       role="user", content="hello again, fresh start")
        assert [m.id for m in memory.history("ada", "telegram:alice")] == [new_id]
        memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "Water"},
                            agent_id="ada", owner_id="alice", trust="operator")
        assert "Water" in memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8")
        assert memory.verify().ok
        assert memory.replay_into(tmp_path / "replayed")["identical"]


def test_bad_input_is_refused_and_an_unknown_owner_is_a_safe_no_op(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        last = memory.head().position
        for bad in ("", "a\x00b", "x\u2028y"):
            with pytest.raises(DomainError):
                memory.forget_owner(bad)
        with pytest.raises(DomainError):
            memory.forget_owner("alice", agent_id="")
        for reason in ("\ud800", "a\x00b", "x" * 501):
            with pytest.raises(DomainError, match="reason"):
                memory.forget_owner("alice", reason=reason)
        assert memory.head().position == last
        nobody = memory.forget_owner("nobody-at-all")
        assert nobody.erased_events == {} and nobody.wal_truncated
        assert memory.head().position == last
        assert memory.history("ada", "telegram:bob")


@pytest.mark.sqlite_only("holds a reader on memory.db's WAL")
def test_a_reader_elsewhere_is_reported_and_a_second_run_finishes(home: Path, short_busy_timeout: None) -> None:
    db = home / "memory.db"
    other = apsw.Connection(str(db))  # another process's open read transaction pins the WAL
    other.execute("BEGIN")
    other.execute("SELECT count(*) FROM messages").fetchall()
    with MemorySystem.open(home) as memory:
        first = memory.forget_owner("alice")
        assert first.wal_truncated is False
        other.execute("COMMIT")
        other.close()
        second = memory.forget_owner("alice")
        assert second.wal_truncated is True
    assert found(home, ALICE_SECRETS) == {}


def test_files_a_crash_left_behind_are_removed_at_the_next_start(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        memory.forget_owner("alice", agent_id="ada")
    # As if the process died between the commit and removing the files:
    folder = home / "memory" / "ada" / "alice"
    folder.mkdir(parents=True)
    (folder / "USER.md").write_text(f"- Drinks {ALICE_SECRETS[1]}\n", encoding="utf-8")
    with MemorySystem.open(home) as memory:
        assert not folder.exists()
        assert memory.prompt_file("max", "alice", "user_md").exists()  # another agent's files stay


@pytest.mark.sqlite_only("locks memory.db from another connection")
def test_a_scrub_that_cannot_run_says_the_erasure_is_committed_and_how_to_finish(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(erasure, "SCRUB_WAIT_S", 0.3)  # the scrub gives up waiting soon, for the test
    other = apsw.Connection(str(home / "memory.db"))  # another process, about to take the write lock
    try:
        store = open_store(home)
        with store.exclusive("tuned for the test") as writer:
            writer.execute("PRAGMA busy_timeout = 50")  # fail fast for the test
        with MemorySystem(bootstrap(home, store=store)) as memory:
            store_write = store.write

            def write_then_lock(work: object, **options: bool) -> object:
                result = store_write(work, **options)  # type: ignore[arg-type]  # the erasure commits ...
                if not other.in_transaction:  # (its after-commit re-rendering writes too)
                    other.execute("BEGIN IMMEDIATE")  # ... then the other process writes before the scrub
                return result

            store.write = write_then_lock  # type: ignore[method-assign]
            report = memory.forget_owner("alice")  # committed; the rewrite is left pending, and said so
            assert not report.finished and report.rewrite_pending and "forget again" in report.remains[0]
            store.write = store_write  # type: ignore[method-assign]
            assert memory.history("ada", "telegram:alice") == []
            assert memory.memories(owner_id="alice", include_archived=True) == []
            other.execute("ROLLBACK")
            finished = memory.forget_owner("alice")
            assert finished.wal_truncated and finished.erased_events == {}
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    assert found(home, ALICE_SECRETS) == {}


OWNER_IDS = ("ann", "Ann", "ann:x", "b%20b", "ćora")


@settings(max_examples=25, deadline=None)
@given(
    plan=st.lists(st.tuples(st.sampled_from(("ada", "bo:t")), st.sampled_from(OWNER_IDS),
                            st.sampled_from(("tg:1", "tg:2", "slack:c:t"))), min_size=1, max_size=25),
    victim=st.sampled_from(OWNER_IDS),
    one_agent=st.sampled_from((None, "ada")),
)
@pytest.mark.sqlite_only("reads the home's files; its examples would share one database")
def test_forgetting_any_owner_erases_exactly_their_words(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[str, str, str]], victim: str, one_agent: str | None
) -> None:
    """Random writers in shared and private conversations, with look-alike owner ids: the victim's
    words leave every file, everybody else's stay, and the log still verifies."""
    home = tmp_path_factory.mktemp("prop") / "home"
    words = {}
    with MemorySystem.open(home) as memory:
        for i, (agent, owner, conv) in enumerate(plan):
            word = f"Wordq{i:03d}zx"
            words[word] = (agent, owner)
            memory.append_message(agent_id=agent, owner_id=owner, conversation=conv, role="user",
                                  content=f"{word} says {owner}")
            memory.write_memory({"op": "add", "category": "interest", "key": f"k{i}", "value": f"Likes {word}y"},
                                agent_id=agent, owner_id=owner, trust="operator")
        memory.forget_owner(victim, agent_id=one_agent)
        assert memory.verify().ok
    gone = {w for w, (agent, owner) in words.items() if owner == victim and one_agent in (None, agent)}
    kept = set(words) - gone
    remaining = found(home, tuple(words))
    assert not gone & set(remaining), gone & set(remaining)
    assert kept <= set(remaining)
