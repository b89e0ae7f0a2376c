"""Wiring of the retention policies (ADR-0080): the use case over a store, and the background
upkeep a writable memory starts."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.forget import Forgetting, OwnerFiles
from fermix_memory.application.ports import Clock
from fermix_memory.application.retention import Retention
from fermix_memory.application.retention_upkeep import RetentionUpkeep
from fermix_memory.application.settings import Settings

if TYPE_CHECKING:
    from fermix_memory.entrypoints.storage import Storage


def retention_candidates(store: Any) -> Any:
    """The store's reads of what retention may erase (one SQL for both stores)."""
    from fermix_memory.adapters.sql.retention_candidates import SqlRetentionCandidates
    from fermix_memory.adapters.sqlite.event_store import SqliteEventStore

    if isinstance(store, SqliteEventStore):
        from fermix_memory.adapters.sqlite.queries import sqlite_reading

        return SqlRetentionCandidates(store.reader, sqlite_reading, expiring=True)
    return SqlRetentionCandidates(store.reader, expiring=True)


def wire_retention(storage: Storage, settings: Settings, files: OwnerFiles, forgetting: Forgetting) -> Retention:
    """The retention use case, followed up as every forget is (the same follow-up)."""
    return Retention(storage.store, storage.erasure, retention_candidates(storage.store), files,
                     settings.retention.policies, follow_up=FollowUpOf(forgetting))


class FollowUpOf:
    """``forgetting``'s follow-up, as it is when an erasure is followed up (it may be wired later)."""

    def __init__(self, forgetting: Forgetting) -> None:
        self._forgetting = forgetting

    def erased(self, records: Sequence[int], head_before: str) -> int | None:
        follow_up = self._forgetting.follow_up
        return None if follow_up is None else follow_up.erased(records, head_before)


def start_retention(retention: Retention, settings: Settings, background: BackgroundWorker, clock: Clock,
                    opened: ExitStack) -> RetentionUpkeep | None:
    """Start the background looks (none when ``check_every_s`` is 0); stopped by ``opened``."""
    if settings.retention.check_every_s <= 0:
        return None
    upkeep = RetentionUpkeep(retention, background, clock, settings.retention.check_every_s)
    opened.callback(upkeep.stop)  # before the worker's close, which waits for a running job
    upkeep.start()
    return upkeep
