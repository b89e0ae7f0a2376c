"""The apsw event store: hash-chained append-only log + projections in one transaction.

Writes use group commit: callers queue their work; whoever holds the writer lock runs every
queued piece of work in ONE IMMEDIATE transaction (each in its own savepoint, so one caller's
error does not undo another's), commits, and only then wakes the callers. Nothing is
acknowledged before its commit. Busy/locked databases are retried with tenacity around the
whole transaction (3 attempts), then every waiting caller gets :class:`StorageBusy`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import apsw
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from fermix_memory.adapters.sqlite.codec import decode_payload, encode_payload, encoded_text
from fermix_memory.adapters.sqlite.connection import (
    enable_wal,
    int_value,
    open_connection,
    scalar_int,
    text_value,
    translated_errors,
)
from fermix_memory.adapters.sqlite.head import GENESIS_HASH, Head, HeadFile, read_head
from fermix_memory.adapters.sqlite.projections import project
from fermix_memory.adapters.sqlite.queries import AGENT_OWNERS_SQL, AGENT_RULES_SQL
from fermix_memory.adapters.sqlite.rows import (
    MEMORY_COLUMNS,
    REVIEW_STATE_SQL,
    memory_from_row,
    review_state_from_row,
    review_state_key,
)
from fermix_memory.adapters.sqlite.schema import FTS_TABLES, check_schema, migrate, restore_triggers
from fermix_memory.application.errors import ReadOnlyStore, StorageBusy, StorageError
from fermix_memory.application.ports import RecordedEvent, ReviewState, ScrubReport
from fermix_memory.domain.events import DomainEvent
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import ConversationKey, Scope

log = logging.getLogger("fermix_memory.storage")

T = TypeVar("T")
WRITE_ATTEMPTS = 3
GATHER_S = 0.001


def payload_digest(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chain_hash(
    prev_hash: str,
    position: int,
    stream: str,
    version: int,
    kind: str,
    schema: int,
    recorded_at: str,
    digest: str,
) -> str:
    """The hash of one log row: it covers the previous hash and the payload's digest (not the
    payload itself), so a payload can be redacted without breaking the chain."""
    material = "\n".join(
        (prev_hash, str(position), stream, str(version), kind, str(schema), recorded_at, digest)
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


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
    for position, stream_name, version, kind, schema, payload in rows:
        if payload is None:
            continue  # redacted: the digest stays in the chain, the content is gone
        yield RecordedEvent(position=position, stream=stream_name, version=version,
                            event=decode_payload(kind, schema, payload))


class _Transaction:
    """The :class:`WriteTransaction` handed to use cases inside one write."""

    def __init__(self, cursor: apsw.Cursor) -> None:
        self.cursor = cursor
        row = cursor.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchall()
        self.position, self.hash = (int_value(row[0][0]), text_value(row[0][1])) if row else (0, GENESIS_HASH)
        self.versions: dict[str, int] = {}
        self.recorded: list[RecordedEvent] = []

    def _next_version(self, stream: str) -> int:
        version = self.versions.get(stream)
        if version is None:
            version = scalar_int(self.cursor, "SELECT max(version) FROM events WHERE stream = ?", (stream,))
        version += 1
        self.versions[stream] = version
        return version

    def append(self, stream: str, events: Sequence[DomainEvent]) -> list[int]:
        positions = []
        for event in events:
            payload = encode_payload(event)
            digest = payload_digest(payload)
            position = self.position + 1
            version = self._next_version(stream)
            recorded_at = event.at.isoformat()
            new_hash = chain_hash(
                self.hash, position, stream, version, event.kind, event.schema, recorded_at, digest
            )
            self.cursor.execute(
                "INSERT INTO events(position, stream, version, kind, schema, recorded_at, payload,"
                " payload_sha256, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    position,
                    stream,
                    version,
                    event.kind,
                    event.schema,
                    recorded_at,
                    payload,
                    digest,
                    self.hash,
                    new_hash,
                ),
            )
            project(self.cursor, position, event)
            self.position, self.hash = position, new_hash
            self.recorded.append(
                RecordedEvent(position=position, stream=stream, version=version, event=event)
            )
            positions.append(position)
        return positions

    # --- reads inside the transaction (RowLookup and friends) -------------------------------

    def by_id(self, memory_id: int) -> Memory | None:
        rows = self.cursor.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        ).fetchall()
        return memory_from_row(rows[0]) if rows else None

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
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
        rows = self.cursor.execute(
            "SELECT v.revision, v.content FROM resources r JOIN resource_revisions v ON v.agent_id = r.agent_id"
            " AND v.owner_id = r.owner_id AND v.name = r.name AND v.revision = r.current_revision"
            " WHERE r.agent_id = ? AND r.owner_id = ? AND r.name = ?",
            (agent_id, owner_id, name),
        ).fetchall()
        return (int_value(rows[0][0]), text_value(rows[0][1])) if rows else None

    def read_events(self, after: int = 0, *, stream: str | None = None) -> list[RecordedEvent]:
        """The log as this transaction sees it (its own appends included)."""
        return list(read_log(self.cursor.connection.cursor(), after, stream))

    def review_state(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> ReviewState:
        rows = self.cursor.execute(REVIEW_STATE_SQL, review_state_key(agent_id, owner_id, conversation)).fetchall()
        return review_state_from_row(rows[0]) if rows else ReviewState()

    def last_user_message_id(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> int:
        rows = self.cursor.execute(
            "SELECT max(id) FROM messages WHERE agent_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?"
            " AND owner_id = ? AND role = 'user'",
            (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope, owner_id),
        ).fetchall()
        return int(rows[0][0] or 0)


    def agents_of_owner(self, owner_id: str) -> list[str]:
        rows = self.cursor.execute(
            "SELECT agent_id FROM messages WHERE owner_id = :o UNION SELECT agent_id FROM memories WHERE owner_id = :o"
            " UNION SELECT agent_id FROM resources WHERE owner_id = :o"
            " UNION SELECT agent_id FROM review_state WHERE owner_id = :o"
            " UNION SELECT agent_id FROM scheduled_jobs WHERE owner_id = :o"
            " UNION SELECT agent_id FROM memory_sources WHERE owner_id = :o",
            {"o": owner_id},
        ).fetchall()
        return sorted(str(r[0]) for r in rows if r[0] is not None)

    def erasure_candidates(self, owner_id: str, kinds: Collection[str]) -> list[RecordedEvent]:
        # The payload filter only narrows what is decoded; the events' own declarations decide.
        wanted = sorted(kinds)
        rows = self.cursor.connection.cursor().execute(
            "SELECT position, stream, version, kind, schema, payload FROM events WHERE payload IS NOT NULL"
            f" AND (kind IN ({','.join('?' * len(wanted))}) OR instr(payload, ?) > 0) ORDER BY position",
            (*wanted, encoded_text(owner_id)),
        ).fetchall()
        return [RecordedEvent(position=int_value(position), stream=text_value(stream), version=int_value(version),
                              event=decode_payload(text_value(kind), int_value(schema), text_value(payload)))
                for position, stream, version, kind, schema, payload in rows]

    def redact(self, positions: Sequence[int]) -> int:
        self.cursor.executemany("UPDATE events SET payload = NULL WHERE position = ? AND payload IS NOT NULL",
                                [(p,) for p in positions])
        if positions:  # the erased bytes stay in free pages and FTS segments until scrubbed
            self.cursor.execute("INSERT OR IGNORE INTO scrub_pending(id, since_position) VALUES (1, ?)",
                                (self.position,))
        return len(positions)


class _Pending:
    __slots__ = ("done", "error", "result", "work")

    def __init__(self, work: Callable[[Any], Any]) -> None:
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False


CommitListener = Callable[[list[RecordedEvent]], None]


class SqliteEventStore:
    """Implements the ``EventStore`` port on one ``memory.db`` file."""

    def __init__(self, path: Path, *, durability: str = "normal", head_file: Path | None = None,
                 readonly: bool = False) -> None:
        """``head_file``: where this home keeps its last-seen log head (ADR-0011); checked here.
        ``readonly``: no writer at all, the schema only checked; every write raises ReadOnlyStore."""
        self.path = Path(path)
        self.durability = durability
        self.readonly = readonly
        self._writer = open_connection(self.path, durability=durability, readonly=readonly)
        try:
            with translated_errors("migrating memory.db"):
                if readonly:
                    check_schema(self._writer, str(self.path))
                    self.restored_triggers: list[str] = []
                else:
                    migrate(self._writer, str(self.path))
                    enable_wal(self._writer)
                    # Append-only triggers someone dropped are put back; verify reports it.
                    self.restored_triggers = restore_triggers(self._writer)
                self._head_file = HeadFile(head_file, readonly=readonly) if head_file is not None else None
                if self._head_file is not None:
                    self._head_file.check_at_open(self._writer)
        except BaseException:
            self._writer.close()
            raise
        if self.restored_triggers:
            log.warning("the append-only triggers %s of %s were missing; re-created (verify reports it)",
                        ", ".join(self.restored_triggers), self.path)
        lock = threading.Lock()
        self._turn = threading.Condition(lock)  # followers wait here for their commit
        self._arrived = threading.Condition(lock)  # a gathering leader waits here for followers
        self._leading = False
        self._gathering = False
        self._expected = 1
        self._head = Head(0, GENESIS_HASH)
        self._queue: list[_Pending] = []
        self._listeners: list[CommitListener] = []
        self._reactions: list[CommitListener] = []
        self._closed = False
        self._local = threading.local()
        # Weak: a reader dies with its thread (thread-local), so short-lived host threads don't pile
        # up open connections; the ones still alive are closed by close().
        self._readers: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()
        self._readers_lock = threading.Lock()

    # --- connections --------------------------------------------------------------------------

    def reader(self) -> apsw.Connection:
        """This thread's read connection (WAL readers never block the writer)."""
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StorageError("the memory store is closed")
            conn = open_connection(self.path, durability=self.durability, readonly=self.readonly)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.add(conn)
        return conn

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener`` with the events of every commit, right after the commit and before
        any caller of that commit is answered. Listeners must not write (caches only)."""
        self._listeners.append(listener)

    def add_after_commit(self, reaction: CommitListener) -> None:
        """Call ``reaction`` with the events of every commit, outside the write lock, in the
        thread that led the commit, before that thread's call returns. Reactions may write
        (e.g. record a prompt-file revision); their failures are logged, never raised into the
        write that already committed."""
        self._reactions.append(reaction)

    def close(self) -> None:
        with self._turn:
            while self._leading:  # let the batch in flight commit first
                self._turn.wait()
            self._closed = True
            if self._head_file is not None:
                self._head_file.flush(sync=True)
            with self._readers_lock:
                for conn in list(self._readers):
                    conn.close()
                self._readers.clear()
            self._writer.close()

    # --- writes ---------------------------------------------------------------------------------

    def write(self, work: Callable[[Any], T]) -> T:
        if self.readonly:
            raise ReadOnlyStore(f"{self.path} was opened read-only; nothing was written")
        pending = _Pending(work)
        batch: list[_Pending] = []
        with self._turn:
            self._queue.append(pending)
            if self._gathering and len(self._queue) >= self._expected:
                self._arrived.notify()
            # Wait until a leader has committed our work, or lead the next batch ourselves.
            while not pending.done and self._leading:
                self._turn.wait()
            if not pending.done:
                self._leading = True
                if self._expected > 1:
                    # The last batch was shared: let the other writers, who are preparing their next
                    # message right now, queue up behind us (group commit), for at most a moment.
                    self._gathering = True
                    self._arrived.wait_for(lambda: len(self._queue) >= self._expected, GATHER_S)
                    self._gathering = False
                batch, self._queue = self._queue, []
                self._expected = len(batch)
        recorded: list[RecordedEvent] = []
        if batch:
            try:
                if self._closed:
                    for p in batch:
                        p.result, p.error, p.done = None, StorageError("the memory store is closed"), True
                else:
                    recorded = self._commit_batch(batch)
            finally:
                with self._turn:
                    self._leading = False
                    self._turn.notify_all()
        if recorded:
            self._react(recorded)
        if pending.error is not None:
            raise pending.error
        return pending.result  # type: ignore[no-any-return]

    def _react(self, recorded: list[RecordedEvent]) -> None:
        for reaction in self._reactions:
            try:
                reaction(recorded)
            except Exception:
                log.exception("after-commit reaction %r failed; it is repaired on the next start", reaction)

    def _commit_batch(self, batch: list[_Pending]) -> list[RecordedEvent]:
        recorded: list[RecordedEvent] = []
        try:
            try:
                recorded = self._run_batch(batch)
            except (apsw.BusyError, apsw.LockedError):
                # Rare: built only when needed (a retry object per write costs more than the write).
                for attempt in Retrying(
                    retry=retry_if_exception_type((apsw.BusyError, apsw.LockedError)),
                    stop=stop_after_attempt(WRITE_ATTEMPTS - 1),
                    wait=wait_random_exponential(multiplier=0.05, max=1),
                    reraise=False,
                ):
                    with attempt:
                        recorded = self._run_batch(batch)
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            log.warning("write to %s failed after %d attempts: %s", self.path, WRITE_ATTEMPTS, cause)
            error = StorageBusy(f"memory.db stayed locked through {WRITE_ATTEMPTS} attempts: {cause}")
            for p in batch:
                p.result, p.error = None, error
        except apsw.Error as exc:
            log.error("write to %s failed: %s", self.path, exc)
            for p in batch:
                p.result, p.error = None, StorageError(f"write failed, nothing was applied: {exc}")
        except BaseException as exc:
            for p in batch:
                p.result, p.error = None, exc
        finally:
            for p in batch:
                p.done = True
        if recorded:
            if self._head_file is not None:
                self._head_file.advanced(self._head, len(recorded))
            for listener in self._listeners:
                try:
                    listener(recorded)
                except Exception:
                    log.exception("commit listener %r failed", listener)
        return recorded

    def _run_batch(self, batch: list[_Pending]) -> list[RecordedEvent]:
        """Run the batch in one transaction. A caller whose work fails is dropped from the batch,
        everything is rolled back and the others run again (work must be re-runnable anyway,
        for busy retries): no savepoints, which cost an FTS segment flush each."""
        conn = self._writer
        cur = conn.cursor()
        remaining = list(batch)
        while remaining:
            cur.execute("BEGIN IMMEDIATE")
            failed: tuple[_Pending, Exception] | None = None
            try:
                tx = _Transaction(cur)
                for p in remaining:
                    try:
                        p.result, p.error = p.work(tx), None
                    except (apsw.BusyError, apsw.LockedError):
                        raise
                    except Exception as exc:  # this caller's failure only
                        failed = (p, exc)
                        break
                if failed is None:
                    cur.execute("COMMIT")
                    self._head = Head(tx.position, tx.hash)
                    return tx.recorded
                _roll_back(conn)
            except BaseException:
                _roll_back(conn)
                raise
            caller, error = failed
            caller.result, caller.error = None, _translate(error)
            remaining.remove(caller)
        return []

    # --- erasure -------------------------------------------------------------------------------

    def scrub(self) -> ScrubReport:
        """Merge the full-text indexes (dropping deleted entries), rewrite the file (``VACUUM``,
        with ``secure_delete``) and empty the WAL, with every other writer of this store held
        back meanwhile. ``wal_truncated`` is false when a reader elsewhere kept the WAL alive."""
        if self.readonly:
            raise ReadOnlyStore(f"{self.path} was opened read-only; it cannot be rewritten")
        with self._turn:
            while self._leading:
                self._turn.wait()
            if self._closed:
                raise StorageError("the memory store is closed")
            self._leading = True
        try:
            before = self._file_bytes()
            conn = self._writer
            with translated_errors("scrubbing memory.db"):
                conn.execute("PRAGMA secure_delete = ON")
                try:
                    with conn:
                        for table in FTS_TABLES:
                            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                    conn.execute("VACUUM")
                finally:
                    conn.execute("PRAGMA secure_delete = OFF")
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0][0]
                if busy == 0:  # every erased byte is gone from the files: the erasure is finished
                    conn.execute("DELETE FROM scrub_pending")
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return ScrubReport(wal_truncated=busy == 0, bytes_before=before, bytes_after=self._file_bytes())
        finally:
            with self._turn:
                self._leading = False
                self._turn.notify_all()

    def scrub_pending(self) -> bool:
        """Whether an erasure committed but its scrub has not finished (killed, or a reader
        elsewhere kept the WAL): its bytes may still be in the files."""
        with translated_errors("reading memory.db"):
            return bool(self.reader().execute("SELECT count(*) FROM scrub_pending").fetchall()[0][0])

    def _file_bytes(self) -> int:
        files = (self.path, self.path.with_name(self.path.name + "-wal"))
        return sum(f.stat().st_size for f in files if f.exists())

    # --- reads ----------------------------------------------------------------------------------

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        """Events after ``after`` in log order (only ``stream``'s when given); redacted ones skipped."""
        with translated_errors("reading the event log"):
            yield from read_log(self.reader().cursor(), after, stream)

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        # A range on the UNIQUE(stream, version) index: every stream starting with the prefix.
        rows = self.reader().execute(
            "SELECT stream, max(position) FROM events WHERE stream >= ? AND stream < ? GROUP BY stream",
            (stream_prefix, stream_prefix + "\U0010ffff"),
        ).fetchall()
        return {text_value(r[0]): int_value(r[1]) for r in rows}

    def head(self) -> Head:
        """The log's last (position, hash): an anchor to keep elsewhere (ADR-0011)."""
        with translated_errors("reading the event log"):
            return read_head(self.reader())

    def home_anchor(self) -> Head | None:
        """The last head this home recorded outside the database (``None``: none)."""
        return self._head_file.anchor() if self._head_file is not None else None

    def problems_at_open(self) -> list[str]:
        """What opening found wrong and mended or kept as evidence (verify reports these)."""
        problems = []
        if self._head_file is not None and self._head_file.problem:
            problems.append(self._head_file.problem)
        if self.restored_triggers:
            problems.append(f"the append-only triggers {', '.join(self.restored_triggers)} were missing when"
                            " memory.db was opened (re-created): the log could be changed meanwhile")
        return problems

    def last_position(self) -> int:
        row = self.reader().execute("SELECT max(position) FROM events").fetchall()
        return int(row[0][0] or 0)


def _roll_back(conn: apsw.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already done so itself (it does on a
    full disk or an I/O error); the error being handled, not this one, is what gets reported."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except apsw.Error as exc:
        log.warning("rollback on %s failed: %s", conn.filename, exc)


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, apsw.Error):
        return StorageError(f"write failed, nothing of it was applied: {exc}")
    return exc
