"""Use case: give every message and memory row its vector, in the background (ADR-0043).

The write that adds or changes a text only queues it (the store's triggers, in the same
transaction); after such a commit this upkeep is queued on the background worker (once, however
many commits come before it runs). It waits for a pause in the writes, then embeds the queued
texts in batches and stores each batch in a short write of its own through the store's writer:
the append's path never waits for the model. A job embeds at most ``max_batches`` batches and
queues itself again when more is left, so other background work is not starved by an import.
At start the texts whose vectors carry another embedder's label are queued again: a changed
model re-embeds instead of mixing two spaces.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from fermix_memory.application.embedder import Embedder, label_of
from fermix_memory.application.errors import SemanticRecallUnavailable, StorageError
from fermix_memory.application.index_upkeep import MAX_WAIT_S, QUIET_S, TOLERANCE_S, JobQueue
from fermix_memory.application.query_ports import VectorIndex
from fermix_memory.application.store_ports import RecordedEvent

log = logging.getLogger("fermix_memory.storage")

BATCH = 32  # the embedder pads a batch to its longest text: ADR-0042 measured 32 as its sweet spot
MAX_BATCHES = 16
KEY = ("vector-upkeep",)


class VectorUpkeep:
    """Queues :meth:`fill` on ``background`` after commits; :meth:`stop` (at close) ends a job's
    wait at once, and no batch starts after it."""

    def __init__(self, index: VectorIndex, embedder: Embedder, background: JobQueue, *, batch: int = BATCH,
                 max_batches: int = MAX_BATCHES, quiet_s: float = QUIET_S, max_wait_s: float = MAX_WAIT_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._index, self._embedder, self._background = index, embedder, background
        self.label = label_of(embedder)
        self._batch, self._max_batches = batch, max_batches
        self._quiet_s, self._max_wait_s = quiet_s, max_wait_s
        self._stopping = threading.Event()
        self._monotonic = monotonic
        self._last_write = monotonic()
        self._relabelled = False
        self._unavailable = False
        # Held while batches are embedded; set while a caller's own fill runs (background jobs yield).
        self._embedding = threading.Lock()
        self._foreground = threading.Event()

    def start(self) -> None:
        """Queue the first job: texts left waiting by an earlier run, a replay or a new model."""
        self._background.submit(KEY, self.fill)

    def stop(self) -> None:
        self._stopping.set()

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        """An after-commit reaction of the store (any commit may have queued a text)."""
        if recorded:
            self._last_write = self._monotonic()
            self._background.submit(KEY, self.fill)

    def fill_now(self) -> int:
        """Embed every text still waiting, now, on the caller's thread (after an import, before a
        search that must see everything); the vectors stored. A failure is logged as the
        background's are, and what it stored before stays."""
        done = [0]
        try:
            return self.embed_waiting(lambda stored, _total: done.__setitem__(0, stored))
        except StorageError as exc:
            log.warning("vectors were not stored (the next write tries again): %s", exc)
        except SemanticRecallUnavailable as exc:
            self._unavailable_once(exc)
        return done[0]

    def embed_waiting(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every text still waiting, now, on the caller's thread, batch after batch, each
        batch's vectors committed on their own: stopped part way (an interrupt, a failure), what
        was stored stays and the rest stays queued, so a later call goes on from there.
        ``progress(done, total)`` after each batch. A background job yields to it between its
        batches, so the two never embed the same texts. The store's and the model's errors are
        raised, typed; the vectors stored."""
        self._foreground.set()
        try:
            with self._embedding:  # a background job's batch under way ends first
                self._prepare()
                total, done = self._index.waiting(), 0
                if progress is not None:
                    progress(done, total)
                while (kept := self._next_batch()) is not None:
                    if not kept:
                        break  # what waits changes under us: the next commit's job takes it
                    done += kept
                    if progress is not None:
                        progress(done, max(total, done))
                return done
        finally:
            self._foreground.clear()

    def fill(self, *, wait: bool = True, resubmit: bool = True) -> int:
        """Wait for a pause in the writes (at most ``max_wait_s``), then embed and store queued
        texts batch by batch; the vectors stored. A failed write ends the job with one warning:
        the texts stay queued for the next job. A foreground :meth:`embed_waiting` takes over."""
        give_up = self._monotonic() + self._max_wait_s
        while wait and not self._stopping.is_set():
            left = min(self._last_write + self._quiet_s, give_up) - self._monotonic()
            if left < TOLERANCE_S:
                break
            self._stopping.wait(left)
        if not self._embedding.acquire(blocking=False):
            return 0  # a foreground fill embeds everything that waits
        stored = 0
        try:
            if not self._stopping.is_set():
                self._prepare()
            for _ in range(self._max_batches):
                if self._stopping.is_set() or self._foreground.is_set():
                    return stored
                kept = self._next_batch()
                if not kept:
                    return stored  # nothing waits, or every text changed meanwhile (its commit queues a job)
                stored += kept
        except StorageError as exc:
            log.warning("vectors were not stored (the next write tries again): %s", exc)
            return stored
        except SemanticRecallUnavailable as exc:  # a damaged extra: texts stay queued, said once
            self._unavailable_once(exc)
            return stored
        finally:
            self._embedding.release()
        if resubmit and not self._stopping.is_set():
            self._background.submit(KEY, self.fill)  # more is left: a job of its own, after the others
        return stored

    def _prepare(self) -> None:
        """Queue what waits unqueued: texts of another embedder's label (once), new messages."""
        if not self._relabelled:
            self._index.queue_other_labels(self.label)
            self._relabelled = True
        self._index.queue_new()

    def _next_batch(self) -> int | None:
        """Embed and store the next batch of queued texts: how many were kept, ``None`` when
        nothing waits."""
        items = self._index.queued(self._batch)
        if not items:
            return None
        vectors = self._embedder.embed([item.text for item in items])
        return self._index.store_vectors(self.label, items, vectors)

    def _unavailable_once(self, exc: SemanticRecallUnavailable) -> None:
        if not self._unavailable:
            self._unavailable = True
            log.warning("no vectors are made: %s", exc)
