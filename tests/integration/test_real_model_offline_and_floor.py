"""The [semantic] extra's real model (skipped where the extra is not installed): it writes nothing
outside the memory's home (ONNX Runtime's telemetry is off), and the default relevance floor holds
the figures ADR-0054 measured on the committed questions of ``benchmarks/recall_eval``."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
FERMIX = Path(sys.executable).parent / "fermix"
sys.path.insert(0, str(ROOT / "benchmarks"))
import meaning_floor  # noqa: E402  # the benchmark's own reading of the committed cases

LINE = {"agent_id": "ada", "owner_id": "alice", "channel": "telegram", "chat_id": "42", "role": "user",
        "sender": "alice", "content": "I drink green tea every morning"}


def stored_vectors(database: Path) -> int:
    """The message vectors a home's SQLite file holds, whichever process or thread stored them."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM message_vectors").fetchone()[0])


def test_the_model_writes_nothing_outside_the_home(tmp_path: Path) -> None:
    """Import, embed and search by meaning with the installed command, HOME an empty folder and the
    memory in its default place there (~/.fermix): nothing else appears under HOME."""
    user = tmp_path / "user"
    user.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "ORT_", "FERMIX_HOME"))}
    env |= {"HOME": str(user), "FERMIX_RECALL_BY_MEANING": "auto"}
    source = tmp_path / "history.jsonl"
    source.write_text(json.dumps(LINE) + "\n", encoding="utf-8")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(FERMIX), *args], capture_output=True, text=True, env=env, timeout=300,
                              check=False)
        assert done.returncode == 0, done.stderr
        return done

    run("history", "import", str(source))
    # The message's vector is stored once, by the import's background upkeep or by this command,
    # whichever comes first: what the command stored itself is 1 or 0, and then nothing waits.
    embedded = run("memory", "embed").stdout
    assert re.match(r"(1 vector|0 vectors) stored; 0 texts still wait", embedded), embedded
    assert stored_vectors(user / ".fermix" / "memory.db") == 1
    found = run("memory", "search", "what does she drink", "--agent", "ada", "--owner", "alice", "--source",
                "history", "--conversation", "telegram:42", "--mode", "semantic")
    assert "green tea" in found.stdout and "[similarity 0." in found.stdout
    outside = [str(p.relative_to(user)) for p in user.rglob("*") if not p.is_relative_to(user / ".fermix")]
    assert outside == [], outside


def test_the_default_floor_keeps_most_related_texts_and_drops_most_unrelated_ones() -> None:
    """The figures of ADR-0054 at the default floor, on the committed cases."""
    cases = json.loads(meaning_floor.CASES.read_text(encoding="utf-8"))
    figures = meaning_floor.figures(meaning_floor.pairs(cases))
    [at_default] = [f for f in figures["by_floor"] if f["floor"] == figures["default_floor"]]
    assert at_default["kept"] >= 0.8 and at_default["dropped"] >= 0.85, at_default


def test_a_question_nothing_answers_finds_no_row_by_meaning(tmp_path: Path) -> None:
    """The demo's rows asked "what does she drink": before the floor, every row came back, the
    owner's name first."""
    from fermix_memory import MemorySystem, load_embedder

    with MemorySystem.open(tmp_path / "home", embedder=load_embedder()) as memory:
        memory.write_memory([{"op": "add", "category": "identity", "key": "name", "value": "Alice Martin"},
                             {"op": "add", "category": "identity", "key": "home_city", "value": "Berlin"},
                             {"op": "add", "category": "interest", "key": "interest_rock_climbing",
                              "value": "Interested in rock climbing"}],
                            agent_id="ada", owner_id="alice", trust="operator")
        memory.fill_vectors()
        ask = {"agent_id": "ada", "owner_id": "alice"}
        assert memory.recall("what does she drink", mode="semantic", **ask).memories == []
        city = memory.recall("which city does she live in", mode="semantic", **ask).memories[0]
        assert city.memory.value == "Berlin" and city.similarity is not None and city.similarity >= 0.2
