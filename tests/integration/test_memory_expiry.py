"""A fact stored with its own expiry (ADR-0082), on SQLite and on PostgreSQL: every way in sets it
(the Python API's write op, the ``memory_store`` tool, the CLI), reads give it back, the column
the retention run reads holds it as UTC text; it goes through an export and import, a replay and
a verify; a log written before the field existed verifies, replays and exports byte for byte as
it did; bad input is a clear error and never a stored row."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import InvalidArgument, MemorySystem
from fermix_memory.application.settings_storage import DATABASE_URL_ENV
from tests.cli_runner import run_cli
from tests.integration.homes_on_stores import Config, opened
from tests.integration.store_reads import store_reads

AGENT, OWNER = "ada", "alice"
LATER = "2099-06-01T11:30+02:00"  # stored as 2099-06-01T09:30:00+00:00
LATER_UTC = datetime(2099, 6, 1, 9, 30, tzinfo=UTC)
LATEST = datetime(2099, 12, 31, 23, 0, tzinfo=UTC)
OLD_LOG = Path(__file__).parent / "data" / "row_events_before_expiry.jsonl"
BAD = [("2099-06-01T09:30", "has no time zone"), ("2001-01-01T00:00Z", "is not after now"),
       ("in a week", "is not an ISO 8601 time"), ("99999-01-01T00:00Z", "is not an ISO 8601 time"),
       ("9999-12-31T23:00-05:00", "beyond the year 9999"), (20990601, "must be an ISO 8601 text")]





def stored_column(home: Path) -> list[tuple[int, str | None]]:
    """``memories.expires_at`` as the store holds it (what the retention run reads)."""
    with store_reads(home) as reads:
        return [(int(r[0]), r[1]) for r in reads.select("SELECT id, expires_at FROM memories ORDER BY id")]


def write(memory: MemorySystem, *ops: dict[str, Any], trust: str = "operator") -> list[Any]:
    return memory.write_memory(list(ops), agent_id=AGENT, owner_id=OWNER, trust=trust)


def expiries(memory: MemorySystem) -> dict[str, datetime | None]:
    return {m.key: m.expires_at for m in memory.memories(agent_id=AGENT, owner_id=OWNER)}


def fill(memory: MemorySystem) -> None:
    """Rows with and without an expiry, changed every way there is."""
    [trip, code, _] = write(memory, {"op": "add", "category": "goal", "key": "trip", "value": "Lisbon",
                                     "expires_at": LATER},
                            {"op": "add", "category": "context", "key": "code", "value": "4711",
                             "expires_at": LATEST},
                            {"op": "add", "category": "identity", "key": "name", "value": "Alice"})
    write(memory, {"op": "replace", "id": trip.memory_id, "value": "Porto"},  # keeps it
          {"op": "replace", "id": code.memory_id, "expires_at": "never"},
          {"op": "add", "category": "identity", "key": "name", "value": "Alice B.", "expires_at": LATER})
    write(memory, {"op": "archive", "id": trip.memory_id, "reason": "done"})
    memory.restore(trip.memory_id)


# --- every way in ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("every_store")
def test_the_write_op_sets_keeps_and_clears_it_and_the_column_holds_utc_text(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        [added] = write(memory, {"op": "add", "category": "goal", "key": "trip", "value": "Lisbon",
                                 "expires_at": LATER})
        assert added.status == "added" and memory.memory(added.memory_id).expires_at == LATER_UTC
        assert stored_column(home) == [(added.memory_id, "2099-06-01T09:30:00+00:00")]
        [kept] = write(memory, {"op": "replace", "id": added.memory_id, "value": "Porto"})
        assert kept.status == "replaced" and expiries(memory) == {"trip": LATER_UTC}
        [same] = write(memory, {"op": "add", "category": "goal", "key": "trip", "value": "Porto",
                                "expires_at": datetime(2099, 6, 1, 9, 30, tzinfo=UTC)})
        assert same.status == "unchanged"
        [moved] = write(memory, {"op": "replace", "id": added.memory_id, "expires_at": LATEST})
        assert moved.status == "replaced" and expiries(memory) == {"trip": LATEST}
        [cleared] = write(memory, {"op": "replace", "id": added.memory_id, "expires_at": "never"})
        assert cleared.status == "replaced" and expiries(memory) == {"trip": None}
        assert stored_column(home) == [(added.memory_id, None)]
        explained = memory.explain(added.memory_id)["events"]
        assert [e.get("expires_at") for e in explained] == ["2099-06-01T09:30:00+00:00",
                                                            "2099-06-01T09:30:00+00:00",
                                                            "2099-12-31T23:00:00+00:00", None]
        assert memory.verify().ok


@pytest.mark.usefixtures("every_store")
def test_the_memory_store_tool_sets_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        session = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="telegram:42")
        stored = session.dispatch_tool("memory_store", {"key": "gate code", "value": "4711", "expires_at": LATER})
        assert stored == {"ok": True, "status": "added", "id": stored["id"], "key": "gate_code",
                          "scope": "conversation", "expires_at": "2099-06-01T09:30:00+00:00"}
        again = session.dispatch_tool("memory_store", {"key": "gate code", "value": "4712"})
        assert again["status"] == "replaced" and "expires_at" not in again
        [row] = memory.memories(agent_id=AGENT, owner_id=OWNER)
        assert row.expires_at == LATER_UTC  # storing the key again without one keeps it
        recalled = session.dispatch_tool("memory_recall", {"key": "gate code"})
        assert recalled["memories"][0]["expires_at"] == "2099-06-01T09:30:00+00:00"
        off = session.dispatch_tool("memory_store", {"key": "gate code", "value": "4712", "expires_at": "never"})
        assert off["status"] == "replaced" and off["expires_at"] is None
        assert "expires_at" not in session.dispatch_tool("memory_recall", {"key": "gate code"})["memories"][0]
        for bad, says in BAD[:-1]:
            refused = session.dispatch_tool("memory_store", {"key": "pin", "value": "1", "expires_at": bad})
            assert refused["ok"] is False and says in refused["error"], refused
            assert refused["code"] == ("past_expiry" if "after now" in says else "invalid_expiry")
        wrong_type = session.dispatch_tool("memory_store", {"key": "pin", "value": "1", "expires_at": 5})
        assert wrong_type["ok"] is False and wrong_type["code"] == "invalid_type"
        assert [m.key for m in memory.memories(agent_id=AGENT, owner_id=OWNER)] == ["gate_code"]
    assert stored_column(home) == [(stored["id"], None)]


@pytest.mark.usefixtures("every_store")
def test_the_cli_sets_it_and_list_and_show_print_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    MemorySystem.open(home).close()
    base = ("memory", "set", "--agent", AGENT, "--owner", OWNER, "--category", "goal", "--key", "trip")
    added = run_cli("--json", *base, "Lisbon", "--expires-at", LATER, home=home)
    assert added.returncode == 0, added.stderr
    row = json.loads(added.stdout)["memory"]
    assert row["expires_at"] == "2099-06-01T09:30:00+00:00"
    listed = run_cli("memory", "list", "--agent", AGENT, "--owner", OWNER, home=home)
    assert "trip = Lisbon (expires 2099-06-01T09:30:00+00:00)" in listed.stdout
    shown = run_cli("memory", "show", str(row["id"]), home=home)
    assert "expires_at=2099-06-01T09:30:00+00:00" in shown.stdout
    assert run_cli(*base, "Porto", home=home).returncode == 0  # a set without it keeps it
    for bad, says in BAD[:-1]:
        refused = run_cli(*base, "Faro", "--expires-at", str(bad), home=home)
        assert refused.returncode == 1 and says in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    cleared = run_cli("--json", *base, "Porto", "--expires-at", "never", home=home)
    assert json.loads(cleared.stdout)["memory"]["expires_at"] is None
    with MemorySystem.open(home) as memory:
        assert [(m.value, m.expires_at) for m in memory.memories(agent_id=AGENT, owner_id=OWNER)] == [("Porto", None)]


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("every_store")
@pytest.mark.parametrize(("bad", "says"), BAD)
def test_a_bad_expiry_from_a_host_is_an_invalid_argument_and_writes_nothing(tmp_path: Path, bad: object,
                                                                            says: str) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        [kept] = write(memory, {"op": "add", "category": "goal", "key": "trip", "value": "Lisbon"})
        head = memory.head()
        good = {"op": "add", "category": "goal", "key": "other", "value": "x"}
        for ops in ([{"op": "add", "category": "goal", "key": "k", "value": "v", "expires_at": bad}],
                    [good, {"op": "replace", "id": kept.memory_id, "expires_at": bad}]):
            with pytest.raises(InvalidArgument, match=r"operations\[\d\]\.expires_at .*" + says.split()[-1]):
                memory.write_memory(ops, agent_id=AGENT, owner_id=OWNER)
            with pytest.raises(InvalidArgument, match=says.split()[0]):
                memory.write_memories([{"operations": [good], "agent_id": AGENT, "owner_id": "bob"},
                                       {"operations": ops, "agent_id": AGENT, "owner_id": OWNER}])
        assert memory.head() == head  # nothing recorded, not even a refusal
        assert [(m.key, m.expires_at) for m in memory.memories(agent_id=AGENT, owner_id=OWNER)] == [("trip", None)]


# --- the log ---------------------------------------------------------------------------------------


def test_export_import_replay_and_verify_keep_it(tmp_path: Path, store_of: Config) -> None:
    with opened(tmp_path, "source", store_of) as memory:
        fill(memory)
        rows = memory.memories(agent_id=AGENT, owner_id=OWNER)
        assert {m.key: m.expires_at for m in rows} == {"trip": LATER_UTC, "code": None, "name": LATER_UTC}
        lines = list(memory.export_events())
        report = memory.verify()
        assert report.ok, report.problem
        replay = memory.replay_into(tmp_path / "replayed")
        assert replay["identical"], replay["differing_tables"]
    export = tmp_path / "export.jsonl"
    export.write_text("".join(lines), encoding="utf-8")
    with opened(tmp_path, "copy", store_of) as copy:
        copy.import_events(lambda: export.open(encoding="utf-8"))
        assert copy.memories(agent_id=AGENT, owner_id=OWNER) == rows
        check = copy.verify()
        assert check.ok and check.table_checksums == report.table_checksums
        assert list(copy.export_events()) == lines


def test_a_log_from_before_the_field_verifies_replays_and_exports_unchanged(tmp_path: Path,
                                                                            store_of: Config) -> None:
    # Written by the version before this field (schema 2 of the row events): its digests and
    # chain must hold as they are, its rows have no expiry.
    old = OLD_LOG.read_text(encoding="utf-8")
    assert '"kind":"memory.added"' in old and '"expires_at"' not in old and '"schema":3' not in old
    with opened(tmp_path, "home", store_of) as memory:
        memory.import_events(lambda: OLD_LOG.open(encoding="utf-8"))
        report = memory.verify()
        assert report.ok, report.problem
        assert "".join(memory.export_events()) == old  # every line, digest and hash as written
        rows = memory.memories(agent_id=AGENT, owner_id=OWNER)
        assert len(rows) == 3 and all(m.expires_at is None for m in rows)
        replay = memory.replay_into(tmp_path / "replayed")
        assert replay["identical"], replay["differing_tables"]
        [changed] = write(memory, {"op": "replace", "id": rows[0].id, "expires_at": LATER})
        assert changed.status == "replaced" and memory.memory(rows[0].id).expires_at == LATER_UTC
        assert memory.verify().ok
        body = "".join(memory.export_events()).split("\n", 1)[1]  # after the header, which names the head
        assert body.startswith(old.split("\n", 1)[1])  # the old lines stay as they were


@pytest.mark.usefixtures("every_store")
def test_a_store_from_before_the_column_gets_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        write(memory, {"op": "add", "category": "goal", "key": "trip", "value": "Lisbon"})
    url = os.environ.get(DATABASE_URL_ENV)
    if url:  # as a database of schema 9 was
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP INDEX memories_expiring; ALTER TABLE memories DROP COLUMN expires_at;"
                         " DELETE FROM fermix_migrations WHERE version >= 10")
    else:  # as a file of schema 12 was
        import apsw

        conn = apsw.Connection(str(home / "memory.db"))
        conn.execute("DROP INDEX memories_expiring; ALTER TABLE memories DROP COLUMN expires_at;"
                     " PRAGMA user_version = 12")
        conn.close()
    with MemorySystem.open(home) as memory:
        [row] = memory.memories(agent_id=AGENT, owner_id=OWNER)
        assert row.expires_at is None
        write(memory, {"op": "replace", "id": row.id, "expires_at": LATER})
        assert memory.verify().ok
    assert stored_column(home) == [(row.id, "2099-06-01T09:30:00+00:00")]
    with store_reads(home) as reads:
        if url:
            indexes = reads.select("SELECT indexname FROM pg_indexes WHERE indexname = 'memories_expiring'")
        else:
            indexes = reads.select("SELECT name FROM sqlite_schema WHERE name = 'memories_expiring'")
    assert indexes == [("memories_expiring",)]


# --- the HTTP API and MCP --------------------------------------------------------------------------


def test_the_http_api_sets_it_and_refuses_a_bad_one(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from tests.server.conftest import ADA, OPERATOR, served

    for server in served(tmp_path / "home"):
        add = {"op": "add", "category": "goal", "key": "trip", "value": "Lisbon", "expires_at": LATER}
        answer = server.post("/v1/memories", ADA, {"owner_id": OWNER, "operations": [add]})
        assert answer.status_code == 200, answer.text
        [row] = server.get("/v1/memories", OPERATOR).json()
        assert row["expires_at"] == "2099-06-01T09:30:00+00:00"
        head = server.position()
        for bad, says in BAD:
            answer = server.post("/v1/memories", ADA, {"owner_id": OWNER, "operations": [
                {"op": "replace", "id": row["id"], "value": "Porto", "expires_at": bad}]})
            assert answer.status_code == 400 and says in answer.text, answer.text
        assert server.position() == head
        assert server.memory.memory(row["id"]).value == "Lisbon"


def test_the_mcp_memory_store_tool_sets_it(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from fermix_memory.entrypoints.mcp.server import OneSpeaker, build_server

    with MemorySystem.open(tmp_path / "home") as memory:
        session = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="mcp:stdio")

        async def store() -> tuple[Any, Any]:
            async with Client(build_server(memory, OneSpeaker(session)), cache=None) as client:
                [tool] = [t for t in (await client.list_tools()).tools if t.name == "memory_store"]
                assert "expires_at" in tool.input_schema["properties"]
                good = await client.call_tool("memory_store", {"key": "pin", "value": "4711", "expires_at": LATER})
                bad = await client.call_tool("memory_store", {"key": "pin2", "value": "1", "expires_at": "soon"})
                return good, bad

        good, bad = anyio.run(store)
        assert not good.is_error and good.structured_content["expires_at"] == "2099-06-01T09:30:00+00:00"
        assert bad.is_error and bad.structured_content["code"] == "invalid_expiry"
        assert [(m.key, m.expires_at) for m in memory.memories(agent_id=AGENT, owner_id=OWNER)] == [("pin", LATER_UTC)]
