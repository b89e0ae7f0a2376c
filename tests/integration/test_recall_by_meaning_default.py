"""Recall by meaning is on by default where the ``[semantic]`` extra is installed and off, with no
error, where it is not (ADR-0044); the model loads at the first text it embeds, never at open;
the home's settings and ``FERMIX_RECALL_BY_MEANING`` turn it on or off."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from fermix_memory import ConfigError, MemorySystem, SemanticRecallUnavailable
from fermix_memory.adapters.embedding import extra_installed, load_embedder, minilm_model
from fermix_memory.adapters.embedding.lazy import LazyEmbedder
from fermix_memory.application.embedder import Embedder
from fermix_memory.entrypoints.recall_by_meaning import RECALL_BY_MEANING_ENV
from tests.cli_runner import run_cli as fermix
from tests.integration.fake_embedder import ConceptEmbedder
from tests.integration.store_reads import store_reads

AGENT, OWNER, CONV = "ada", "alice", "telegram:alice"
ASK = dict(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
needs_extra = pytest.mark.skipif(not extra_installed(), reason="the [semantic] extra is not installed")


def write_home_city(memory: MemorySystem) -> None:
    memory.write_memory([{"op": "add", "category": "identity", "key": "home_city", "value": "Berlin"},
                         {"op": "add", "category": "preference", "key": "drink", "value": "green tea"}],
                        agent_id=AGENT, owner_id=OWNER, trust="operator")


@pytest.fixture
def core_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the [semantic] extra were not installed: its runtime cannot be found or imported."""
    monkeypatch.delitem(sys.modules, "fermix_memory.adapters.embedding.minilm_onnx", raising=False)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)


@pytest.mark.usefixtures("recall_by_meaning_default", "core_install")
def test_on_a_core_install_the_default_is_keyword_recall_and_no_error(tmp_path: Path) -> None:
    assert not extra_installed()
    with MemorySystem.open(tmp_path / "home") as memory:
        assert not memory.recalls_by_meaning
        write_home_city(memory)
        assert memory.fill_vectors() == 0
        assert memory.recall("where does the user live", **ASK).memories == []  # type: ignore[arg-type]
        by_words = memory.recall("home city", **ASK)  # type: ignore[arg-type]
        assert by_words == memory.recall("home city", mode="keyword", **ASK)  # type: ignore[arg-type]
        assert [h.memory.value for h in by_words.memories] == ["Berlin"]
        with pytest.raises(SemanticRecallUnavailable, match=r"fermix-memory\[semantic\]"):
            memory.recall("where does the user live", mode="hybrid", **ASK)  # type: ignore[arg-type]
    search = fermix("memory", "search", "where does the user live", "--agent", AGENT, "--owner", OWNER,
                    home=tmp_path / "home")
    assert search.returncode == 0 and "nothing found" in search.stdout, search


@pytest.mark.usefixtures("recall_by_meaning_default", "core_install")
@pytest.mark.parametrize("config", ["recall_by_meaning = true", None])
def test_turned_on_without_the_extra_opening_is_one_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               config: str | None) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if config is None:
        monkeypatch.setenv(RECALL_BY_MEANING_ENV, "true")
    else:
        (home / "config.toml").write_text(f"[fermix_core.memory]\n{config}\n", encoding="utf-8")
    with pytest.raises(SemanticRecallUnavailable, match=r"pip install 'fermix-memory\[semantic\]'"):
        MemorySystem.open(home)
    assert not (home / "memory.db").exists()  # refused before anything was opened


@pytest.mark.parametrize("value", ["yes", "1", "on ", "hybrid"])
def test_a_wrong_value_of_the_variable_is_one_config_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    value: str) -> None:
    monkeypatch.setenv(RECALL_BY_MEANING_ENV, value)
    with pytest.raises(ConfigError, match=RECALL_BY_MEANING_ENV):
        MemorySystem.open(tmp_path / "home")


@pytest.mark.parametrize(("setting", "shown"), [('"auto"', "auto"), ("true", True), ("false", False)])
def test_the_setting_takes_auto_true_or_false(tmp_path: Path, setting: str, shown: object) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"[fermix_core.memory]\nrecall_by_meaning = {setting}\n", encoding="utf-8")
    result = fermix("setup", "show", "--json", home=home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["settings"]["memory"]["recall_by_meaning"] == shown
    assert f"recall_by_meaning = {setting}" in fermix("setup", "show", home=home).stdout


@pytest.mark.parametrize("setting", ['"yes"', "1", '"true"', "[]"])
def test_a_wrong_setting_is_one_config_error_that_says_what_it_takes(tmp_path: Path, setting: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"[fermix_core.memory]\nrecall_by_meaning = {setting}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match='true, false or "auto"'):
        MemorySystem.open(home)


def test_a_new_home_says_auto(tmp_path: Path) -> None:
    assert fermix("setup", "init", home=tmp_path / "home").returncode == 0
    assert 'recall_by_meaning = "auto"' in (tmp_path / "home" / "config.toml").read_text(encoding="utf-8")


@pytest.mark.usefixtures("recall_by_meaning_default")
def test_the_variable_wins_over_the_home_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[fermix_core.memory]\nrecall_by_meaning = true\n", encoding="utf-8")
    monkeypatch.setenv(RECALL_BY_MEANING_ENV, "false")
    with MemorySystem.open(home) as memory:
        assert not memory.recalls_by_meaning
    monkeypatch.setenv(RECALL_BY_MEANING_ENV, "")  # set but empty: the file decides
    with MemorySystem.open(home, embedder=ConceptEmbedder()) as memory:
        assert memory.recalls_by_meaning


LAZY_PROBE = """
import json, sys
from fermix_memory import MemorySystem
home, agent, owner, conv = sys.argv[1:]
seen = {}
with MemorySystem.open(home) as memory:
    seen["recalls_by_meaning"] = memory.recalls_by_meaning
    memory.memories()
    seen["model_at_open"] = "onnxruntime" in sys.modules
    hits = memory.recall("where does the user live", agent_id=agent, owner_id=owner, conversation=conv)
    seen["model_after_recall"] = "onnxruntime" in sys.modules
    seen["values"] = [h.memory.value for h in hits.memories]
print(json.dumps(seen))
"""


@needs_extra
@pytest.mark.usefixtures("recall_by_meaning_default")
def test_with_the_extra_recall_is_hybrid_by_default_and_the_model_loads_at_the_first_embed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        assert memory.recalls_by_meaning
        write_home_city(memory)
        # Both rows' vectors are stored, by the background upkeep or by this call, whichever
        # comes first: what the call stored itself is 0 to 2, and then nothing waits.
        assert 0 <= memory.fill_vectors() <= 2 and memory.vectors_waiting() == 0
    with store_reads(home) as store:
        assert store.select("SELECT count(*) FROM memory_vectors") == [(2,)]
    run = subprocess.run([sys.executable, "-c", LAZY_PROBE, str(home), AGENT, OWNER, CONV],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen == {"recalls_by_meaning": True, "model_at_open": False, "model_after_recall": True,
                    "values": ["Berlin"]}  # green tea is less similar than the floor: no hit


@needs_extra
def test_the_pinned_label_is_the_label_of_the_installed_model() -> None:
    loaded = load_embedder()
    assert (loaded.model, loaded.version, loaded.dimension) == (
        minilm_model.MODEL, minilm_model.VERSION, minilm_model.DIMENSION)


class CountingLoad:
    """A loader that counts its calls and hands out ``embedder`` (or raises ``error``)."""

    def __init__(self, embedder: Embedder | None = None, error: Exception | None = None) -> None:
        self.calls = 0
        self._embedder, self._error = embedder, error

    def __call__(self) -> Embedder:
        self.calls += 1
        threading.Event().wait(0.05)  # as a model takes its time: other threads come while it loads
        if self._error is not None:
            raise self._error
        assert self._embedder is not None
        return self._embedder


def lazy(load: CountingLoad, like: Embedder) -> LazyEmbedder:
    return LazyEmbedder(like.model, like.version, like.dimension, load)


def embed_in_threads(embedder: Embedder, texts: Sequence[str], count: int) -> list[object]:
    """What each of ``count`` threads, started together, got from its first embed."""
    start = threading.Barrier(count)
    results: list[object] = []

    def one() -> None:
        start.wait(10)
        try:
            results.append(embedder.embed(texts))
        except Exception as exc:  # the test compares what each thread got
            results.append(exc)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return results


def test_the_lazy_embedder_loads_once_however_many_threads_embed_at_first() -> None:
    real = ConceptEmbedder()
    load = CountingLoad(real)
    embedder = lazy(load, real)
    assert not embedder.loaded and load.calls == 0  # its label is known before anything loads
    results = embed_in_threads(embedder, ["where do you live", "Berlin"], 6)
    assert load.calls == 1 and embedder.loaded
    assert results == [real.embed(["where do you live", "Berlin"])] * 6


def test_a_lazy_load_that_fails_is_the_same_typed_error_every_time_without_loading_again() -> None:
    real = ConceptEmbedder()
    load = CountingLoad(error=SemanticRecallUnavailable("the model cannot be loaded"))
    embedder = lazy(load, real)
    for _ in range(3):
        with pytest.raises(SemanticRecallUnavailable, match="cannot be loaded"):
            embedder.embed(["x"])
    assert load.calls == 1


def test_a_lazily_loaded_model_that_is_not_the_pinned_one_is_refused() -> None:
    real = ConceptEmbedder()
    load = CountingLoad(real)
    pinned = LazyEmbedder(real.model, "another-version", real.dimension, load)
    with pytest.raises(SemanticRecallUnavailable, match="not the pinned"):
        pinned.embed(["x"])


def test_a_model_that_fails_to_load_leaves_texts_queued_says_so_once_and_recall_by_words_works(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    real = ConceptEmbedder()
    load = CountingLoad(error=SemanticRecallUnavailable("the embedding model cannot be loaded (damaged)"))
    with MemorySystem.open(tmp_path / "home", embedder=lazy(load, real)) as memory:
        write_home_city(memory)
        with caplog.at_level("WARNING", logger="fermix_memory"):
            assert memory.fill_vectors() == 0
            assert memory.fill_vectors() == 0
        assert [r.getMessage() for r in caplog.records if "no vectors are made" in r.getMessage()] == [
            "no vectors are made: the embedding model cannot be loaded (damaged)"]
        assert memory.verify().vectors_waiting == 2
        with pytest.raises(SemanticRecallUnavailable, match="damaged"):
            memory.recall("where does the user live", **ASK)  # type: ignore[arg-type]
        assert [h.memory.value for h in memory.recall("home city", mode="keyword", **ASK).memories] == [  # type: ignore[arg-type]
            "Berlin"]
    assert load.calls == 1
