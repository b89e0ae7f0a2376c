"""One write transaction on ``memory.db``: appends to the hash-chained log (with expected
stream versions) and the typed state loaders the use cases decide with, as of the transaction."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from fermix_memory.adapters.sqlite.codec import decode_payload, encode_payload, isoformat
from fermix_memory.adapters.sqlite.projections import project, project_each
from fermix_memory.adapters.sqlite.queries import AGENT_OWNERS_SQL, AGENT_RULES_SQL
from fermix_memory.adapters.sqlite.rows import (
    MEMORY_COLUMNS,
    REVIEW_STATE_SQL,
    memory_from_row,
    review_state_from_row,
    review_state_key,
)
from fermix_memory.application.errors import ConcurrencyConflict, IntegrityError
from fermix_memory.application.ports import BULK_EVENTS, RecordedEvent, ReviewState, StreamEvents
from fermix_memory.application.streams import chain_for, memory_stream, resource_stream, review_stream
from fermix_memory.domain.event_base import DomainEvent
from fermix_memory.domain.log_chain import GENESIS_HASH, MAX_CHAINS, Head, LoggedEvent, follows, head_of
from fermix_memory.domain.log_chain import chain_hash as chain_hash  # re-exported: moved to the domain
from fermix_memory.domain.log_chain import payload_digest as payload_digest
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import ConversationKey, Scope

INSERT_EVENT = (
    "INSERT INTO events(position, stream, version, kind, schema, recorded_at, payload,"
    " payload_sha256, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)"
)
# The page cache of the writer while a transaction appends many events at once (an import):
# the log's and the projections' indexes take each batch's rows at places spread over the whole
# file, and with SQLite's default cache (2 MB) the pages a batch changed are spilled to the WAL and
# read back several times within the transaction (an ``append_each`` of ``BULK_EVENTS`` or more).
# Given back when the transaction commits.
BULK_CACHE_KIB = 65_536
# The cache size the writer is given back (SQLite's default, which the connection keeps).
DEFAULT_CACHE_KIB = 2_000

# Every column of the log, in log order: what the chain check walks, a replay and an export copy.
LOG_ROWS = (
    "SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash, hash"
    " FROM events WHERE position > ? ORDER BY position"
)


def insert_row(cursor: apsw.Cursor, row: tuple[Any, ...]) -> None:
    """Insert one log row recorded elsewhere (the columns of :data:`LOG_ROWS`) as it is, and
    write its projections as a live append does (nothing for a redacted payload)."""
    cursor.execute(INSERT_EVENT, row)
    position, kind, schema, payload = row[0], row[3], row[4], row[6]
    if payload is not None:
        project(cursor, position, decode_payload(kind, schema, payload))


def append_logged_rows(cursor: apsw.Cursor, position: int, heads: list[tuple[int, str]],
                       events: Sequence[LoggedEvent]) -> int:
    """Append rows of another log after the log's last ``position`` and its chains' ``heads``
    (``(position, hash)`` per chain, updated in place), as they are, with their projections; the
    new last position. A row that does not follow the log (:class:`ConcurrencyConflict`) or does
    not link to its chain or match its digest (:class:`IntegrityError`) is refused before it is
    written: the caller's transaction then appends nothing. Every store runs its copy through here."""
    chains = len(heads)
    for e in events:
        if not follows(e.position, position, chains):
            raise ConcurrencyConflict(f"event {e.position} does not follow this log's head"
                                      f" {position}: nothing was appended")
        chain = chain_for(e.stream, chains)
        last_hash = heads[chain][1]
        expected = chain_hash(last_hash, e.position, e.stream, e.version, e.kind, e.schema, e.recorded_at,
                              e.payload_sha256)
        if expected != e.hash or (e.payload is not None and payload_digest(e.payload) != e.payload_sha256):
            raise IntegrityError(f"event {e.position} ({e.kind}) does not link to this log's"
                                 f" event {heads[chain][0]}: nothing was appended")
        insert_row(cursor, row_of(e, last_hash))
        position, heads[chain] = e.position, (e.position, e.hash)
    return position


def read_chain_heads(cursor: Any) -> list[tuple[int, str]]:
    """Each chain's head ``(position, hash)`` in chain order: the ``chain_heads`` rows of a log
    with several chains, else the last event (one chain)."""
    rows = cursor.execute("SELECT position, hash FROM chain_heads ORDER BY chain").fetchall()
    if rows:
        return [(int(p), str(h)) for p, h in rows]
    last = cursor.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchall()
    return [(int(last[0][0]), str(last[0][1]))] if last else [(0, GENESIS_HASH)]


def write_chain_heads(cursor: Any, heads: Mapping[int, tuple[int, str]] | Sequence[tuple[int, str]],
                      chains: Iterable[int]) -> None:
    """Record the heads of ``chains`` in ``chain_heads``."""
    for chain in sorted(chains):
        cursor.execute("UPDATE chain_heads SET position = ?, hash = ? WHERE chain = ?", (*heads[chain], chain))


def chain_count(cursor: Any) -> int:
    """How many chains the log has (no ``chain_heads`` rows: one)."""
    return max(1, int(cursor.execute("SELECT count(*) FROM chain_heads").fetchall()[0][0]))


def set_chain_count(cursor: Any, chains: int) -> None:
    """Give an empty log ``chains`` chains (one: no ``chain_heads`` rows); a log holding events
    keeps its own (:class:`IntegrityError`, nothing changed)."""
    if type(chains) is not int or not 1 <= chains <= MAX_CHAINS:
        raise IntegrityError(f"a log has 1 to {MAX_CHAINS} chains, not {chains!r}")
    if chains == chain_count(cursor):
        return
    if last_position(cursor):
        raise IntegrityError(f"this log holds events on {chain_count(cursor)} chain(s); it cannot take {chains}:"
                             " only an empty log can")
    cursor.execute("DELETE FROM chain_heads")
    if chains > 1:
        for chain in range(chains):
            cursor.execute("INSERT INTO chain_heads(chain, position, hash) VALUES (?, 0, ?)", (chain, GENESIS_HASH))


def last_position(cursor: Any) -> int:
    return int(cursor.execute("SELECT coalesce(max(position), 0) FROM events").fetchall()[0][0])


def logged_from_row(row: tuple[Any, ...]) -> LoggedEvent:
    """A :data:`LOG_ROWS` row as a :class:`LoggedEvent` (its ``prev_hash`` is the row before's hash)."""
    position, stream, version, kind, schema, recorded_at, payload, digest, _, row_hash = row
    return LoggedEvent(position=position, stream=stream, version=version, kind=kind, schema=schema,
                       recorded_at=recorded_at, payload=payload, payload_sha256=digest, hash=row_hash)


def row_of(e: LoggedEvent, prev_hash: str) -> tuple[Any, ...]:
    return (e.position, e.stream, e.version, e.kind, e.schema, e.recorded_at, e.payload, e.payload_sha256,
            prev_hash, e.hash)


def read_log(cursor: apsw.Cursor, after: int = 0, stream: str | None = None) -> Iterator[RecordedEvent]:
    """Decoded events after ``after`` (of one stream when given); redacted ones are skipped."""
    if stream is None:
        rows = cursor.execute(
            "SELECT position, stream, version, kind, schema, payload FROM events WHERE position > ? ORDER BY position",
            (after,),
        )
    else:
        rows = cursor.execute(
            "SELECT position, stream, version, kind, schema, payload FROM events"
            " WHERE stream = ? AND position > ? ORDER BY version",
            (stream, after),
        )
    for row in rows:
        if row[5] is not None:  # redacted: the digest stays in the chain, the content is gone
            yield recorded_from_row(row)


def recorded_from_row(row: tuple[Any, ...]) -> RecordedEvent:
    """A ``(position, stream, version, kind, schema, payload)`` row of a readable event."""
    position, stream, version, kind, schema, payload = row
    return RecordedEvent(position=position, stream=stream, version=version, event=decode_payload(kind, schema, payload))


# How many streams' versions a writer keeps between its transactions (beyond: it starts anew).
KNOWN_STREAMS = 4096


@dataclass(slots=True)
class Known:
    """What the one writer knows of the log after its last commit: valid while the database's
    data version (``apsw.Connection.data_version``, which any other connection's commit changes,
    and any write of this one outside a transaction of the writer's own) is still ``data_version``."""

    data_version: int
    position: int
    hash: str
    heads: dict[int, tuple[int, str]]
    versions: dict[str, int]


class SqliteTransaction:
    """The :class:`WriteTransaction` handed to use cases inside one write.

    ``chains``: how many chains the log has (ADR-0031). One: the head is the log's last event and
    positions run on from it, as ever. Several: each append links to its stream's chain, whose
    head is kept in ``chain_heads`` (read once per transaction, written back by :meth:`finish`).

    ``known``: what the writer knew after its last commit, when nothing wrote since (the head and
    stream versions are then not read again)."""

    def __init__(self, cursor: apsw.Cursor, chains: int = 1, *, known: Known | None = None) -> None:
        self.cursor = cursor
        self.chains = chains
        self.recorded: list[RecordedEvent] = []
        self.touched: set[int] = set()
        self.versions: dict[str, int] = {} if known is None else known.versions
        # The chains this transaction read or extended.
        self.heads: dict[int, tuple[int, str]] = {} if known is None else dict(known.heads)
        self.position, self.hash = self._start() if known is None else (known.position, known.hash)
        self.bulk = False  # the page cache was widened for many appends (see :meth:`finish`)

    def known(self, data_version: int) -> Known:
        """What the next transaction of the same writer may start from once this one committed
        (``data_version``: the database's as of the commit)."""
        versions = self.versions if len(self.versions) <= KNOWN_STREAMS else {}
        return Known(data_version, self.position, self.hash, self.heads, versions)

    def _start(self) -> tuple[int, str]:
        """The log's last position and hash as the transaction begins (one chain: its head)."""
        row = self.cursor.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchall()
        position: int = int(row[0][0]) if row else 0  # type: ignore[arg-type]
        last_hash = str(row[0][1]) if row else GENESIS_HASH
        if self.chains == 1:
            self.heads[0] = (position, last_hash)
        return position, last_hash

    def _chain_head(self, chain: int) -> tuple[int, str]:
        """The head of ``chain`` as this transaction sees it (read from ``chain_heads`` once)."""
        head = self.heads.get(chain)
        if head is None:
            rows = self.cursor.execute("SELECT position, hash FROM chain_heads WHERE chain = ?", (chain,)).fetchall()
            head = self.heads[chain] = (int(rows[0][0]), str(rows[0][1])) if rows else (0, GENESIS_HASH)  # type: ignore[arg-type]
        return head

    def _positions(self, chain: int, count: int) -> list[int]:
        """Positions for ``count`` new events of ``chain``: the log's next ones (one writer)."""
        return list(range(self.position + 1, self.position + count + 1))

    def enter(self, stream: str) -> bool:
        """Before reading what decides an append to ``stream``: a store with concurrent writers
        makes sure no other write of the same chain runs meanwhile; whether that was new to this
        transaction (one writer here: nothing to do)."""
        return False

    def finish(self) -> None:
        """Before COMMIT: record the new heads of the chains this transaction extended."""
        if self.chains > 1:
            write_chain_heads(self.cursor, self.heads, self.touched)
        if self.bulk:
            self._cache_kib(DEFAULT_CACHE_KIB)

    def _cache_kib(self, kib: int) -> None:
        """Bound the writer connection's page cache (a negative ``cache_size`` is in KiB); the
        pages above the bound are given back as the commit releases them."""
        self.cursor.execute(f"PRAGMA cache_size = {-kib}")

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
            row = self.cursor.execute(
                "SELECT max(version) FROM events WHERE stream = ?", (stream,)
            ).fetchall()
            version = self.versions[stream] = int(row[0][0] or 0)
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
            project(self.cursor, position, event)
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
        if len(appends) >= BULK_EVENTS and not self.bulk:
            self.bulk = True
            self._cache_kib(BULK_CACHE_KIB)
        chains = {stream: chain_for(stream, self.chains) for stream, _ in appends}
        for stream in sorted(chains, key=chains.__getitem__):
            self.enter(stream)
        positions = self._positions(chains[appends[0][0]], len(appends))
        rows = []
        for (stream, event), position in zip(appends, positions, strict=True):
            chain = chains[stream]
            _, last_hash = self._chain_head(chain)
            rows.append(row := self._logged_row(stream, event, position, last_hash))
            self.heads[chain] = (position, row[-1])
            self.touched.add(chain)
        self._insert_events(rows)
        project_each(self.cursor, [(position, event) for position, (_, event) in zip(positions, appends, strict=True)])
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
        """Whether the driver's error is the clash on ``UNIQUE(stream, version)`` (each store's own)."""
        return isinstance(exc, apsw.ConstraintError) and "events.stream, events.version" in str(exc)

    # --- reads inside the transaction (RowLookup and friends) -------------------------------

    def by_id(self, memory_id: int) -> Memory | None:
        rows = self.cursor.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        ).fetchall()
        found = memory_from_row(rows[0]) if rows else None
        if found is not None and self.enter(memory_stream(found.agent_id, found.owner_id)):
            return self.by_id(memory_id)  # read again now that no other write of its chain runs
        return found

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
        self.enter(memory_stream(agent_id, owner_id))
        rows = self.cursor.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? AND owner_id = ? AND scope_type = ?"
            " AND scope_id = ? AND key = ?",
            (agent_id, owner_id, scope.type.value, scope.id, key),
        ).fetchall()
        return memory_from_row(rows[0]) if rows else None

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
        return (int(rows[0][0]), str(rows[0][1])) if rows else None  # type: ignore[arg-type]

    def read_events(self, after: int = 0, *, stream: str | None = None) -> list[RecordedEvent]:
        """The log as this transaction sees it (its own appends included)."""
        if stream is not None:
            self.enter(stream)
        return list(read_log(self.cursor.connection.cursor(), after, stream))

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
