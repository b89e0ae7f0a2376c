"""The vectors of recent queries (ADR-0061): a bounded LRU under each embedder's label, shared
safely between threads, that spares a repeated query its embedding."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast

import pytest

from fermix_memory.application.errors import SemanticRecallUnavailable
from fermix_memory.application.query_ports import VectorIndex
from fermix_memory.application.semantic import QUERY_VECTORS, QueryVectors, SemanticSearch
from tests.integration.fake_embedder import ConceptEmbedder


class NoIndex:
    """Stands where a search would read vectors: embedding a query reads none."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"embedding a query read the index ({name})")


def search(embedder: ConceptEmbedder, queries: QueryVectors | None = None) -> SemanticSearch:
    return SemanticSearch(cast(VectorIndex, NoIndex()), embedder, queries=queries)


def queries_embedded(embedder: ConceptEmbedder) -> list[str]:
    return [text for call in embedder.calls for text in call]


def test_a_repeated_query_is_embedded_once_and_a_blank_one_never() -> None:
    embedder = ConceptEmbedder()
    semantic = search(embedder)
    first = semantic.embed_query("where does she live")
    assert semantic.embed_query("where does she live") == first == embedder.vector("where does she live")
    assert semantic.embed_query("Where does she live") is not None  # another text: its own vector
    assert semantic.embed_query("   ") is None
    assert queries_embedded(embedder) == ["where does she live", "Where does she live"]
    assert semantic.queries.size == QUERY_VECTORS


def test_the_cache_keeps_the_most_recently_used_up_to_its_size() -> None:
    cache = QueryVectors(size=3)
    for n in range(3):
        cache.put("m@1", f"q{n}", bytes([n]))
    assert cache.get("m@1", "q0") == b"\x00"  # used: now the newest
    cache.put("m@1", "q3", b"\x03")
    cache.put("m@1", "q4", b"\x04")
    assert len(cache) == 3
    assert [cache.get("m@1", f"q{n}") for n in range(5)] == [b"\x00", None, None, b"\x03", b"\x04"]
    with pytest.raises(ValueError):
        QueryVectors(size=0)


def test_an_embedder_of_another_label_never_gets_the_vector_of_the_first() -> None:
    shared = QueryVectors()
    old, new = ConceptEmbedder("1"), ConceptEmbedder("2")
    search(old, shared).embed_query("tea or coffee")
    search(new, shared).embed_query("tea or coffee")
    search(new, shared).embed_query("tea or coffee")
    assert queries_embedded(old) == ["tea or coffee"]
    assert queries_embedded(new) == ["tea or coffee"]
    assert len(shared) == 2
    assert shared.get("fake-concepts@3", "tea or coffee") is None


def test_threads_sharing_the_cache_keep_its_bound() -> None:
    cache = QueryVectors(size=50)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for n in range(500):
                cache.put("m@1", f"q{(n + offset) % 120}", n.to_bytes(2, "little"))
                cache.get("m@1", f"q{(n * 7 + offset) % 120}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k * 13,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) == 50


class GatedEmbedder(ConceptEmbedder):
    """Embeds only once ``gate`` is open, and says on which thread it ran."""

    def __init__(self, fail: Exception | None = None) -> None:
        super().__init__()
        self.gate, self.fail = threading.Event(), fail
        self.threads: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        self.threads.append(threading.get_ident())
        if not self.gate.wait(timeout=30):
            raise AssertionError("the gate was never opened: the caller waited for the model")
        if self.fail is not None:
            raise self.fail
        return super().embed(texts)


def test_a_new_query_is_embedded_on_its_own_thread_while_the_caller_goes_on() -> None:
    embedder = GatedEmbedder()
    semantic = search(embedder)
    vector_of = semantic.embed_query_soon("where does she live")  # returns with the model still held
    embedder.gate.set()
    assert vector_of() == embedder.vector("where does she live")
    assert embedder.threads and threading.get_ident() not in embedder.threads
    kept = semantic.embed_query_soon("where does she live")  # kept: no thread, no embedding
    assert kept() == embedder.vector("where does she live")
    assert semantic.embed_query_soon(" \n ")() is None
    assert queries_embedded(embedder) == ["where does she live"]


def test_what_embedding_a_query_raised_is_raised_to_the_caller() -> None:
    embedder = GatedEmbedder(fail=SemanticRecallUnavailable("the model cannot be loaded"))
    vector_of = search(embedder).embed_query_soon("tea or coffee")
    embedder.gate.set()
    with pytest.raises(SemanticRecallUnavailable, match="cannot be loaded"):
        vector_of()
