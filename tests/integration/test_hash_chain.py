"""The hash-chained event log (R-LOG, R-REPLAY): verification, tamper detection, append-only
triggers and redaction, on both stores: the home's SQLite file, and a PostgreSQL database (its
default of several chains, ADR-0031). Tampering is done by hand, through a raw connection
(``tests/integration/raw_store.py``), as an attacker or an administrator would."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.audit_chain import VerifyReport
from fermix_memory.adapters.sql.codec import decode_payload
from fermix_memory.adapters.sql.projections import project
from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from fermix_memory.application.settings_storage import DEFAULT_CHAINS
from fermix_memory.application.streams import chain_for, owner_stream
from fermix_memory.domain.erasure import OwnerContentFinder
from fermix_memory.domain.log_chain import GENESIS_HASH, chain_hash, payload_digest
from tests.integration.held_store import memory_on_held_store
from tests.integration.raw_store import DELETE_TRIGGER, PostgresRaw, RawConnection, SqliteRaw
from tests.postgres_server import TEMPLATE, PostgresServer

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


@attrs.frozen
class Home:
    """A home holding the built history: its folder and, on PostgreSQL, its database."""

    path: Path
    url: str | None = None  # None: the home's own memory.db

    def open(self) -> MemorySystem:
        return MemorySystem.open(self.path, config=None if self.url is None else
                                 {"fermix_core": {"storage": {"url": self.url}}})

    def verify(self) -> VerifyReport:
        with self.open() as memory:
            return memory.verify()

    def raw(self) -> RawConnection:
        """A raw connection on the (closed) store, as an attacker or an admin would have."""
        return SqliteRaw(self.path / "memory.db") if self.url is None else PostgresRaw(self.url)


class Templates:
    """The history built once per store, when a test first needs it; every test tampers with a
    copy of its own: the folder copied, and on PostgreSQL the database copied by the server
    (``CREATE DATABASE ... TEMPLATE``), a few milliseconds instead of the seconds of a build."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._built: dict[str, Home] = {}
        self._server: PostgresServer | None = None
        self._database = f"chain_template_{os.getpid()}"
        self._names = itertools.count(1)

    def _build(self, home: Home) -> Home:
        with home.open() as memory:
            build_history(memory)
            report = memory.verify()
            assert report.ok, report.problem
            assert report.events >= 300
        return home

    def sqlite(self) -> Home:
        if "sqlite" not in self._built:
            home = self._build(Home(self._root / "sqlite"))
            assert not (home.path / "memory.db-wal").exists() or (home.path / "memory.db-wal").stat().st_size == 0
            self._built["sqlite"] = home
        return self._built["sqlite"]

    def postgres(self, server: PostgresServer) -> Home:
        if "postgres" not in self._built:
            self._server = server
            server.admin(f"CREATE DATABASE {self._database} TEMPLATE {TEMPLATE}")
            self._built["postgres"] = self._build(Home(self._root / "postgres", server.url(self._database)))
        return self._built["postgres"]

    def copy(self, store: str, to: Path, server: PostgresServer | None) -> Home:
        if store == "sqlite":
            return Home(Path(shutil.copytree(self.sqlite().path, to)))
        assert server is not None
        template = self.postgres(server)
        name = f"chain_{os.getpid()}_{next(self._names)}"
        # The template's memory has closed: no session holds its database, so the server can copy it.
        server.admin(f"CREATE DATABASE {name} TEMPLATE {self._database}")
        return Home(Path(shutil.copytree(template.path, to)), server.url(name))

    def drop(self) -> None:
        if self._server is not None:
            self._server.admin(f"DROP DATABASE IF EXISTS {self._database} WITH (FORCE)")


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    built = Templates(tmp_path_factory.mktemp("chain"))
    yield built
    built.drop()


@pytest.fixture(params=["sqlite", "postgres"])
def home(request: pytest.FixtureRequest, templates: Templates, tmp_path: Path) -> Iterator[Home]:
    """This test's copy of the history, on each store in turn (``@pytest.mark.sqlite_only("why")``:
    on SQLite only)."""
    server = None
    if request.param == "postgres":
        marker = request.node.get_closest_marker("sqlite_only")
        if marker is not None:
            pytest.skip(f"SQLite only: {marker.args[0]}")
        server = request.getfixturevalue("postgres_server")
    copied = templates.copy(request.param, tmp_path / "home", server)
    yield copied
    if server is not None and copied.url is not None:
        server.drop_database(copied.url)


@pytest.fixture
def raw(home: Home) -> Iterator[RawConnection]:
    conn = home.raw()
    yield conn
    conn.close()


def verify(home: Home) -> VerifyReport:
    return home.verify()


def kind_at(conn: RawConnection, position: int) -> str:
    return str(conn.execute("SELECT kind FROM events WHERE position = ?", (position,))[0][0])


def chain_count(conn: RawConnection) -> int:
    """How many chains the log has (SQLite's one chain keeps no ``chain_heads`` rows)."""
    return max(1, int(conn.execute("SELECT count(*) FROM chain_heads")[0][0]))


def test_a_clean_log_verifies_and_every_row_links(home: Home, raw: RawConnection) -> None:
    report = verify(home)
    assert report.ok and report.first_bad_position is None and report.problem == ""
    assert report.redacted == 0
    rows = raw.execute(
        "SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash, hash"
        " FROM events ORDER BY position")
    assert report.events == len(rows)
    kinds = {r[3] for r in rows}
    assert {"message.appended", "memory.added", "memory.replaced", "memory.archived", "memory.restored",
            "memory.operation_refused", "conversation.window_cleared"} <= kinds
    # SQLite keeps its one chain; PostgreSQL has several, and each event links to the last event of
    # its own chain (its stream's), not to the event before it in the log.
    chains = chain_count(raw)
    assert chains == (1 if raw.store == "sqlite" else DEFAULT_CHAINS)
    heads = [(0, GENESIS_HASH)] * chains
    for n, (position, stream, version, kind, schema, at, payload, digest, prev_hash, row_hash) in enumerate(rows, 1):
        assert position == n  # one writer built it: no gaps, on either store
        assert payload_digest(payload) == digest
        chain = chain_for(stream, chains)
        assert prev_hash == heads[chain][1]
        assert chain_hash(prev_hash, position, stream, version, kind, schema, at, digest) == row_hash
        heads[chain] = (position, row_hash)
    if chains == 1:
        assert heads == [(rows[-1][0], rows[-1][-1])]
    else:
        assert sum(head != (0, GENESIS_HASH) for head in heads) > 1  # the history spans several chains
        assert raw.execute("SELECT position, hash FROM chain_heads ORDER BY chain") == heads


def test_one_changed_payload_byte_names_its_position(home: Home, raw: RawConnection) -> None:
    raw.drop_update_triggers()
    payload = raw.execute("SELECT payload FROM events WHERE position = ?", (TAMPER_AT,))[0][0]
    # Change exactly one character inside a value (keeps the JSON valid, so only the digest tells).
    index = payload.index('"at":"') + len('"at":"') + 3
    original = payload[index]
    forged = payload[:index] + ("1" if original != "1" else "2") + payload[index + 1:]
    assert len(forged) == len(payload) and sum(a != b for a, b in zip(forged, payload, strict=True)) == 1
    raw.execute("UPDATE events SET payload = ? WHERE position = ?", (forged, TAMPER_AT))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok
    assert report.first_bad_position == TAMPER_AT
    assert f"event {TAMPER_AT}" in report.problem
    assert kind_at(raw, TAMPER_AT) in report.problem


def test_a_payload_and_its_digest_changed_together_break_the_row_hash(home: Home, raw: RawConnection) -> None:
    raw.drop_update_triggers()
    payload = raw.execute("SELECT payload FROM events WHERE position = ?", (TAMPER_AT,))[0][0]
    forged = payload.replace("message", "massage", 1) if "message" in payload else payload + " "
    raw.execute("UPDATE events SET payload = ?, payload_sha256 = ? WHERE position = ?",
                (forged, payload_digest(forged), TAMPER_AT))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and report.first_bad_position == TAMPER_AT
    assert str(TAMPER_AT) in report.problem


def test_a_changed_hash_column_names_its_position(home: Home, raw: RawConnection) -> None:
    raw.drop_update_triggers()
    position = 123
    row_hash = raw.execute("SELECT hash FROM events WHERE position = ?", (position,))[0][0]
    raw.execute("UPDATE events SET hash = ? WHERE position = ?",
                (("0" if row_hash[0] != "0" else "1") + row_hash[1:], position))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and report.first_bad_position == position
    assert f"event {position}" in report.problem


def test_a_changed_prev_hash_names_its_position(home: Home, raw: RawConnection) -> None:
    raw.drop_update_triggers()
    position = 200
    raw.execute("UPDATE events SET prev_hash = ? WHERE position = ?", ("f" * 64, position))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and report.first_bad_position == position
    assert f"event {position}" in report.problem


def test_a_changed_kind_or_time_breaks_the_chain(home: Home, raw: RawConnection) -> None:
    raw.drop_update_triggers()
    raw.execute("UPDATE events SET recorded_at = '2001-01-01T00:00:00+00:00' WHERE position = 90")
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and report.first_bad_position == 90


def test_a_deleted_row_is_named(home: Home, raw: RawConnection) -> None:
    position = 150
    chains = chain_count(raw)
    streams = dict(raw.execute("SELECT position, stream FROM events"))
    same_chain = [p for p in sorted(streams) if chain_for(streams[p], chains) == chain_for(streams[position], chains)]
    at = same_chain.index(position)
    assert 0 < at < len(same_chain) - 1  # its chain goes on past it, from an event before it
    before, after = same_chain[at - 1], same_chain[at + 1]
    raw.drop_trigger(DELETE_TRIGGER)
    raw.execute("DELETE FROM events WHERE position = ?", (position,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok
    if chains == 1:
        # The gap is found where the deleted event should have been.
        assert report.first_bad_position in (position, position + 1)
        assert str(position) in report.problem
    else:
        # Several chains take positions side by side, so a log may hold gaps (a write rolled back
        # after taking its position): the deletion shows where the next event of its chain no
        # longer links to the event before it.
        assert report.first_bad_position == after
        assert f"event {after} " in report.problem and f"does not link to event {before} " in report.problem


def test_an_edited_memory_row_is_named_without_touching_the_log(home: Home, raw: RawConnection) -> None:
    memory_id = raw.execute("SELECT id FROM memories ORDER BY id LIMIT 1")[0][0]
    raw.execute("UPDATE memories SET value = 'forged fact' WHERE id = ?", (memory_id,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok
    assert report.first_bad_position is None  # the log itself is sound
    assert "memories" in report.problem


def test_an_edited_message_row_is_named(home: Home, raw: RawConnection) -> None:
    message_id = raw.execute("SELECT id FROM messages ORDER BY id LIMIT 1 OFFSET 9")[0][0]
    raw.execute("UPDATE messages SET content = 'never said this' WHERE id = ?", (message_id,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and "messages" in report.problem


def test_an_inserted_projection_row_is_named(home: Home, raw: RawConnection) -> None:
    raw.execute(
        "INSERT INTO memories(id, agent_id, owner_id, scope_type, scope_id, category, key, value,"
        " created_at, updated_at) VALUES (100000, ?, 'alice', 'owner', 'alice', 'identity', 'name',"
        " 'Mallory', '2020-01-01T00:00:00+00:00', '2020-01-01T00:00:00+00:00')", (AGENT,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and "memories" in report.problem


def test_an_edited_window_state_is_named(home: Home, raw: RawConnection) -> None:
    raw.execute("UPDATE conversation_state SET window_start_id = 0")
    assert raw.changes() > 0
    report = verify(home)
    assert not report.ok and "conversation_state" in report.problem


@pytest.mark.sqlite_only("FTS5's index is a table of its own, kept in step by triggers; PostgreSQL's"
                         " search vectors are generated columns, which no statement can set apart")
def test_a_damaged_full_text_index_is_reported(home: Home, raw: RawConnection) -> None:
    # Bypass the sync trigger: the FTS index no longer matches its content table.
    raw.drop_trigger("messages_fts_update", "messages")
    message_id = raw.execute("SELECT id FROM messages ORDER BY id LIMIT 1 OFFSET 2")[0][0]
    raw.execute("UPDATE messages SET content = 'silently changed' WHERE id = ?", (message_id,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok
    assert "messages" in report.problem


@pytest.mark.sqlite_only("SQLite's triggers; the server's are test_postgres_store.py's"
                         " test_the_server_refuses_changing_or_deleting_events_but_allows_a_redaction")
def test_the_triggers_refuse_update_and_delete_of_events(home: Home, raw: RawConnection) -> None:
    before = raw.execute("SELECT * FROM events ORDER BY position")
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
    assert raw.execute("SELECT * FROM events ORDER BY position") == before
    assert verify(home).ok


@pytest.mark.sqlite_only("another connection on the file of an open store; the server's triggers are the"
                         " same for every session")
def test_the_triggers_also_hold_for_the_open_store(home: Home) -> None:
    with home.open() as memory:
        conn = apsw.Connection(str(memory.home / "memory.db"))  # another connection, while it is open
        with pytest.raises(apsw.ConstraintError):
            conn.execute("DELETE FROM events WHERE position = 1")
        assert memory.verify().ok


def first_message_position(raw: RawConnection, offset: int = 20) -> int:
    return int(raw.execute("SELECT position FROM events WHERE kind = 'message.appended' ORDER BY position"
                           " LIMIT 1 OFFSET ?", (offset,))[0][0])


def test_tamper_a_null_payload_with_its_row_deleted_is_named_not_passed_as_a_redaction(
        home: Home, raw: RawConnection) -> None:
    position = first_message_position(raw)
    digest = raw.execute("SELECT payload_sha256 FROM events WHERE position = ?", (position,))[0][0]
    # What an erasure does (the one update the triggers allow, and the row scrubbed) but with no
    # recorded erasure naming it: tampering, however tidy.
    raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    raw.execute("DELETE FROM messages WHERE id = ?", (position,))
    assert raw.changes() == 1
    assert raw.execute("SELECT payload, payload_sha256 FROM events WHERE position = ?",
                       (position,)) == [(None, digest)]
    report = verify(home)
    assert not report.ok and report.redacted == 1
    assert report.first_bad_position == position
    assert f"event {position} (message.appended)" in report.problem and "no recorded erasure" in report.problem


def test_a_redaction_that_leaves_the_row_behind_is_reported(home: Home, raw: RawConnection) -> None:
    position = first_message_position(raw)
    raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    report = verify(home)
    assert not report.ok and report.first_bad_position == position and report.redacted == 1


def test_tampering_after_a_redaction_is_still_named(home: Home, raw: RawConnection) -> None:
    position = first_message_position(raw)
    raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    raw.drop_update_triggers()
    raw.execute("UPDATE events SET payload = replace(payload, 'message', 'massage') WHERE position = ?",
                (position + 1,))
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and report.first_bad_position == position + 1


def test_a_forged_memory_row_is_named_even_after_an_erasure(home: Home, raw: RawConnection) -> None:
    with home.open() as memory:
        memory.forget_owner("bob")
        assert memory.verify().ok
    raw.execute("UPDATE memories SET value = 'forged fact' WHERE id = (SELECT min(id) FROM memories)")
    assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and report.redacted > 0
    assert "memories" in report.problem


def test_tamper_a_whole_memory_row_redacted_by_hand_is_named(home: Home, raw: RawConnection) -> None:
    position = raw.execute(
        "SELECT a.position FROM events a WHERE a.kind = 'memory.added' AND EXISTS (SELECT 1 FROM events r"
        " WHERE r.kind = 'memory.replaced' AND r.payload LIKE '%\"memory_id\":' || a.position || ',%')"
        " ORDER BY a.position LIMIT 1"
    )[0][0]
    # Every event about the row redacted and the row scrubbed, in one transaction, by hand.
    with raw.transaction():
        raw.execute("UPDATE events SET payload = NULL WHERE position = ? OR (kind LIKE 'memory.%' AND payload LIKE"
                    " '%\"memory_id\":' || ? || ',%')", (position, position))
        assert raw.changes() >= 2
        raw.execute("DELETE FROM memories WHERE id = ?", (position,))
        assert raw.changes() == 1
    report = verify(home)
    assert not report.ok and report.redacted >= 2 and report.first_bad_position == position


def test_an_erasure_record_naming_a_payload_that_is_back_is_reported(home: Home, raw: RawConnection) -> None:
    payloads = dict(raw.execute("SELECT position, payload FROM events"))
    with home.open() as memory:
        assert memory.forget_owner("bob").erased_events["chain-agent"] > 0
    [(erasure,)] = raw.execute("SELECT position FROM events WHERE kind = 'owner.forgotten'")
    named = raw.execute("SELECT min(position) FROM events WHERE payload IS NULL")[0][0]
    # Someone kept a copy and puts the original payload back: the chain cannot tell, the record can.
    raw.drop_update_triggers()
    raw.execute("UPDATE events SET payload = ? WHERE position = ?", (payloads[named], named))
    assert raw.changes() == 1
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


@pytest.mark.sqlite_only("schema-1 erasure records were only ever written to memory.db, before"
                         " PostgreSQL was a store")
def test_an_old_erasure_record_accounts_for_its_redactions_by_count(home: Home, tmp_path: Path) -> None:
    with memory_on_held_store(home.path) as (memory, store):
        erasure = SqliteErasure(store)
        count = erasure.erase(lambda tx, erasing: append_schema_1_erasure(tx, erasing, AGENT, "bob"))
        assert count > 0
        [record] = [r.event for r in memory.events() if r.event.kind == "owner.forgotten"]
        assert record.redacted_positions is None and record.erased_events == count  # upcast from schema 1
        report = memory.verify()
        assert report.ok, report.problem
        assert report.redacted == count
        assert memory.replay_into(tmp_path / "replayed")["identical"]
    raw = home.raw()
    try:
        # One NULL payload more than the old record accounts for is still tampering.
        position = raw.execute("SELECT min(position) FROM events WHERE kind = 'message.appended'"
                               " AND payload IS NOT NULL")[0][0]
        raw.execute("UPDATE events SET payload = NULL WHERE position = ?", (position,))
    finally:
        raw.close()
    assert not verify(home).ok
