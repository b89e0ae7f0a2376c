"""Use case: reviews queued on the background worker, and those a closing memory left unrun
(ADR-0055).

A review a turn asked for is work :meth:`BackgroundWorker.close` runs while its wait lasts; one
still queued after it is recorded (``review.skipped``, reason ``left_at_close``) instead of being
dropped unsaid. When a memory opens, :class:`ReviewsLeftAtClose` queues those reviews again,
:data:`~fermix_memory.application.index_upkeep.OPEN_DELAY_S` later: a short command of the CLI has
closed by then and leaves them recorded for a host that lives longer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.errors import StorageError
from fermix_memory.application.index_upkeep import OPEN_DELAY_S
from fermix_memory.application.reviewer import Reviewer, ReviewResult
from fermix_memory.domain.values import ConversationKey

log = logging.getLogger("fermix_memory.reviewer")


def queue_review(background: BackgroundWorker, reviewer: Reviewer, agent_id: str, owner_id: str,
                 conversation: ConversationKey, *, asked: bool = True) -> Future[ReviewResult]:
    """Queue the time-gated review of one conversation. ``asked`` (after a turn): closing runs it
    while its wait lasts, else records it as left at close; otherwise (already recorded so) a
    closing memory drops it and it stays recorded."""
    on_drop: Callable[[], object] | None = None
    if asked:
        def on_drop() -> object:
            return reviewer.left_at_close(agent_id, owner_id, conversation)
    return background.submit(("review", agent_id, owner_id, conversation),
                             lambda: reviewer.review(agent_id, owner_id, conversation), on_drop=on_drop)


class LeftReviews(Protocol):
    def reviews_left_at_close(self) -> list[tuple[str, str, ConversationKey]]: ...


class ReviewsLeftAtClose:
    """Queues, once, ``delay_s`` after :meth:`start`, the reviews closing memories left unrun;
    :meth:`stop` (at close) cancels it if it has not come yet."""

    def __init__(self, reviewer: Reviewer, queries: LeftReviews, background: BackgroundWorker) -> None:
        self._reviewer, self._queries, self._background = reviewer, queries, background
        self._timer: threading.Timer | None = None

    def start(self, delay_s: float | None = None) -> None:
        self._timer = threading.Timer(OPEN_DELAY_S if delay_s is None else delay_s, self.queue)
        self._timer.daemon = True
        self._timer.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def queue(self) -> int:
        """Queue every review left at close; how many."""
        try:
            left = self._queries.reviews_left_at_close()
        except StorageError as exc:  # a failing or closing store: they stay recorded for a later opening
            log.warning("the reviews left at close were not read (they run after a later opening): %s", exc)
            return 0
        for agent_id, owner_id, conversation in left:
            queue_review(self._background, self._reviewer, agent_id, owner_id, conversation, asked=False)
        if left:
            log.info("%d review(s) left unrun by a closing memory queued again", len(left))
        return len(left)
