"""Replay (R-REPLAY): rebuilding every projection from the log alone gives byte-identical tables."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import ConversationKey, IntegrityError, MemorySystem, StorageError
from fermix_memory.adapters.sqlite import audit
from fermix_memory.adapters.sqlite.schema import PROJECTION_TABLES, deferred_indexing

AGENTS = ("ada", "bo:t", "c%3Aagent")
OWNERS = ("alice", "bob", "ch%25rlie", "d:ana")
CONVERSATIONS = (
    ConversationKey("telegram", "42"),
    ConversationKey("slack", "C:01:general", "thread:1%2"),
    ConversationKey("discord", "100%", "%3A"),
    ConversationKey("email", "a:b", ""),
    ConversationKey("realtime", "device-\u00e9", "t\u00f6pic"),
)
TEXTS = (
    "I live in Paris and drink flat whites",
    "\u6211\u559c\u6b22\u5496\u5561 (I like coffee)",
    "\u05e9\u05dc\u05d5\u05dd world \u0645\u0631\u062d\u0628\u0627",
    "emoji \U0001f600\U0001f389 party \u2615",
    "combining e\u0301 and \u00e9 and NFKC \uff21\uff22",
    "quote \" and 'single' and back\\slash and NEAR(x y) AND OR *",
    "line one\nline two\ttabbed",
)
CATEGORIES = ("identity", "preference", "interest", "goal", "context", "directive")
MIN_EVENTS = 3000


def build(memory: MemorySystem, rng: random.Random) -> dict[str, Any]:
    stats = {"refused": 0, "cleared": 0, "archived": 0, "restored": 0, "replaced": 0}
    live_ids: list[tuple[str, str, int]] = []
    while memory.head().position < MIN_EVENTS:
        agent, owner, conv = rng.choice(AGENTS), rng.choice(OWNERS), rng.choice(CONVERSATIONS)
        roll = rng.random()
        if roll < 0.55:
            memory.append_message(
                agent_id=agent,
                owner_id=owner,
                conversation=conv,
                role=rng.choice(("user", "assistant")),
                sender=owner,
                content=f"{rng.choice(TEXTS)} #{rng.randrange(10**6)}",
                trust=rng.choice(("guest", "operator")),
                metadata={"n": rng.randrange(100), "tag": "t\u00e4g"} if rng.random() < 0.3 else None,
            )
        elif roll < 0.6:
            lines = [
                json.dumps(
                    {
                        "agent_id": agent,
                        "owner_id": owner,
                        "channel": conv.channel,
                        "chat_id": conv.chat_id,
                        "thread_scope": conv.thread_scope,
                        "role": "user",
                        "sender": owner,
                        "content": f"imported {rng.choice(TEXTS)} {k}",
                        "created_at": f"2024-0{1 + k % 9}-1{k % 10}T10:00:00+02:00",
                    },
                    ensure_ascii=False,
                )
                for k in range(rng.randrange(1, 30))
            ]
            memory.import_history(lines)
        elif roll < 0.75:
            writer = rng.choice(("reviewer", "tool", "operator", "job"))
            trust = rng.choice(("operator", "guest"))
            category = rng.choice((*CATEGORIES, "gossip"))
            value = rng.choice(TEXTS) if rng.random() > 0.05 else "x" * 201
            out = memory.write_memory(
                {
                    "op": "add",
                    "category": category,
                    "key": f"key {rng.randrange(25)}",
                    "value": value,
                    "confidence": rng.choice((0.5, 0.9, 1.0, 1.5)),
                },
                agent_id=agent,
                owner_id=owner,
                writer=writer,
                trust=trust,
                conversation=conv if writer == "tool" or rng.random() < 0.5 else None,
                job_source_id=f"job:{rng.randrange(3)}%" if writer == "job" else None,
                source_type="test",
                source_id=f"src-{rng.randrange(5)}",
                session_id="s\u00e9ssion",
                run_id="r1",
                source_message_id=rng.randrange(1, 100),
                reason="because",
            )[0]
            if out.status == "refused":
                stats["refused"] += 1
            elif out.status == "added":
                assert out.memory_id is not None
                live_ids.append((agent, owner, out.memory_id))
            elif out.status == "replaced":
                stats["replaced"] += 1
        elif roll < 0.85 and live_ids:
            agent, owner, memory_id = rng.choice(live_ids)
            out = memory.write_memory(
                {"op": "replace", "id": memory_id, "value": f"{rng.choice(TEXTS)} v{rng.randrange(99)}"},
                agent_id=agent,
                owner_id=rng.choice((owner, owner, "intruder")),
                trust="operator",
            )[0]
            if out.status in ("replaced", "refused"):
                stats[out.status] += 1
        elif roll < 0.93 and live_ids:
            agent, owner, memory_id = rng.choice(live_ids)
            out = memory.write_memory(
                {"op": "archive", "id": memory_id, "reason": "no longer true \u2717"},
                agent_id=agent,
                owner_id=owner,
                trust="operator",
            )[0]
            stats["archived"] += out.status == "archived"
        elif roll < 0.97 and live_ids:
            _, _, memory_id = rng.choice(live_ids)
            if memory.memory(memory_id).archived:
                memory.restore(memory_id, by="auditor")
                stats["restored"] += 1
        else:
            memory.clear_window(agent, conv, owner_id=owner)
            stats["cleared"] += 1
    return stats


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemorySystem]:
    home = tmp_path_factory.mktemp("replay-source")
    with MemorySystem.open(home) as memory:
        stats = build(memory, random.Random(20240601))
        assert all(stats[k] > 5 for k in ("refused", "cleared", "archived", "restored", "replaced")), stats
        yield memory


def source_checksums(memory: MemorySystem) -> dict[str, str]:
    conn = apsw.Connection(str(memory.home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return audit.table_checksums(conn)
    finally:
        conn.close()


def test_the_source_has_thousands_of_varied_events(source: MemorySystem) -> None:
    kinds: dict[str, int] = {}
    for recorded in source.events():
        kinds[recorded.event.kind] = kinds.get(recorded.event.kind, 0) + 1
    assert sum(kinds.values()) >= MIN_EVENTS
    for kind in (
        "message.appended",
        "memory.added",
        "memory.replaced",
        "memory.archived",
        "memory.restored",
        "memory.operation_refused",
        "conversation.window_cleared",
    ):
        assert kinds.get(kind, 0) > 0, kind
    scopes = {m.scope_type.value for m in source.memories()}
    assert scopes == {"owner", "agent", "conversation", "job"}


def test_replay_into_a_new_folder_is_identical(source: MemorySystem, tmp_path: Path) -> None:
    result = source.replay_into(tmp_path / "rebuilt")
    assert result["identical"] is True, result["differing_tables"]
    assert result["differing_tables"] == []
    assert result["events"] == source.head().position
    assert Path(result["target"]) == tmp_path / "rebuilt" / "memory.db"
    live = source_checksums(source)
    assert set(live) == set(PROJECTION_TABLES)
    assert result["checksums"] == live
    # The rebuilt database is a working, verifiable store with the same content.
    with MemorySystem.open(tmp_path / "rebuilt") as rebuilt:
        report = rebuilt.verify()
        assert report.ok, report.problem
        assert report.table_checksums == live
        for agent in AGENTS:
            for conv in CONVERSATIONS:
                assert rebuilt.history(agent, conv) == source.history(agent, conv)
        assert rebuilt.memories() == source.memories()
        hits = rebuilt.recall("coffee", agent_id="ada", owner_id="alice", scope="all", source="all")
        same = source.recall("coffee", agent_id="ada", owner_id="alice", scope="all", source="all")
        assert [h.message.id for h in hits.messages] == [h.message.id for h in same.messages]
        assert [h.memory.id for h in hits.memories] == [h.memory.id for h in same.memories]


def test_replay_of_the_replay_is_identical_too(source: MemorySystem, tmp_path: Path) -> None:
    first = source.replay_into(tmp_path / "one")
    with MemorySystem.open(tmp_path / "one") as rebuilt:
        second = rebuilt.replay_into(tmp_path / "two")
    assert second["identical"] is True
    assert second["checksums"] == first["checksums"]


def test_replay_refuses_a_folder_that_already_has_a_database(source: MemorySystem, tmp_path: Path) -> None:
    target = tmp_path / "existing"
    with MemorySystem.open(target) as other:
        other.append_message(agent_id="x", owner_id="y", conversation="c:1", role="user", content="keep me")
    db = target / "memory.db"
    before = db.read_bytes()
    with pytest.raises(StorageError, match="already exists"):
        source.replay_into(target)
    assert db.read_bytes() == before
    with MemorySystem.open(target) as other:
        assert [m.content for m in other.history("x", "c:1")] == ["keep me"]


def test_replay_refuses_even_an_empty_existing_file(source: MemorySystem, tmp_path: Path) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    (target / "memory.db").write_bytes(b"")
    with pytest.raises(StorageError):
        source.replay_into(target)
    assert (target / "memory.db").read_bytes() == b""


def test_full_text_indexes_pass_integrity_check_after_updates_and_archives(
    source: MemorySystem, tmp_path: Path
) -> None:
    conn = apsw.Connection(str(source.home / "memory.db"))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            audit.fts_integrity(conn)  # raises IntegrityError on damage
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()
    result = source.replay_into(tmp_path / "rebuilt")
    conn = apsw.Connection(result["target"])
    try:
        audit.fts_integrity(conn)
    finally:
        conn.close()


def test_fts_integrity_catches_a_desynchronised_index(tmp_path: Path) -> None:
    """The check the tests above rely on does detect a damaged index."""
    with MemorySystem.open(tmp_path / "h") as memory:
        memory.append_message(agent_id="a", owner_id="o", conversation="c:1", role="user", content="hello")
        memory.write_memory({"op": "add", "category": "goal", "key": "k", "value": "v"}, agent_id="a", owner_id="o",
                            trust="operator")
        path = memory.home / "memory.db"
    conn = apsw.Connection(str(path))
    try:
        audit.fts_integrity(conn)
        conn.execute("DROP TRIGGER memories_fts_update")
        conn.execute("UPDATE memories SET value = 'changed behind the index'")
        with pytest.raises(IntegrityError):
            audit.fts_integrity(conn)
    finally:
        conn.close()


def schema_of(path: Path | str) -> list[tuple[str, str, str]]:
    conn = apsw.Connection(str(path))
    try:
        return [(str(t), str(n), str(s)) for t, n, s in conn.execute(
            "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY type, name")]
    finally:
        conn.close()


def test_the_rebuilt_database_has_every_trigger_and_index_of_a_new_one(source: MemorySystem, tmp_path: Path) -> None:
    """The rebuild drops the full-text triggers and plain indexes while it loads; they all come back."""
    with MemorySystem.open(tmp_path / "fresh"):
        pass
    result = source.replay_into(tmp_path / "rebuilt")
    expected = schema_of(tmp_path / "fresh" / "memory.db")
    assert any(kind == "trigger" and name == "messages_fts_delete" for kind, name, _ in expected)
    assert any(kind == "index" and name == "messages_by_conversation" for kind, name, _ in expected)
    assert schema_of(result["target"]) == expected
    # ...and they work: what is written after the replay is found, updates reach the index.
    with MemorySystem.open(tmp_path / "rebuilt") as rebuilt:
        new_id = rebuilt.append_message(agent_id="ada", owner_id="alice", conversation=CONVERSATIONS[0],
                                        role="user", content="zanzibar marmalade after the replay")
        hits = rebuilt.recall("zanzibar", agent_id="ada", owner_id="alice", conversation=CONVERSATIONS[0],
                              source="history")
        assert [h.message.id for h in hits.messages] == [new_id]
        [added] = rebuilt.write_memory({"op": "add", "category": "interest", "key": "hobby_reading",
                                        "value": "Reads about quokkas"}, agent_id="ada", owner_id="alice",
                            trust="operator")
        assert added.memory_id is not None
        rebuilt.write_memory({"op": "replace", "id": added.memory_id, "value": "Reads about wombats"},
                             agent_id="ada", owner_id="alice", trust="operator")
        assert rebuilt.recall("quokkas", agent_id="ada", owner_id="alice", scope="all").memories == []
        assert [h.memory.id for h in rebuilt.recall("wombats", agent_id="ada", owner_id="alice",
                                                     scope="all").memories] == [added.memory_id]
        assert rebuilt.verify().ok


def test_a_replay_that_fails_leaves_no_half_built_copy(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "h") as memory:
        for i in range(20):
            memory.append_message(agent_id="a", owner_id="o", conversation="c:1", role="user", content=f"m{i}")
        path = memory.home / "memory.db"
    conn = apsw.Connection(str(path))
    conn.execute("DROP TRIGGER events_append_only_update")
    conn.execute("DROP TRIGGER events_redact_only")
    conn.execute("UPDATE events SET payload = '{not json' WHERE position = 7")
    conn.close()
    with MemorySystem.open(tmp_path / "h") as memory:
        with pytest.raises((IntegrityError, ValueError)):
            memory.replay_into(tmp_path / "copy")
        assert memory.head().position == 20  # the source is as it was
    assert list((tmp_path / "copy").iterdir()) == []


def test_deferred_indexing_refuses_a_database_that_has_events(source: MemorySystem) -> None:
    conn = apsw.Connection(str(source.home / "memory.db"))
    try:
        with pytest.raises(ValueError, match="empty"), deferred_indexing(conn):
            pass
        assert any(name == "messages_fts_delete" for _, name, _ in schema_of(source.home / "memory.db"))
    finally:
        conn.close()


def test_an_exported_and_imported_copy_equals_the_replay(source: MemorySystem, tmp_path: Path) -> None:
    """Moving a home (ADR-0030) on the same varied log: import rebuilds the very tables replay
    does, and the copy exports to the same bytes."""
    exported = "".join(source.export_events())
    with MemorySystem.open(tmp_path / "copy") as copy:
        assert copy.memories() == [] and copy.history(AGENTS[0], CONVERSATIONS[0]) == []  # read before: cached
        report = copy.import_events(lambda: exported.split("\n")[:-1])  # on newlines only
        assert report.appended == report.events == source.head().position
        assert copy.head() == source.head()
        assert "".join(copy.export_events()) == exported
        assert copy.memories() == source.memories()  # the open memory's reads follow the import
        for agent in AGENTS:
            for conv in CONVERSATIONS:
                assert copy.history(agent, conv) == source.history(agent, conv)
        checked = copy.verify()
    assert checked.ok, checked.problem
    assert checked.table_checksums == source_checksums(source)
