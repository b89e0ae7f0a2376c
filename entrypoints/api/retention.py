"""The retention policies through the embedding API (ADR-0080): what is due and when, and a run."""

from __future__ import annotations

from fermix_memory.application.errors import ReadOnlyStore
from fermix_memory.application.host_input import check_flag
from fermix_memory.application.retention import Retention, RetentionReport, RetentionStatus
from fermix_memory.entrypoints.api.base import ApiBase


class RetentionApi(ApiBase):
    def _retention(self) -> Retention:
        self._check_open()
        retention = self._app.retention
        if retention is None:  # every bootstrap wires it; a hand-built app may not
            raise ReadOnlyStore("this memory has no retention policies wired")
        return retention

    def retention_status(self) -> RetentionStatus:
        """Per ``[[fermix_core.retention.policy]]`` (and ``expires_at``, rows' own expiry, last):
        how many conversations and rows are due now, when the next falls due, and when a run
        last erased under it. Reads only."""
        retention = self._retention()
        return retention.status(self._app.clock.now())

    def run_retention(self, dry_run: bool = False) -> RetentionReport:
        """Erase now what the policies make due, in one erasure (each item as ``forget`` erases it,
        one ``retention.ran`` for the run), then rewrite the store's files and sign the receipt.
        ``dry_run=True`` only lists the items a run would erase now (keys and ids, no content)."""
        retention = self._retention()
        return retention.run(self._app.clock.now(), dry_run=check_flag(dry_run, "dry_run"))
