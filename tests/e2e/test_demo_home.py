"""``fermix demo`` writes only where it was told (ADR-0051): its own folder's SQLite file whatever
database the environment or a config names, a database only when ``--database-url`` names it
(and one holding no one else's events), and a folder only when the demo's mark is in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from tests.cli_runner import run_cli
from tests.integration.test_postgres_store import sql


def events_in(url: str) -> int:
    return int(sql(url, "SELECT count(*) FROM events")[0][0])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_demo_ignores_the_database_of_the_environment(tmp_path: Path, postgres_url: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERMIX_DATABASE_URL", postgres_url)
    ran = run_cli("demo", "--json", home=tmp_path / "demo")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["imported"] == 12
    assert (tmp_path / "demo" / "memory.db").is_file() and events_in(postgres_url) == 0


def test_the_demo_ignores_the_database_its_config_names(tmp_path: Path, postgres_url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    home = tmp_path / "tried"
    home.mkdir()
    (home / "config.toml").write_text(f'[fermix_core.storage]\nurl = "{postgres_url}"\n', encoding="utf-8")
    ran = run_cli("demo", home=home)
    assert ran.returncode == 0, ran.stderr
    assert (home / "memory.db").is_file() and events_in(postgres_url) == 0


def test_database_url_runs_the_demo_in_that_database_and_again(tmp_path: Path, postgres_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    home = tmp_path / "demo"
    first = run_cli("demo", "--json", "--database-url", postgres_url, home=home)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["imported"] == 12 and events_in(postgres_url) > 0
    assert not (home / "memory.db").exists()
    again = run_cli("demo", "--json", "--database-url", postgres_url, home=home)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["imported"] == 0
    # Another demo folder did not write that database: it is refused, and left as it was.
    held = events_in(postgres_url)
    refused = run_cli("demo", "--database-url", postgres_url, home=tmp_path / "other")
    assert refused.returncode == 1 and "already holds" in refused.stderr and refused.stderr.count("\n") == 1
    assert events_in(postgres_url) == held


def test_database_url_never_writes_into_a_database_holding_other_data(tmp_path: Path, postgres_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    with MemorySystem.open(tmp_path / "real", config={"fermix_core": {"storage": {"url": postgres_url}}}) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                              sender="alice", content="a real conversation")
    refused = run_cli("demo", "--database-url", postgres_url, home=tmp_path / "demo")
    assert refused.returncode == 1 and f"{postgres_url} already holds 1 events" in refused.stderr
    assert events_in(postgres_url) == 1


def test_a_home_of_the_samples_names_without_the_mark_is_refused(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:  # rows of the sample's agent and owner, and no message
        memory.write_memory({"op": "add", "category": "identity", "key": "pin", "value": "7731"},
                            agent_id="ada", owner_id="alice", trust="operator")
    before = snapshot(home)
    refused = run_cli("demo", home=home)
    assert refused.returncode == 1 and "already holds data" in refused.stderr and refused.stderr.count("\n") == 1
    assert snapshot(home) == before
