"""Opening ``memory.db`` (R-DB): migrations, refusal of newer / foreign / corrupt files without
touching them, reopening, and where the home folder comes from."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import apsw
import pytest

from fermix_memory import DatabaseTooNew, ForeignDatabase, MemorySystem
from fermix_memory.adapters.sqlite.schema import APPLICATION_ID, SCHEMA_VERSION

AGENT = "mig-agent"

# The databases of "someone else" are made with the standard library's sqlite3, in the default
# rollback-journal mode, so that nothing of this package's connection set-up is involved.


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` and its bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def make_too_new(home: Path) -> Path:
    home.mkdir(parents=True)
    db = home / "memory.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE events(position INTEGER PRIMARY KEY, stream TEXT, payload TEXT)")
    conn.execute("INSERT INTO events VALUES (1, 's', '{}')")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    return db


def make_foreign_sqlite(home: Path) -> Path:
    home.mkdir(parents=True)
    db = home / "memory.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, amount REAL)")
    conn.executemany("INSERT INTO invoices(amount) VALUES (?)", [(i * 1.5,) for i in range(100)])
    conn.commit()
    conn.close()
    return db


# --- newer than the code ----------------------------------------------------------------------------


def test_a_database_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_too_new(home)
    with pytest.raises(DatabaseTooNew, match=str(SCHEMA_VERSION + 1)):
        MemorySystem.open(home)
    # Refused again on a second try: nothing was "half migrated" by the first.
    with pytest.raises(DatabaseTooNew):
        MemorySystem.open(home)
    conn = sqlite3.connect(home / "memory.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchall() == [(SCHEMA_VERSION + 1,)]
        assert conn.execute("SELECT * FROM events").fetchall() == [(1, "s", "{}")]
    finally:
        conn.close()


def test_a_much_newer_version_of_our_own_database_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id=AGENT, owner_id="o", conversation="c:1", role="user", content="hi")
    conn = apsw.Connection(str(home / "memory.db"))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 40}")
    conn.close()
    with pytest.raises(DatabaseTooNew):
        MemorySystem.open(home)


def test_a_database_newer_than_the_code_is_left_byte_for_byte(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_too_new(home)
    before = snapshot(home)
    with pytest.raises(DatabaseTooNew):
        MemorySystem.open(home)
    assert snapshot(home) == before


# --- not ours -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [100, 4096, 70_000])
def test_random_bytes_are_refused_and_left_alone(tmp_path: Path, size: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "memory.db"
    db.write_bytes(os.urandom(size))
    before = snapshot(home)
    with pytest.raises(ForeignDatabase):
        MemorySystem.open(home)
    assert snapshot(home) == before


def test_a_text_file_named_memory_db_is_refused_and_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memory.db").write_text("these are my notes, not a database\n" * 200)
    before = snapshot(home)
    with pytest.raises(ForeignDatabase):
        MemorySystem.open(home)
    assert snapshot(home) == before


def test_another_applications_sqlite_database_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_foreign_sqlite(home)
    with pytest.raises(ForeignDatabase):
        MemorySystem.open(home)
    conn = sqlite3.connect(home / "memory.db")
    try:
        assert conn.execute("SELECT count(*) FROM invoices").fetchall() == [(100,)]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        assert "events" not in names and "messages" not in names
        assert conn.execute("PRAGMA user_version").fetchall() == [(0,)]
    finally:
        conn.close()


def test_a_database_with_another_application_id_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    conn = sqlite3.connect(home / "memory.db")
    conn.execute("PRAGMA application_id = 1234")
    conn.commit()
    conn.close()
    with pytest.raises(ForeignDatabase, match="another application"):
        MemorySystem.open(home)


def test_another_applications_sqlite_database_is_left_byte_for_byte(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_foreign_sqlite(home)
    before = snapshot(home)
    with pytest.raises(ForeignDatabase):
        MemorySystem.open(home)
    assert snapshot(home) == before


def test_a_refused_home_gets_no_prompt_files_or_other_litter(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_foreign_sqlite(home)
    with pytest.raises(ForeignDatabase):
        MemorySystem.open(home)
    assert sorted(p.name for p in home.iterdir() if not p.name.startswith("memory.db")) == []


# --- fresh and existing databases -------------------------------------------------------------------


def test_a_new_database_is_created_at_the_current_version(tmp_path: Path) -> None:
    home = tmp_path / "home"
    MemorySystem.open(home).close()
    conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("PRAGMA user_version").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("PRAGMA application_id").fetchall() == [(APPLICATION_ID,)]
        assert conn.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
    finally:
        conn.close()


def test_an_empty_file_is_a_new_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memory.db").write_bytes(b"")
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id=AGENT, owner_id="o", conversation="c:1", role="user", content="first")
        assert memory.verify().ok


def test_reopening_keeps_everything(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        ids = [memory.append_message(agent_id=AGENT, owner_id="o", conversation="c:1", role="user",
                                     content=f"message {i} \u00e9", metadata={"i": i}) for i in range(20)]
        rid = memory.write_memory({"op": "add", "category": "identity", "key": "name", "value": "Olga"},
                                  agent_id=AGENT, owner_id="o", trust="operator")[0].memory_id
        before_history = memory.history(AGENT, "c:1")
        before_rows = memory.memories()
        before_checksums = memory.verify().table_checksums
    for _ in range(3):
        with MemorySystem.open(home) as memory:
            assert memory.history(AGENT, "c:1") == before_history
            assert [m.id for m in memory.history(AGENT, "c:1")] == ids
            assert memory.memories() == before_rows
            assert memory.memory(rid).value == "Olga"  # type: ignore[arg-type]
            report = memory.verify()
            assert report.ok and report.table_checksums == before_checksums
    with MemorySystem.open(home) as memory:
        new = memory.append_message(agent_id=AGENT, owner_id="o", conversation="c:1", role="user", content="more")
        assert new > max(ids)
        assert len(memory.history(AGENT, "c:1")) == 21
    conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("PRAGMA user_version").fetchall() == [(SCHEMA_VERSION,)]
    finally:
        conn.close()


def test_history_is_the_same_before_and_after_a_reopen(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id=AGENT, owner_id="o", conversation="c:1", role="user", content="now")
        memory.history(AGENT, "c:1")  # the window is cached from here on
        memory.import_history([json.dumps({
            "agent_id": AGENT, "owner_id": "o", "channel": "c", "chat_id": "1", "role": "user",
            "sender": "o", "content": "from an old export", "created_at": "2020-01-01T00:00:00+00:00"})])
        cached = [m.content for m in memory.history(AGENT, "c:1")]
    with MemorySystem.open(home) as memory:
        reloaded = [m.content for m in memory.history(AGENT, "c:1")]
    assert cached == reloaded


# --- where the home is --------------------------------------------------------------------------------


def test_fermix_home_is_used_when_no_home_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_home = tmp_path / "from-env"
    monkeypatch.setenv("FERMIX_HOME", str(env_home))
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    with MemorySystem.open() as memory:
        assert memory.home == env_home
        memory.append_message(agent_id=AGENT, owner_id="o", conversation="c:1", role="user", content="env")
    assert (env_home / "memory.db").is_file()
    assert not (tmp_path / "user-home" / ".fermix").exists()
    with MemorySystem.open() as memory:
        assert [m.content for m in memory.history(AGENT, "c:1")] == ["env"]


def test_an_explicit_home_wins_over_fermix_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERMIX_HOME", str(tmp_path / "from-env"))
    with MemorySystem.open(tmp_path / "explicit") as memory:
        assert memory.home == tmp_path / "explicit"
    assert (tmp_path / "explicit" / "memory.db").is_file()
    assert not (tmp_path / "from-env").exists()


def test_the_default_home_is_dot_fermix_in_the_user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    with MemorySystem.open() as memory:
        assert memory.home == tmp_path / "user-home" / ".fermix"
    assert (tmp_path / "user-home" / ".fermix" / "memory.db").is_file()


def test_a_tilde_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    monkeypatch.setenv("FERMIX_HOME", "~/custom")
    with MemorySystem.open() as memory:
        assert memory.home == tmp_path / "user-home" / "custom"
