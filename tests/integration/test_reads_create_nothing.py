"""A read-only command never creates a home (ADR-0051): not its folder, not its head file, not a
database or its schema. Where there is no home it says so in one line, or, on a database that
is a memory, answers from it (empty), on either store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fermix_memory import HomeNotFound, MemorySystem
from tests.cli_runner import leaf_commands, run_cli
from tests.integration.test_postgres_store import sql
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.usefixtures("every_store")

# The arguments each read-only command needs to run (every one of the command tree's reads is here).
READS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("events", "verify"): (),
    ("events", "head"): (),
    ("events", "log"): (),
    ("events", "export"): ("-",),
    ("events", "replay"): ("--into", "{tmp}/replayed"),
    ("events", "receipt"): ("1",),
    ("history", "export"): (),
    ("history", "show"): ("chat:1", "--agent", "ada"),
    ("memory", "list"): (),
    ("memory", "show"): ("1",),
    ("memory", "search"): ("tea", "--agent", "ada", "--owner", "alice"),
    ("resource", "list"): (),
    ("resource", "history"): ("user_md", "--agent", "ada", "--owner", "alice"),
    ("resource", "show"): ("user_md", "1", "--agent", "ada", "--owner", "alice"),
    ("resource", "diff"): ("user_md", "1", "2", "--agent", "ada", "--owner", "alice"),
    ("retention", "status"): ("--dry-run",),
    ("storage", "migrate"): ("--to", "{tmp}/moved"),
}


def test_every_read_only_command_is_tried() -> None:
    reads = {words for words, command in leaf_commands().items() if command.access == "read"}
    assert reads == set(READS)


def run_read(words: tuple[str, ...], home: Path, tmp_path: Path) -> tuple[int, str]:
    result = run_cli(*words, *(a.replace("{tmp}", str(tmp_path)) for a in READS[words]), home=home)
    assert result.returncode in (0, 1) and result.stderr.count("\n") <= 1, result.stderr
    return result.returncode, result.stderr


@pytest.mark.parametrize("words", sorted(READS), ids=" ".join)
def test_a_read_only_command_creates_no_home(every_store: str, words: tuple[str, ...], tmp_path: Path) -> None:
    home = tmp_path / "nowhere"
    code, errors = run_read(words, home, tmp_path)
    assert not home.exists()
    if every_store == "sqlite":
        assert code == 1 and f"no memory home at {home}" in errors
        assert not (tmp_path / "moved").exists() and not (tmp_path / "replayed").exists()
    else:  # the database is a memory (an empty one): it answers, or says what it lacks
        assert sql(os.environ["FERMIX_DATABASE_URL"], "SELECT count(*) FROM events") == [(0,)]


@pytest.fixture
def blank_database(postgres_server: PostgresServer) -> Iterator[str]:
    """A database with nothing in it, not even the memory's schema."""
    postgres_server.admin("CREATE DATABASE blank_for_reads")
    try:
        yield postgres_server.url("blank_for_reads")
    finally:
        postgres_server.drop_database(postgres_server.url("blank_for_reads"))


@pytest.mark.sqlite_only("one database, named by the test")
@pytest.mark.parametrize("words", [("memory", "list"), ("events", "verify"), ("events", "head")], ids=" ".join)
def test_a_read_leaves_a_blank_database_blank(words: tuple[str, ...], tmp_path: Path, blank_database: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERMIX_DATABASE_URL", blank_database)
    code, errors = run_read(words, tmp_path / "nowhere", tmp_path)
    assert code == 1 and "not a fermix-memory database" in errors
    assert not (tmp_path / "nowhere").exists()
    assert sql(blank_database, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == [(0,)]


def test_the_embedding_api_opens_read_only_without_creating(every_store: str, tmp_path: Path) -> None:
    home = tmp_path / "nowhere"
    if every_store == "sqlite":
        with pytest.raises(HomeNotFound, match="no memory home at"):
            MemorySystem.open(home, readonly=True)
    else:
        with MemorySystem.open(home, readonly=True) as memory:
            assert memory.head().position == 0 and memory.memories() == []
    assert not home.exists()
