"""A home filled from the command line (``history import``, ``memory set``, ``events import``)
gets its vectors from ``fermix memory embed``, resumably; a search by meaning says how many texts
still wait instead of quietly finding nothing; it keeps only hits above the relevance floor and
shows each hit's similarity (ADR-0054). The fake embedder stands for the model here."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory.adapters import embedding
from tests.cli_runner import run_cli as fermix
from tests.integration.fake_embedder import ConceptEmbedder
from tests.integration.test_postgres_store import sql as sql_on_postgres

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER = "ada", "alice"
SEARCH = ("memory", "search", "where does the user live", "--agent", AGENT, "--owner", OWNER, "--source", "all",
          "--scope", "owner")


class Interrupting(ConceptEmbedder):
    """Embeds as the fake does; its ``after``-th call on the main thread (the command's own
    fill) is a Ctrl-C instead."""

    def __init__(self, after: int | None = None) -> None:
        super().__init__()
        self.after = after
        self.main_calls = 0

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if threading.current_thread() is threading.main_thread():
            self.main_calls += 1
            if self.after is not None and self.main_calls > self.after:
                raise KeyboardInterrupt
        return super().embed(texts)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def model(monkeypatch: pytest.MonkeyPatch, embedder: ConceptEmbedder) -> None:
    """``fermix`` loads ``embedder`` wherever it would load the [semantic] extra's model."""
    monkeypatch.setattr(embedding, "load_embedder", lambda *, lazy=False: embedder)


def fill_from_the_command_line(home: Path, tmp_path: Path, messages: int = 2) -> None:
    lines = [{"agent_id": AGENT, "owner_id": OWNER, "channel": "telegram", "chat_id": "42", "role": "user",
              "sender": OWNER, "content": f"note {n}: the kitchen tap drips again"} for n in range(messages - 1)]
    lines.append({"agent_id": AGENT, "owner_id": OWNER, "channel": "telegram", "chat_id": "42", "role": "user",
                  "sender": OWNER, "content": "I live in Berlin now"})
    source = tmp_path / "history.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert (done := fermix("history", "import", str(source), home=home)).returncode == 0, done.stderr
    for key, value in (("home_city", "Berlin"), ("name", "Alice Martin"), ("sport", "bouldering")):
        category = "identity" if key != "sport" else "interest"
        assert fermix("memory", "set", "--agent", AGENT, "--owner", OWNER, "--category", category, "--key", key,
                      value, home=home).returncode == 0


def stored_vectors(home: Path) -> int:
    sql = "SELECT (SELECT count(*) FROM message_vectors) + (SELECT count(*) FROM memory_vectors)"
    url = os.environ.get("FERMIX_DATABASE_URL")
    if url:
        return int(sql_on_postgres(url, sql)[0][0])
    conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute(sql).fetchall()[0][0])
    finally:
        conn.close()


def test_a_home_filled_from_the_command_line_is_searched_by_meaning_after_memory_embed(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill_from_the_command_line(home, tmp_path)
    model(monkeypatch, ConceptEmbedder())
    # Before: the search by meaning says what it cannot see, instead of a bare "nothing found".
    before = fermix(*SEARCH, "--mode", "semantic", home=home)
    assert before.returncode == 0 and before.stdout == "nothing found\n"
    assert before.stderr == ("fermix: warning: 5 texts still wait for their vectors and are not searched by meaning"
                             " yet; run 'fermix memory embed' to compute them now\n")
    hybrid = fermix(*SEARCH, "--mode", "hybrid", "--json", home=home)
    assert json.loads(hybrid.stdout)["vectors_waiting"] == 5 and hybrid.stderr == ""
    assert json.loads(fermix(*SEARCH, "--mode", "keyword", "--json", home=home).stdout)["vectors_waiting"] is None

    done = fermix("memory", "embed", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("5 vectors stored; 0 texts still wait (fake-concepts@1)")
    again = json.loads(fermix("memory", "embed", "--json", home=home).stdout)
    assert again == {"stored": 0, "waiting": 0, "label": "fake-concepts@1"}

    after = fermix(*SEARCH, "--mode", "semantic", home=home)
    assert after.returncode == 0 and after.stderr == ""
    lines = after.stdout.splitlines()
    assert lines[0].startswith("memory ") and "home_city = Berlin  [similarity 0." in lines[0]
    assert any("I live in Berlin now  [similarity 0." in line for line in lines)
    found = json.loads(fermix(*SEARCH, "--mode", "semantic", "--json", home=home).stdout)
    assert found["vectors_waiting"] == 0
    assert 0.2 <= found["memories"][0]["similarity"] <= 1.0 and found["memories"][0]["memory"]["key"] == "home_city"


def test_an_interrupted_embed_keeps_what_it_stored_and_the_next_run_goes_on(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill_from_the_command_line(home, tmp_path, messages=100)  # 103 texts: four batches of 32
    first = Interrupting(after=2)
    model(monkeypatch, first)
    cut = fermix("memory", "embed", home=home)
    assert cut.returncode == 130 and cut.stdout == ""
    assert cut.stderr.count("\n") == 1 and cut.stderr.startswith("fermix: interrupted: 64 vectors stored and kept;")
    kept = stored_vectors(home)
    assert kept >= 64  # every committed batch stays (a background batch may have come first)
    verified = fermix("events", "verify", "--json", home=home)
    assert verified.returncode == 0 and json.loads(verified.stdout)["vectors_waiting"] == 103 - kept

    second = Interrupting()
    model(monkeypatch, second)
    done = fermix("memory", "embed", "--json", home=home)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["waiting"] == 0 and stored_vectors(home) == 103
    embedded: list[Any] = [t for call in first.calls + second.calls for t in call]
    assert len(embedded) == len(set(embedded)) == 103  # each text embedded once over both runs


def test_without_the_extra_embed_is_one_clear_error(home: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fill_from_the_command_line(home, tmp_path)

    def missing(*, lazy: bool = False) -> Any:
        raise embedding.SemanticRecallUnavailable(embedding.EXTRA_MISSING)

    monkeypatch.setattr(embedding, "load_embedder", missing)
    refused = fermix("memory", "embed", home=home)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("fermix: error: recall by meaning needs the [semantic] extra")
    assert stored_vectors(home) == 0


def test_search_by_meaning_keeps_only_hits_above_the_floor_and_the_floor_is_a_setting(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill_from_the_command_line(home, tmp_path)
    model(monkeypatch, ConceptEmbedder())
    assert fermix("memory", "embed", home=home).returncode == 0
    rows = ("memory", "search", "what does she drink", "--agent", AGENT, "--owner", OWNER, "--mode", "semantic")
    assert fermix(*rows, home=home).stdout == "nothing found\n"  # no row is about drinks: none is a hit
    (home / "config.toml").write_text("[fermix_core.memory]\nrecall_min_similarity = -1\n", encoding="utf-8")
    every = json.loads(fermix(*rows, "--json", home=home).stdout)["memories"]
    assert sorted(h["memory"]["key"] for h in every) == ["home_city", "name", "sport"]
    assert all(h["similarity"] is not None for h in every)


@pytest.mark.sqlite_only("the help text is the same whatever the store")
def test_the_search_help_names_the_modes_and_not_full_text_alone() -> None:
    shown = fermix("memory", "search", "--help")
    text = " ".join(shown.stdout.split())
    assert "full-text" not in text
    assert "by words (keyword), by meaning (semantic) or both (hybrid); each hit shows its scores" in text
    embed_help = " ".join(fermix("memory", "embed", "--help").stdout.split())
    assert "interrupted run keeps what it stored" in embed_help
