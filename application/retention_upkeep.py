"""Use case: the retention policies applied by the background upkeep (ADR-0080).

A writable memory looks for what the policies (and rows' own expiry) make due a little after it
opens (:data:`~fermix_memory.application.index_upkeep.OPEN_DELAY_S`, so a short command of the
CLI has closed by then) and every ``check_every_s`` after: each look is one ``retention`` job on
the background worker, which runs a retention run when something is due. Never on a turn's path;
closing stops it (a run in progress is let finish, as every background job is).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from fermix_memory.application.index_upkeep import OPEN_DELAY_S
from fermix_memory.application.ports import Clock
from fermix_memory.application.retention import Retention, RetentionReport
from fermix_memory.domain.errors import FermixError

log = logging.getLogger("fermix_memory")

JOB_KEY = ("retention",)


class JobQueue(Protocol):
    """Where the looks go (``BackgroundWorker``): a key already queued is not queued twice."""

    def submit(self, key: Any, job: Callable[[], Any]) -> Any: ...


class RetentionUpkeep:
    """Queues one ``retention`` job ``delay_s`` after :meth:`start`, then every ``every_s``;
    :meth:`stop` (at close) ends it: no look is queued after it."""

    def __init__(self, retention: Retention, background: JobQueue, clock: Clock, every_s: float) -> None:
        self._retention, self._background, self._clock = retention, background, clock
        self._every_s = every_s
        self._lock = threading.Lock()
        self._stopped = False
        self._timer: threading.Timer | None = None

    def start(self, delay_s: float | None = None) -> None:
        self._arm(OPEN_DELAY_S if delay_s is None else delay_s)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()

    def _arm(self, delay_s: float) -> None:
        with self._lock:
            if self._stopped:
                return
            self._timer = threading.Timer(delay_s, self._look)
            self._timer.daemon = True
            self._timer.start()

    def _look(self) -> None:
        with self._lock:
            if self._stopped:
                return
        self._background.submit(JOB_KEY, self.run_due)
        self._arm(self._every_s)

    def run_due(self) -> RetentionReport | None:
        """The job: a retention run when something is due now (``None``: nothing was). A failing
        store is logged; the next look tries again."""
        if self._stopped:
            return None
        now = self._clock.now()
        try:
            if not self._retention.due_now(now):
                return None
            report = self._retention.run(now)
        except FermixError as exc:
            log.warning("the retention run did not finish (the next look tries again): %s", exc)
            return None
        if report.items:
            log.info("retention erased %d item(s) under %s", len(report.items), ", ".join(report.policies))
        return report
