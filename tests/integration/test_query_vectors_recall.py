"""A query is embedded once however often and by whichever path it is asked (ADR-0061): recall of
rows and of history in one call share its vector, a repeated recall and the agent's
``memory_recall`` tool reuse it, and no write makes it stale."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from tests.integration.fake_embedder import ConceptEmbedder

AGENT, OWNER, CONV = "ada", "alice", "telegram:alice"
ASK: dict[str, Any] = dict(agent_id=AGENT, owner_id=OWNER, conversation=CONV)


@pytest.fixture
def embedder() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def memory(tmp_path: Path, embedder: ConceptEmbedder) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home", embedder=embedder) as memory:
        memory.append_message(role="user", sender=OWNER, content="I live in a small town by the lake", **ASK)
        memory.append_message(role="assistant", sender=AGENT, content="That sounds calm", **ASK)
        memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Konstanz"},
                            agent_id=AGENT, owner_id=OWNER, trust="operator")
        memory.fill_vectors()
        yield memory


def times_embedded(embedder: ConceptEmbedder, query: str) -> int:
    """How many times ``query`` went to the model (alone, as a query goes)."""
    return sum(1 for call in embedder.calls if call == [query])


def test_a_recall_of_rows_and_history_embeds_its_query_once(memory: MemorySystem, embedder: ConceptEmbedder) -> None:
    found = memory.recall("which city is home", source="all", mode="hybrid", **ASK)
    assert found.memories and found.messages  # both kinds were searched by meaning
    assert times_embedded(embedder, "which city is home") == 1


def test_a_repeated_query_is_not_embedded_again_by_recall_or_the_recall_tool(
        memory: MemorySystem, embedder: ConceptEmbedder) -> None:
    query = "where does she reside"
    first = memory.recall(query, source="all", **ASK)
    again = memory.recall(query, source="all", **ASK)
    by_tool = memory.dispatch_tool("memory_recall", {"query": query, "source": "all"}, **ASK)
    semantic = memory.recall(query, source="history", mode="semantic", **ASK)
    assert [h.memory.id for h in first.memories] == [h.memory.id for h in again.memories]
    assert by_tool["ok"] and by_tool["memories"] and semantic.messages
    assert times_embedded(embedder, query) == 1
    memory.recall("where does he reside", source="all", **ASK)  # another text: its own vector
    assert times_embedded(embedder, "where does he reside") == 1


def test_a_write_leaves_the_kept_vector_in_use_and_the_new_row_found(
        memory: MemorySystem, embedder: ConceptEmbedder) -> None:
    query = "favourite beverage"
    assert memory.recall(query, mode="semantic", **ASK).memories == []
    memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "green tea"},
                        agent_id=AGENT, owner_id=OWNER, trust="operator")
    memory.fill_vectors()
    assert [h.memory.key for h in memory.recall(query, mode="semantic", **ASK).memories] == ["drink"]
    assert times_embedded(embedder, query) == 1


class ThreadNoting(ConceptEmbedder):
    """Notes on which thread each text was embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: dict[str, int] = {}

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        self.threads.update((text, threading.get_ident()) for text in texts)
        return super().embed(texts)


def test_a_new_query_is_embedded_beside_the_search_by_words_and_finds_what_a_kept_one_finds(
        tmp_path: Path) -> None:
    embedder = ThreadNoting()
    with MemorySystem.open(tmp_path / "home", embedder=embedder) as memory:
        memory.append_message(role="user", sender=OWNER, content="I live in a small town by the lake", **ASK)
        memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Konstanz"},
                            agent_id=AGENT, owner_id=OWNER, trust="operator")
        memory.fill_vectors()
        results = [memory.recall(query, source="all", mode=mode, **ASK)
                   for query in ("which city is home", "town by the lake") for mode in ("hybrid", "hybrid", "semantic")]
    assert embedder.threads["which city is home"] != threading.get_ident()
    for first, kept, by_meaning in (results[:3], results[3:]):
        assert first.ranked and first.ranked == kept.ranked  # cold (embedded meanwhile) and warm alike
        assert by_meaning.ranked and all(hit.similarity is not None for hit in by_meaning.ranked)
    assert times_embedded(embedder, "which city is home") == times_embedded(embedder, "town by the lake") == 1
