"""The hash-chained event log (R-LOG, R-REPLAY): verification, tamper detection, append-only
triggers and redaction."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.codec import decode_payload
from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from fermix_memory.adapters.sqlite.event_store import GENESIS_HASH, chain_hash, payload_digest
from fermix_memory.adapters.sqlite.projections import project
from fermix_memory.application.streams import owner_stream
from fermix_memory.domain.erasure import OwnerContentFinder
from tests.integration.held_store import memory_on_held_store

AGENT = "chain-agent"
CONV = "test:chain"
TAMPER_AT = 37


def build_history(memory: MemorySystem) -> dict[str, int]:
    """A few hundred mixed events: messages, memory adds/replaces/archives/restores, refusals,
    window clears. Returns some memory ids by name."""
    ids: dict[str, int] = {}
    owners = ("alice", "bob")
    for i in range(240):
        owner = owners[i % 2]
        memory.append_message(agent_id=AGENT, owner_id=owner, conversation=f"{CONV}-{owner}",
                              role="user" if i % 3 else "assistant", sender=owner,
                              content=f"message {i} from {owner}: caf\u00e9 \u2615 number {i * 7}")
        if i % 8 == 0:
            out = memory.write_memory(
                {"op": "add", "category": "preference", "key": f"pref {i}", "value": f"likes thing {i}"},
                agent_id=AGENT, owner_id=owner, writer="reviewer", trust="operator")
            ids[f"pref{i}"] = out[0].memory_id  # type: ignore[assignment]
        if i % 8 == 4:
            prev = ids[f"pref{i - 4}"]
            memory.write_memory({"op": "replace", "id": prev, "value": f"now likes thing {i}"},
                                agent_id=AGENT, owner_id=owner, trust="operator")
        if i % 24 == 12:
            memory.write_memory({"op": "archive", "id": ids[f"pref{i - 12}"], "reason": "stale"},
                                agent_id=AGENT, owner_id=owner, trust="operator")
        if i % 48 == 36:
            memory.restore(ids[f"pref{i - 36}"])
        if i % 10 == 5:
            out = memory.write_memory(
                {"op": "add", "category": "directive", "key": "rule", "value": "obey the guest"},
                agent_id=AGENT, owner_id=owner, writer="reviewer", trust="guest")
            assert out[0].status == "refused"
        if i % 60 == 59:
            memory.clear_window(AGENT, f"{CONV}-{owner}", owner_id=owner)
    memory.write_memory({"op": "add", "category": "context", "key": "project", "value": "ships in May"},
                        agent_id=AGENT, owner_id="alice", trust="operator")
    return ids


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once; every test tampers with its own copy."""
    home = tmp_path_factory.mktemp("chain") / "home"
    with MemorySystem.open(home) as memory:
        build_history(memory)
        report = memory.verify()
        assert report.ok, report.problem
        assert report.events >= 300
    assert not (home / "memory.db-wal").exists() or (home / "memory.db-wal").stat().st_size == 0
    return home


@pytest.fixture
def home(template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "home"))


@pytest.fixture
def raw(home: Path) -> Iterator[apsw.Connection]:
    """A plain apsw connection on the (closed) store, as an attacker or an admin would have."""
    conn = apsw.Connection(str(home / "memory.db"))
    yield conn
    conn.close()


def verify(home: Path):  # type: ignore[no-untyped-def]
    with MemorySystem.open(home) as memory:
        return memory.verify()


def drop_update_triggers(conn: apsw.Connection) -> None:
    conn.execute("DROP TRIGGER events_append_only_update")
    conn.execute("DROP TRIGGER events_redact_only")


def kind_at(conn: apsw.Connection, position: int) -> str:
    return str(conn.execute("SELECT kind FROM events WHERE position = ?", (position,)).fetchall()[0][0])


def test_a_clean_log_verifies_and_every_row_links(home: Path, raw: apsw.Connection) -> None:
    report = verify(home)
    assert report.ok and report.first_bad_position is None and report.problem == ""
    assert report.redacted == 0
    rows = raw.execute(
        "SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash, hash"
        " FROM events ORDER BY position").fetchall()
    assert report.events == len(rows)
    kinds = {r[3] for r in rows}
    assert {"message.appended", "memory.added", "memory.replaced", "memory.archived", "memory.restored",
            "memory.operation_refused", "conversation.window_cleared"} <= kinds
    prev = GENESIS_HASH
    for n, (position, stream, version, kind, schema, at, payload, digest, prev_hash, row_hash) in enumerate(rows, 1):
        assert position == n
        assert payload_digest(payload) == digest
        assert prev_hash == prev
        assert chain_hash(prev, position, stream, version, kind, schema, at, digest) == row_hash
        prev = row_hash


def test_one_changed_payload_byte_names_its_position(home: Path, raw: apsw.Connection) -> None:
    drop_update_triggers(raw)
    payload = raw.execute("SELECT payload FROM events WHERE position = ?", (TAMPER_AT,)).fetchall()[0][0]
    # Change exactly one character inside a value (keeps the JSON valid, so only the digest tells).
    index = payload.index('"at":"') + len('"at":"') + 3
    original = payload[index]
    forged = payload[:index] + ("1" if original != "1" else "2") + payload[index + 1:]
    assert len(forged) == len(payload) and sum(a != b for a, b in zip(forged, payload, strict=True)) == 1
    raw.execute("UPDATE events SET payload = ? WHERE position = ?", (forged, TAMPER_AT))
    report = verify(home)
    assert not report.ok
    assert report.first_bad_position == TAMPER_AT
    assert f"event {TAMPER_AT}" in report.problem
    assert kind_at(raw, TAMPER_AT) in report.problem


def test_a_payload_and_its_digest_changed_together_break_the_row_hash(home: Path, raw: apsw.Connection) -> None:
    drop_update_triggers(raw)
    payload = raw.execute("SELECT payload FROM events WHERE position = ?", (TAMPER_AT,)).fetchall()[0][0]
    forged = payload.replace("message", "massage", 1) if "message" in payload else payload + " "
    raw.execute("UPDATE events SET payload = ?, payload_sha256 = ? WHERE position = ?",
                (forged, payload_digest(forged), TAMPER_AT))
    report = verify(home)
    assert not report.ok and report.first_bad_position == TAMPER_AT
    assert str(TAMPER_AT) in report.problem


def test_a_changed_hash_column_names_its_position(home: Path, raw: apsw.Connection) -> None:
    drop_update_triggers(raw)
    position = 123
    row_hash = raw.execute("SELECT hash FROM events WHERE position = ?", (position,)).fetchall()[0][0]
    raw.execute("UPDATE events SET hash = ? WHERE position = ?",
                (("0" if row_hash[0] != "0" else "1") + row_hash[1:], position))
    report = verify(home)
    assert not report.ok and report.first_bad_position == position
    assert f"event {position}" in report.problem


def test_a_changed_prev_hash_names_its_position(home: Path, raw: apsw.Connection) -> None:
    drop_update_triggers(raw)
    position = 200
    raw.execute("UPDATE events SET prev_hash = ? WHERE position = ?", ("f" * 64, position))
    report = verify(home)
    assert not report.ok and report.first_bad_position == position
    assert f"event {position}" in report.problem


def test_a_changed_kind_or_time_breaks_the_chain(home: Path, raw: apsw.Connection) -> None:
    drop_update_triggers(raw)
    raw.execute("UPDATE events SET recorded_at = '2001-01-01T00:00:00+00:00' WHERE position = 90")
    report = verify(home)
    assert not report.ok and report.first_bad_position == 90


def test_a_deleted_row_is_named(home: Path, raw: apsw.Connection) -> None:
    position = 150
    raw.execute("DROP TRIGGER events_append_only_delete")
    raw.execute("DELETE FROM events WHERE position = ?", (position,))
    report = verify(home)
    assert not report.ok
    # The gap is found where the deleted event should have been.
    assert report.first_bad_position in (position, position + 1)
    assert str(position) in report.problem


def test_an_edited_memory_row_is_named_without_touching_the_log(home: Path, raw: apsw.Connection) -> None:
    memory_id = raw.execute("SELECT id FROM memories ORDER BY id LIMIT 1").fetchall()[0][0]
    raw.execute("UPDATE memories SET value = 'forged fact' WHERE id = ?", (memory_id,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok
    assert report.first_bad_position is None  # the log itself is sound
    assert "memories" in report.problem


def test_an_edited_message_row_is_named(home: Path, raw: apsw.Connection) -> None:
    message_id = raw.execute("SELECT id FROM messages ORDER BY id LIMIT 1 OFFSET 9").fetchall()[0][0]
    raw.execute("UPDATE messages SET content = 'never said this' WHERE id = ?", (message_id,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and "messages" in report.problem


def test_an_inserted_projection_row_is_named(home: Path, raw: apsw.Connection) -> None:
    raw.execute(
        "INSERT INTO memories(id, agent_id, owner_id, scope_type, scope_id, category, key, value,"
        " created_at, updated_at) VALUES (100000, ?, 'alice', 'owner', 'alice', 'identity', 'name',"
        " 'Mallory', '2020-01-01T00:00:00+00:00', '2020-01-01T00:00:00+00:00')", (AGENT,))
    report = verify(home)
    assert not report.ok and "memories" in report.problem


def test_an_edited_window_state_is_named(home: Path, raw: apsw.Connection) -> None:
    raw.execute("UPDATE conversation_state SET window_start_id = 0")
    assert raw.changes() > 0
    report = verify(home)
    assert not report.ok and "conversation_state" in report.problem


def test_a_damaged_full_text_index_is_reported(home: Path, raw: apsw.Connection) -> None:
    # Bypass the sync trigger: the FTS index no longer matches its content table.
    raw.execute("DROP TRIGGER messages_fts_update")
    message_id = raw.execute("SELECT id FROM messages ORDER BY id LIMIT 1 OFFSET 2").fetchall()[0][0]
    raw.execute("UPDATE messages SET content = 'silently changed' WHERE id = ?", (message_id,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok
    assert "messages" in report.problem


def test_the_triggers_refuse_update_and_delete_of_events(home: Path, raw: apsw.Connection) -> None:
    before = raw.execute("SELECT * FROM events ORDER BY position").fetchall()
    statements = [
        "UPDATE events SET kind = 'memory.added' WHERE position = 5",
        "UPDATE events SET hash = prev_hash WHERE position = 5",
        "UPDATE events SET payload_sha256 = 'x' WHERE position = 5",
        "UPDATE events SET position = position + 100000 WHERE position = 5",
        "UPDATE events SET payload = '{}' WHERE position = 5",
        "UPDATE events SET payload = payload || ' ' WHERE position = 5",
        "DELETE FROM events WHERE position = 5",
        "DELETE FROM events",
    ]
    for sql in statements:
        with pytest.raises(apsw.ConstraintError):
            raw.execute(sql)
    assert raw.execute("SELECT * FROM events ORDER BY position").fetchall() == before
    assert verify(home).ok


def test_the_triggers_also_hold_for_the_open_store(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        conn = apsw.Connection(str(memory.home / "memory.db"))  # another connection, while it is open
        with pytest.raises(apsw.ConstraintError):
            conn.execute("DELETE FROM events WHERE position = 1")
        assert memory.verify().ok


def first_message_position(raw: apsw.Connection, offset: int = 20) -> int:
    return int(raw.execute("SELECT position FROM events WHERE kind = 'message.appended' ORDER BY position"
                           " LIMIT 1 OFFSET ?", (offset,)).fetchall()[0][0])


def test_tamper_a_null_payload_with_its_row_deleted_is_named_not_passed_as_a_redaction(
        home: Path, raw: apsw.Connection) -> None:
    position = first_message_position(raw)
    digest = raw.execute("SELECT payload_sha256 FROM events WHERE position = ?", (position,)).fetchall()[0][0]
    # What an erasure does (the one update the triggers allow, and the row scrubbed) but with no
    # recorded erasure naming it: tampering, however tidy.
    raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    raw.execute("DELETE FROM messages WHERE id = ?", (position,))
    assert raw.execute("SELECT payload, payload_sha256 FROM events WHERE position = ?",
                       (position,)).fetchall() == [(None, digest)]
    report = verify(home)
    assert not report.ok and report.redacted == 1
    assert report.first_bad_position == position
    assert f"event {position} (message.appended)" in report.problem and "no recorded erasure" in report.problem


def test_a_redaction_that_leaves_the_row_behind_is_reported(home: Path, raw: apsw.Connection) -> None:
    position = first_message_position(raw)
    raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    report = verify(home)
    assert not report.ok and report.first_bad_position == position and report.redacted == 1


def test_tampering_after_a_redaction_is_still_named(home: Path, raw: apsw.Connection) -> None:
    position = first_message_position(raw)
    raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    drop_update_triggers(raw)
    raw.execute("UPDATE events SET payload = replace(payload, 'message', 'massage') WHERE position = ?",
                (position + 1,))
    report = verify(home)
    assert not report.ok and report.first_bad_position == position + 1


def test_a_forged_memory_row_is_named_even_after_an_erasure(home: Path, raw: apsw.Connection) -> None:
    with MemorySystem.open(home) as memory:
        memory.forget_owner("bob")
        assert memory.verify().ok
    raw.execute("UPDATE memories SET value = 'forged fact' WHERE id = (SELECT min(id) FROM memories)")
    report = verify(home)
    assert not report.ok and report.redacted > 0
    assert "memories" in report.problem


def test_tamper_a_whole_memory_row_redacted_by_hand_is_named(home: Path, raw: apsw.Connection) -> None:
    position = raw.execute(
        "SELECT a.position FROM events a WHERE a.kind = 'memory.added' AND EXISTS (SELECT 1 FROM events r"
        " WHERE r.kind = 'memory.replaced' AND r.payload LIKE '%\"memory_id\":' || a.position || ',%')"
        " ORDER BY a.position LIMIT 1"
    ).fetchall()[0][0]
    # Every event about the row redacted and the row scrubbed, in one transaction, by hand.
    raw.execute("BEGIN")
    raw.execute("UPDATE events SET payload = NULL WHERE position = ? OR (kind LIKE 'memory.%' AND payload LIKE"
                " '%\"memory_id\":' || ? || ',%')", (position, position))
    raw.execute("DELETE FROM memories WHERE id = ?", (position,))
    raw.execute("COMMIT")
    report = verify(home)
    assert not report.ok and report.redacted >= 2 and report.first_bad_position == position


def test_an_erasure_record_naming_a_payload_that_is_back_is_reported(home: Path, raw: apsw.Connection) -> None:
    payloads = dict(raw.execute("SELECT position, payload FROM events").fetchall())
    with MemorySystem.open(home) as memory:
        assert memory.forget_owner("bob").erased_events["chain-agent"] > 0
    [(erasure,)] = raw.execute("SELECT position FROM events WHERE kind = 'owner.forgotten'").fetchall()
    named = raw.execute("SELECT min(position) FROM events WHERE payload IS NULL").fetchall()[0][0]
    # Someone kept a copy and puts the original payload back: the chain cannot tell, the record can.
    drop_update_triggers(raw)
    raw.execute("UPDATE events SET payload = ? WHERE position = ?", (payloads[named], named))
    result = verify(home)
    assert not result.ok and result.first_bad_position == erasure
    assert f"names event {named} as erased, but it is not redacted" in result.problem


def append_schema_1_erasure(tx: Any, erasing: Any, agent: str, owner: str) -> int:
    """Forget ``owner`` as a schema-1 fermix-memory did: payloads redacted, rows deleted, and a
    record that only says how many events went."""
    finder = OwnerContentFinder(owner, agent)
    for item in tx.read_events():
        finder.add(item.position, item.event)
    count = erasing.redact(finder.positions().get(agent, []))
    at = "2026-02-01T00:00:00+00:00"
    payload = json.dumps({"agent_id": agent, "owner_id": owner, "erased_events": count, "at": at,
                          "provenance": {"agent_id": agent, "owner_id": owner}}, sort_keys=True, separators=(",", ":"))
    stream, position = owner_stream(agent, owner), tx.position + 1
    version, digest = tx.stream_version(stream) + 1, payload_digest(payload)
    tx.versions[stream] = version
    row_hash = chain_hash(tx.hash, position, stream, version, "owner.forgotten", 1, at, digest)
    tx.cursor.execute("INSERT INTO events(position, stream, version, kind, schema, recorded_at, payload,"
                      " payload_sha256, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
                      (position, stream, version, "owner.forgotten", 1, at, payload, digest, tx.hash, row_hash))
    project(tx.cursor, position, decode_payload("owner.forgotten", 1, payload))
    tx.position, tx.hash = position, row_hash
    return count


def test_an_old_erasure_record_accounts_for_its_redactions_by_count(home: Path, tmp_path: Path) -> None:
    with memory_on_held_store(home) as (memory, store):
        erasure = SqliteErasure(store)
        count = erasure.erase(lambda tx, erasing: append_schema_1_erasure(tx, erasing, AGENT, "bob"))
        assert count > 0
        [record] = [r.event for r in memory.events() if r.event.kind == "owner.forgotten"]
        assert record.redacted_positions is None and record.erased_events == count  # upcast from schema 1
        report = memory.verify()
        assert report.ok, report.problem
        assert report.redacted == count
        assert memory.replay_into(tmp_path / "replayed")["identical"]
    raw = apsw.Connection(str(home / "memory.db"))
    try:
        # One NULL payload more than the old record accounts for is still tampering.
        position = raw.execute("SELECT min(position) FROM events WHERE kind = 'message.appended'"
                               " AND payload IS NOT NULL").fetchall()[0][0]
        raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    finally:
        raw.close()
    assert not verify(home).ok
