"""One write transaction on a SQL store: appends to the hash-chained log (with expected stream
versions) and the typed state loaders the use cases decide with, as of the transaction.

The statements are the same on every dialect; what a dialect decides is how writers share the
log: where a transaction starts (:meth:`SqlTransaction._start`), how it keeps other writes of a
chain out (:meth:`SqlTransaction.enter`), where new positions come from, what it records before
COMMIT (:meth:`SqlTransaction.finish`), and which driver error is a clash of stream versions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fermix_memory.adapters.sql.codec import encode_payload, isoformat
from fermix_memory.adapters.sql.cursor import SqlCursor
from fermix_memory.adapters.sql.event_log import INSERT_EVENT, read_chain_heads, read_log
from fermix_memory.adapters.sql.projections import project, project_each
from fermix_memory.adapters.sql.queries import AGENT_OWNERS_SQL, AGENT_RULES_SQL, WINDOW_TAIL_SQL
from fermix_memory.adapters.sql.rows import (
    MEMORY_COLUMNS,
    REVIEW_STATE_SQL,
    memory_from_row,
    review_state_from_row,
    review_state_key,
    shown_rows_sql,
)
from fermix_memory.application.errors import ConcurrencyConflict
from fermix_memory.application.store_ports import BULK_EVENTS, RecordedEvent, ReviewState, StreamEvents
from fermix_memory.application.stored_messages import message_of, stored_row
from fermix_memory.application.streams import (
    chain_for,
    conversation_stream,
    memory_stream,
    resource_stream,
    review_stream,
)
from fermix_memory.domain.checkpoint import is_checkpoint_shape
from fermix_memory.domain.event_base import DomainEvent
from fermix_memory.domain.log_chain import Head, chain_hash, head_of, payload_digest
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Scope, ScopeType

# A row by its key, one statement per scope type: the type written out (one of ScopeType's few
# values), not bound, since SQLite prepares a statement again at each run whose bound value could
# decide a partial index's use.
# A stream's last version. Not ``max(version)``: a plan made for no value in particular (the one
# PostgreSQL keeps for a prepared statement) aggregates every version of the stream, one heap
# visit each, where this one reads the index's last entry of it, whatever the table held when it
# was planned (ADR-0098).
STREAM_VERSION_SQL = "SELECT version FROM events WHERE stream = ? ORDER BY version DESC LIMIT 1"
_BY_KEY_SQL = {kind: f"SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? AND owner_id = ?"
                     f" AND scope_type = '{kind.value}' AND scope_id = ? AND key = ?" for kind in ScopeType}


class SqlTransaction:
    """The :class:`WriteTransaction` handed to use cases inside one write, on any SQL dialect.

    ``chains``: how many chains the log has (ADR-0031). One: the head is the log's last event and
    positions run on from it. Several: each append links to its stream's chain, whose head is
    kept in ``chain_heads`` (read once per transaction, written back by :meth:`finish`)."""

    # Whether an appended message's marks are written with it (else a catch-up writes them: ADR-0085).
    MARKS_INLINE = True

    def __init__(self, cursor: SqlCursor, chains: int = 1) -> None:
        self.cursor = cursor
        self.chains = chains
        self.recorded: list[RecordedEvent] = []
        self.touched: set[int] = set()
        self.versions: dict[str, int] = {}
        # The chains this transaction read or extended.
        self.heads: dict[int, tuple[int, str]] = {}
        self._first_reads: dict[int, Memory] = {}  # each row as first read, before this transaction changed it
        self.position, self.hash = self._start()

    # --- what each dialect decides --------------------------------------------------------------

    def _start(self) -> tuple[int, str]:
        """The log's last position and hash as the transaction begins (and any head it took)."""
        raise NotImplementedError

    def enter(self, stream: str) -> bool:
        """Before reading what decides an append to ``stream``: a store with concurrent writers
        makes sure no other write of the same chain runs meanwhile; whether that was new to this
        transaction (a store with one writer: nothing to do)."""
        raise NotImplementedError

    def _chain_head(self, chain: int) -> tuple[int, str]:
        """The head of ``chain`` as this transaction sees it."""
        raise NotImplementedError

    def _positions(self, chain: int, count: int) -> list[int]:
        """Positions for ``count`` new events of ``chain``."""
        raise NotImplementedError

    def finish(self) -> None:
        """Before COMMIT: record the new heads of the chains this transaction extended."""
        raise NotImplementedError

    def _many_appends(self) -> None:
        """One call appends :data:`BULK_EVENTS` or more events (an import): room for them, where
        the dialect keeps its own (nothing by default)."""

    # --- the log ---------------------------------------------------------------------------------

    def log_head(self) -> Head:
        """The log's head once this transaction committed (several chains: read from ``chain_heads``)."""
        if self.chains == 1:
            return Head(*self.heads[0])
        return head_of(read_chain_heads(self.cursor))

    def stream_version(self, stream: str) -> int:
        """How many events were appended to ``stream`` (redacted ones included)."""
        version = self.versions.get(stream)
        if version is None:
            self.enter(stream)
            rows = self.cursor.execute(STREAM_VERSION_SQL, (stream,)).fetchall()
            version = self.versions[stream] = int(rows[0][0]) if rows else 0
        return version

    def append(self, stream: str, events: Sequence[DomainEvent], *,
               expected_version: int | None = None) -> list[int]:
        if not events and expected_version is None:
            return []
        chain = chain_for(stream, self.chains)
        self.enter(stream)
        _, last_hash = self._chain_head(chain)
        if expected_version is not None and self.stream_version(stream) != expected_version:
            raise ConcurrencyConflict(f"stream {stream!r} is at version {self.stream_version(stream)},"
                                      f" not {expected_version}: nothing was appended")
        if not events:
            return []
        positions = self._positions(chain, len(events))
        for event, position in zip(events, positions, strict=True):
            row = self._logged_row(stream, event, position, last_hash)
            self._insert_event(row)
            project(self.cursor, position, event, marks=self.MARKS_INLINE)
            last_hash = row[-1]
        self.heads[chain] = (positions[-1], last_hash)
        self.touched.add(chain)
        if positions[-1] > self.position:
            self.position, self.hash = positions[-1], last_hash
        return positions

    def append_each(self, appends: Sequence[tuple[str, DomainEvent]]) -> list[int]:
        """Append one event to each stream named, in order: the log rows, chain hashes and
        projections that :meth:`append` of each one after the other records, written with one
        statement per table; returns their positions. The streams are entered in chain order
        first (each chain's lock taken once, in order, on a store with concurrent writers)."""
        if not appends:
            return []
        if len(appends) >= BULK_EVENTS:
            self._many_appends()
        chains = {stream: chain_for(stream, self.chains) for stream, _ in appends}
        for stream in sorted(chains, key=chains.__getitem__):
            self.enter(stream)
        positions = self._positions(chains[appends[0][0]], len(appends))
        rows = []
        ends: dict[int, tuple[int, str]] = {}  # each chain's last event of the call so far
        for (stream, event), position in zip(appends, positions, strict=True):
            chain = chains[stream]
            head = ends.get(chain)
            rows.append(row := self._logged_row(stream, event, position,
                                                (head or self._chain_head(chain))[1]))
            ends[chain] = (position, row[-1])
        self.heads.update(ends)
        self.touched.update(ends)
        self._insert_events(rows)
        project_each(self.cursor, [(position, event) for position, (_, event) in zip(positions, appends, strict=True)],
                     marks=self.MARKS_INLINE)
        if positions[-1] > self.position:
            self.position, self.hash = positions[-1], rows[-1][-1]
        return positions

    def _logged_row(self, stream: str, event: DomainEvent, position: int, last_hash: str) -> tuple[Any, ...]:
        """The ``events`` row of ``event`` appended at ``position`` after ``last_hash`` (its hash
        last), counted in the stream's version and in what this transaction recorded."""
        payload = encode_payload(event)
        digest = payload_digest(payload)
        known = self.versions.get(stream)  # the stream's version, read once per transaction
        version = self.versions[stream] = (self.stream_version(stream) if known is None else known) + 1
        recorded_at = isoformat(event.at)  # formatted once for the events of one decision (the codec's)
        new_hash = chain_hash(last_hash, position, stream, version, event.kind, event.schema, recorded_at, digest)
        self.recorded.append(RecordedEvent(position=position, stream=stream, version=version, event=event))
        return (position, stream, version, event.kind, event.schema, recorded_at, payload, digest, last_hash, new_hash)

    def _insert_events(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``events`` rows by one statement; a clash on ``UNIQUE(stream, version)`` is a
        ``ConcurrencyConflict``."""
        try:
            self.cursor.executemany(INSERT_EVENT, rows)
        except Exception as exc:
            if not self._version_clash(exc):
                raise
            raise ConcurrencyConflict("a stream already has one of the versions appended: nothing was appended"
                                      ) from None

    def _insert_event(self, row: tuple[Any, ...]) -> None:
        """Insert one ``events`` row; a clash on ``UNIQUE(stream, version)`` is a ``ConcurrencyConflict``."""
        try:
            self.cursor.execute(INSERT_EVENT, row)
        except Exception as exc:
            if not self._version_clash(exc):
                raise  # not the version: a failed write (StorageError), never a conflict to retry
            # UNIQUE(stream, version): someone appended first.
            raise ConcurrencyConflict(f"stream {row[1]!r} already has version {row[2]}: nothing was appended"
                                      ) from None

    @staticmethod
    def _version_clash(exc: Exception) -> bool:
        """Whether the driver's error is the clash on ``UNIQUE(stream, version)`` (each dialect's own)."""
        raise NotImplementedError

    # --- reads inside the transaction (RowLookup and friends) -------------------------------

    def by_id(self, memory_id: int) -> Memory | None:
        rows = self.cursor.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        ).fetchall()
        found = memory_from_row(rows[0]) if rows else None
        if found is not None and self.enter(memory_stream(found.agent_id, found.owner_id)):
            return self.by_id(memory_id)  # read again now that no other write of its chain runs
        if found is not None:
            self._first_reads.setdefault(found.id, found)
        return found

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
        self.enter(memory_stream(agent_id, owner_id))
        rows = self.cursor.execute(_BY_KEY_SQL[ScopeType(scope.type)], (agent_id, owner_id, scope.id, key)).fetchall()
        if not rows:
            return None
        row = memory_from_row(rows[0])
        self._first_reads.setdefault(row.id, row)
        return row

    def first_read(self, memory_id: int) -> Memory | None:
        return self._first_reads.get(memory_id)

    def newest_window_message(self, agent_id: str, conversation: ConversationKey) -> Message | None:
        """The window's newest message from its end, a few rows at a time (the window's own
        statement, with its checkpoint): never the whole stream folded."""
        self.enter(conversation_stream(agent_id, conversation))
        key = (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope)
        limit = 4
        while True:
            rows = self.cursor.execute(WINDOW_TAIL_SQL, (*key, *key, *key, limit)).fetchall()
            for row in rows:  # newest first, each with the window's checkpoint
                message = message_of(stored_row(row[:-1]), agent_id, conversation)
                if message.id != row[-1] and not is_checkpoint_shape(message.kind, message.sender):
                    return message
            if len(rows) < limit:
                return None
            limit *= 8

    def last_message_id(self, agent_id: str, conversation: ConversationKey) -> int:
        row = self.cursor.execute(
            "SELECT max(id) FROM messages WHERE agent_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?",
            (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope),
        ).fetchall()
        return int(row[0][0] or 0)

    def memories_of(self, agent_id: str, owner_id: str) -> list[Memory]:
        self.enter(memory_stream(agent_id, owner_id))
        rows = self.cursor.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? AND owner_id = ? AND archived_at IS NULL"
            " ORDER BY id",
            (agent_id, owner_id),
        ).fetchall()
        return [memory_from_row(r) for r in rows]

    def shown_rows(self, agent_id: str, owner_id: str,
                   sections: Sequence[tuple[PromoteTarget, Category, int]]) -> list[Memory]:
        self.enter(memory_stream(agent_id, owner_id))
        if not sections:
            return []
        sql = shown_rows_sql(tuple((target, category) for target, category, _ in sections))
        rows = self.cursor.execute(sql, [p for *_, cap in sections for p in (agent_id, owner_id, cap)]).fetchall()
        return [memory_from_row(r) for r in rows]

    def agent_rules(self, agent_id: str) -> list[Memory]:
        return [memory_from_row(r) for r in self.cursor.execute(AGENT_RULES_SQL, (agent_id,)).fetchall()]

    def agent_owners(self, agent_id: str) -> list[str]:
        return [str(r[0]) for r in self.cursor.execute(AGENT_OWNERS_SQL, {"a": agent_id}).fetchall()]

    def current_resource(self, agent_id: str, owner_id: str, name: str) -> tuple[int, str] | None:
        self.enter(resource_stream(agent_id, owner_id, name))
        rows = self.cursor.execute(
            "SELECT v.revision, v.content FROM resources r JOIN resource_revisions v ON v.agent_id = r.agent_id"
            " AND v.owner_id = r.owner_id AND v.name = r.name AND v.revision = r.current_revision"
            " WHERE r.agent_id = ? AND r.owner_id = ? AND r.name = ?",
            (agent_id, owner_id, name),
        ).fetchall()
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def read_events(self, after: int = 0, *, stream: str | None = None) -> list[RecordedEvent]:
        """The log as this transaction sees it (its own appends included)."""
        if stream is not None:
            self.enter(stream)
        return list(read_log(self.cursor, after, stream))

    def read_stream(self, stream: str) -> StreamEvents:
        return StreamEvents(version=self.stream_version(stream), events=tuple(self.read_events(stream=stream)))

    def review_state(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> ReviewState:
        self.enter(review_stream(agent_id, owner_id, conversation))
        rows = self.cursor.execute(REVIEW_STATE_SQL, review_state_key(agent_id, owner_id, conversation)).fetchall()
        return review_state_from_row(rows[0]) if rows else ReviewState()

    def last_user_message_id(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> int:
        rows = self.cursor.execute(
            "SELECT max(id) FROM messages WHERE agent_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?"
            " AND owner_id = ? AND role = 'user'",
            (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope, owner_id),
        ).fetchall()
        return int(rows[0][0] or 0)
