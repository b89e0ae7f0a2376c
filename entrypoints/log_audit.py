"""The audit of one home's log (head, verify, replay, the log itself), wired over its store.

The embedding API and the CLI reach the SQLite audit through this one object: :class:`App`
holds it, never the store adapter itself. On the PostgreSQL store the head and the events are
read; verify, replay and the log listing are not there yet and say so (ADR-0029).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fermix_memory.adapters.sqlite import audit
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.head import Head
from fermix_memory.application.errors import StorageError
from fermix_memory.application.ports import EventStore, RecordedEvent


class NotYetSupported(StorageError):
    """Something this memory's store does not do yet (named in the message); nothing was changed."""


class LogAudit:
    """Read-only checks of the hash-chained log; nothing here writes the log."""

    def __init__(self, store: SqliteEventStore | EventStore) -> None:
        self._any_store = store

    @property
    def _store(self) -> SqliteEventStore:
        if not isinstance(self._any_store, SqliteEventStore):
            raise NotYetSupported("not yet supported on PostgreSQL: verify, replay and the log listing"
                                  " (events head and events list work)")
        return self._any_store

    def head(self) -> Head:
        return self._any_store.head()  # type: ignore[return-value]  # both stores answer a Head

    def verify(self, progress: audit.Progress | None, expect_head: Head | None) -> audit.VerifyReport:
        """The chain, the indexes and replay, against ``expect_head`` and this home's last-seen head."""
        store = self._store
        anchors = [("this home's last-seen head", head) for head in [store.home_anchor()] if head is not None]
        if expect_head is not None:
            anchors.insert(0, ("expected head", expect_head))
        return audit.verify_database(store.path, progress, anchors=anchors, noted=store.problems_at_open(),
                                     readonly=store.readonly)

    def replay_into(self, target_dir: Path, progress: audit.Progress | None) -> dict[str, Any]:
        return audit.replay_into(self._store.path, target_dir, progress)

    def events(self, after: int, stream: str | None) -> Iterator[RecordedEvent]:
        return self._any_store.read_events(after, stream=stream)

    def log_entries(self, after: int, kind: str | None) -> Iterator[audit.LogEntry]:
        return audit.log_entries(self._store.reader(), after=after, kind=kind)
