"""The audit of one home's log (head, verify, replay, the log itself), wired over its store.

The embedding API and the CLI reach the audit through this one object: :class:`App` holds it,
never the store adapter itself. On the PostgreSQL store the same checks run over the server's
log (``adapters/postgres/audit.py``, ADR-0029), folded into a SQLite replica wired here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_memory.adapters.sql import audit
from fermix_memory.adapters.sql.erasure_log import SqlErasureLog
from fermix_memory.adapters.sql.head import Head
from fermix_memory.adapters.sqlite.audit import SqliteReplica, replay_into, verify_database
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.application.store_ports import RecordedEvent

if TYPE_CHECKING:  # the PostgreSQL extra is optional: imported when a PostgreSQL store is audited
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore


class LogAudit:
    """Read-only checks of the hash-chained log; nothing here writes the log."""

    def __init__(self, store: SqliteEventStore | PostgresEventStore) -> None:
        self._store = store

    def head(self) -> Head:
        return self._store.head()

    def verify(self, progress: audit.Progress | None, expect_head: Head | None) -> audit.VerifyReport:
        """The chain, the indexes and replay, against ``expect_head`` and this home's last-seen head."""
        store = self._store
        anchors = [("expected head", expect_head)] if expect_head is not None else []
        anchors += [("this home's last-seen head", head) for head in [store.home_anchor()] if head is not None]
        if isinstance(store, SqliteEventStore):
            return verify_database(store.path, progress, anchors=anchors, noted=store.problems_at_open(),
                                         readonly=store.readonly)
        from fermix_memory.adapters.postgres.audit import verify_postgres

        return verify_postgres(store, SqliteReplica, progress, anchors=anchors, noted=store.problems_at_open())

    def replay_into(self, target_dir: Path, progress: audit.Progress | None) -> dict[str, Any]:
        if isinstance(self._store, SqliteEventStore):
            return replay_into(self._store.path, target_dir, progress)
        from fermix_memory.adapters.postgres.audit import replay_postgres

        return replay_postgres(self._store, target_dir, SqliteReplica.new_in, progress)

    def events(self, after: int, stream: str | None) -> Iterator[RecordedEvent]:
        return self._store.read_events(after, stream=stream)

    def log_entries(self, after: int, kind: str | None) -> Iterator[audit.LogEntry]:
        return audit.log_entries(self._store.reader(), after=after, kind=kind)

    def erasure_log(self) -> SqlErasureLog:
        """What the log keeps of erased rows (the as-of answers' erased rows, ADR-0083)."""
        return SqlErasureLog(self._store.reader)
