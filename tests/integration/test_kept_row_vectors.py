"""A memory keeps a scope's memory-row vectors between searches by meaning (ADR-0086): a row
written, changed, archived, forgotten or erased, here or by another writer of the same home, is
never ranked by a vector it no longer has. Each step is checked against a memory opened afresh."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from tests.integration.fake_embedder import ConceptEmbedder
from tests.integration.test_vectors import read, write_behind_the_stores_back

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT, CONV = "ada", "telegram:alice"
QUERIES = ["where does the user live", "what does the user drink", "kitchen repairs", "piano"]


def add(memory: MemorySystem, key: str, value: str, owner: str = "alice") -> int:
    [row] = memory.write_memory({"op": "add", "category": "preference", "key": key, "value": value},
                                agent_id=AGENT, owner_id=owner, trust="operator")
    assert row.memory_id is not None
    return row.memory_id


def change(memory: MemorySystem, op: dict[str, object]) -> None:
    memory.write_memory(op, agent_id=AGENT, owner_id="alice", trust="operator")


def hits(memory: MemorySystem, query: str) -> list[tuple[int, float]]:
    found = memory.recall(query, agent_id=AGENT, owner_id="alice", conversation=CONV, source="memories",
                          mode="semantic", limit=5)
    return [(h.memory.id, round(h.similarity or 0.0, 6)) for h in found.memories]


def test_kept_row_vectors_rank_as_a_fresh_memory_ranks_after_every_change(tmp_path: Path) -> None:
    home, embedder = tmp_path / "home", ConceptEmbedder()

    def same_as_fresh(step: str, *, fill: bool = True) -> None:
        if fill:
            memory.fill_vectors()
        with MemorySystem.open(home, embedder=embedder, readonly=True) as fresh:
            for query in QUERIES:
                for _ in range(50):
                    # The background upkeep may embed a changed row between the two searches: only
                    # a move of the count in between may part their answers.
                    count = read(memory, "SELECT memory_changes FROM vector_changes")[0][0]
                    mine, theirs = hits(memory, query), hits(fresh, query)
                    if mine == theirs:
                        break
                    assert read(memory, "SELECT memory_changes FROM vector_changes")[0][0] != count, (
                        step, query, mine, theirs)
                else:
                    raise AssertionError(f"{step}: {query!r} kept changing")

    with MemorySystem.open(home, embedder=embedder) as memory:
        city = add(memory, "home_city", "I live in Berlin")
        drink = add(memory, "drink", "green tea every morning")
        kitchen = add(memory, "kitchen", "the kitchen tap drips")
        add(memory, "bob_city", "Bob lives in Paris", owner="bob")
        same_as_fresh("first")
        for _ in range(2):  # kept: the same again
            same_as_fresh("kept")
        add(memory, "music", "piano lessons on Tuesdays")
        same_as_fresh("written")
        change(memory, {"op": "replace", "id": kitchen, "value": "piano repairs in the kitchen"})
        same_as_fresh("changed, its vector not stored yet", fill=False)
        same_as_fresh("changed")
        change(memory, {"op": "archive", "id": drink, "reason": "stopped"})
        same_as_fresh("archived")
        memory.forget_memory(city)
        same_as_fresh("forgotten")
        with MemorySystem.open(home, embedder=embedder) as elsewhere:  # another writer of the same home
            moved = add(elsewhere, "home_town", "my home town is Hamburg")
            elsewhere.fill_vectors()
        same_as_fresh("written elsewhere")
        # A text changed as a repair tool would change it: its vector goes and comes back under the
        # same id; the kept one must not stand in for it meanwhile.
        write_behind_the_stores_back(memory, f"UPDATE memories SET value = 'tea I drink' WHERE id = {moved}")
        same_as_fresh("changed behind the store's back", fill=False)
        same_as_fresh("embedded again")
        write_behind_the_stores_back(memory, f"UPDATE memories SET archived_at = created_at WHERE id = {moved}")
        same_as_fresh("archived behind the store's back", fill=False)
        memory.forget_owner("alice")
        same_as_fresh("erased")


def test_the_row_change_count_moves_when_a_row_vector_comes_goes_or_changes_or_a_row_is_archived(
        tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home", embedder=ConceptEmbedder()) as memory:
        changes = lambda: read(memory, "SELECT memory_changes FROM vector_changes")[0][0]  # noqa: E731
        before = changes()  # read before the row: the background upkeep may embed it at any time
        row = add(memory, "home_city", "I live in Berlin")
        memory.fill_vectors()
        assert changes() == before + 1  # a row's vector came
        blob = "'\\x00'::bytea" if os.environ.get("FERMIX_DATABASE_URL") else "x'00'"
        write_behind_the_stores_back(memory, f"UPDATE memory_vectors SET vector = {blob} WHERE memory_id = {row}")
        assert changes() == before + 2
        write_behind_the_stores_back(memory, f"UPDATE memories SET confidence = confidence WHERE id = {row}")
        assert changes() == before + 2  # nothing a search by meaning reads
        change(memory, {"op": "archive", "id": row, "reason": "moved"})
        assert changes() == before + 3
        write_behind_the_stores_back(memory, f"DELETE FROM memory_vectors WHERE memory_id = {row}")
        assert changes() == before + 4
