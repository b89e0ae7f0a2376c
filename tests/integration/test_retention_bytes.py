"""After a retention run no copy of an erased value is left: not in the SQLite file and its WAL,
not in PostgreSQL's files for the database, not among the vectors, not in the prompt files;
what is not due keeps every byte (the scans of test_forget.py and test_postgres_forget_bytes.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from tests.integration.fake_embedder import ConceptEmbedder
from tests.integration.test_forget import found
from tests.integration.test_postgres_forget_bytes import database_folder
from tests.manual_clock import TestClock
from tests.postgres_server import PostgresServer

GONE = ("Quetzalkioskpin", "Thistlewoodblood")
KEPT = ("Nightingalenote", "Bobwombatfacts")
POLICIES: dict[str, Any] = {"kiosk": {"name": "kiosk", "after": "30d", "channel_prefix": "kiosk:"},
                            "health": {"name": "health", "after": "7d", "category": "identity"}}
TEXTS = {"gone": "visitor: my pin is Quetzalkioskpin", "kept": "visitor: a note Nightingalenote"}


def config(url: str | None = None) -> dict[str, Any]:
    core: dict[str, Any] = {"retention": {"check_every_s": 0, "policy": list(POLICIES.values())}}
    if url is not None:
        core["storage"] = {"url": url}
    return {"fermix_core": core}


def fill_and_run(home: Path, settings: dict[str, Any], embedder: ConceptEmbedder,
                 files: Callable[[], Path]) -> tuple[bytes, bytes]:
    """Write what goes and what stays, embed it, check that the scan of ``files()`` sees it at
    all, run retention 40 days on; the vectors of a text that went and of one that stays."""
    clock = TestClock()
    with MemorySystem.open(home, config=settings, clock=clock, embedder=embedder) as memory:
        memory.append_message(agent_id="shop", owner_id="visitor", conversation="kiosk:1", role="user",
                              sender="visitor", content=f"my pin is {GONE[0]}")
        memory.append_message(agent_id="shop", owner_id="visitor", conversation="telegram:1", role="user",
                              sender="visitor", content=f"a note {KEPT[0]}")
        memory.write_memory({"op": "add", "category": "identity", "key": "blood", "value": GONE[1]},
                            agent_id="shop", owner_id="alice", trust="operator")
        memory.write_memory({"op": "add", "category": "interest", "key": "facts", "value": KEPT[1]},
                            agent_id="shop", owner_id="alice", trust="operator")
        memory.fill_vectors()
    assert set(found(files(), GONE)) == set(GONE) and holds(files(), embedder.vector(TEXTS["gone"]))
    clock.advance(days=40)
    with MemorySystem.open(home, config=settings, clock=clock, embedder=embedder) as memory:
        report = memory.run_retention()
        assert len(report.items) == 2 and report.finished
        assert memory.verify().ok
    return embedder.vector(TEXTS["gone"]), embedder.vector(TEXTS["kept"])


def holds(folder: Path, data: bytes) -> bool:
    return any(data in path.read_bytes() for path in folder.rglob("*") if path.is_file())


def test_no_byte_of_what_retention_erased_is_left_in_the_sqlite_file_its_wal_or_the_prompt_files(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    gone, kept = fill_and_run(home, config(), ConceptEmbedder(), lambda: home)
    assert found(home, GONE) == {}
    assert set(found(home, KEPT)) == set(KEPT)
    assert not holds(home, gone) and holds(home, kept)  # the vectors too


def test_no_byte_of_what_retention_erased_is_left_in_postgresqls_files(postgres_server: PostgresServer,
                                                                     postgres_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    gone, kept = fill_and_run(home, config(postgres_url), ConceptEmbedder(),
                              lambda: database_folder(postgres_server, postgres_url))
    database = database_folder(postgres_server, postgres_url)
    assert found(database, GONE) == {} and found(home, GONE) == {}
    assert set(found(database, KEPT)) == set(KEPT)
    assert not holds(database, gone) and holds(database, kept)
