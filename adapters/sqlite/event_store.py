"""The SQLite event store: the hash-chained append-only log and its projections in one
transaction, on one ``memory.db`` file. Writes go through group commit (:mod:`.group_commit`);
reads run on each thread's own connection (WAL readers never block the writer)."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw

from fermix_memory.adapters.sql.copy_mark import clear_copy_mark, set_copy_mark
from fermix_memory.adapters.sql.event_log import (
    LOG_ROWS,
    append_logged_rows,
    chain_count,
    last_position,
    logged_from_row,
    read_chain_heads,
    read_log,
    set_chain_count,
    write_chain_heads,
)
from fermix_memory.adapters.sql.event_store import READING
from fermix_memory.adapters.sql.head import Head, HeadFile
from fermix_memory.adapters.sqlite import history_rank
from fermix_memory.adapters.sqlite.connection import enable_wal, open_connection, translated_errors, typed_error
from fermix_memory.adapters.sqlite.group_commit import GroupCommit, roll_back
from fermix_memory.adapters.sqlite.schema import check_schema, migrate, restore_triggers
from fermix_memory.adapters.sqlite.wal_checkpoints import WalCheckpoints
from fermix_memory.application.errors import StorageError
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.log_chain import LoggedEvent, head_of

log = logging.getLogger("fermix_memory.storage")


class SqliteEventStore(GroupCommit):
    """Implements the ``EventStore`` port on one ``memory.db`` file."""

    def __init__(self, path: Path, *, durability: str = "normal", head_file: Path | None = None,
                 readonly: bool = False) -> None:
        """``head_file``: where this home keeps its last-seen log head (ADR-0011); checked here.
        ``readonly``: no writer at all, the schema only checked; every write raises ReadOnlyStore."""
        super().__init__()
        self.path = Path(path)
        self.name = str(self.path)
        self.durability = durability
        self.readonly = readonly
        self._writer = open_connection(self.path, durability=durability, readonly=readonly)
        # The writer's WAL is checkpointed off the committing thread (ADR-0046).
        self._checkpoints: WalCheckpoints | None = None
        try:
            with translated_errors(f"migrating {self.name}"):
                if readonly:
                    check_schema(self._writer, str(self.path))
                    self.restored_triggers: list[str] = []
                else:
                    migrate(self._writer, str(self.path))
                    enable_wal(self._writer)
                    self._checkpoints = WalCheckpoints(lambda: open_connection(self.path, durability=durability))
                    self._checkpoints.install(self._writer)
                    # Append-only triggers someone dropped are put back; verify reports it.
                    self.restored_triggers = restore_triggers(self._writer)
                self.chains = chain_count(self._writer)
                self._head_file = HeadFile(head_file, readonly=readonly, database=str(self.path),
                                           reader=self.reader) if head_file is not None else None
                if self._head_file is not None:
                    self._head_file.check_at_open(self._writer)
        except BaseException:
            self._writer.close()
            raise
        if self.restored_triggers:
            log.warning("the append-only triggers %s of %s were missing; re-created (verify reports it)",
                        ", ".join(self.restored_triggers), self.path)
        self._start_group_commit()
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
            with translated_errors(f"opening a reader of {self.name}"):
                history_rank.register(conn)  # history search ranks with it
            self._local.conn = conn
            with self._readers_lock:
                self._readers.add(conn)
        return conn

    def settle(self, timeout: float | None = None) -> bool:
        """The host pauses: the log is checkpointed now rather than after a quiet moment (ADR-0046)."""
        return self._checkpoints.settle(timeout) if self._checkpoints is not None else True

    def close(self) -> None:
        with self._lock:
            while self._leading:  # let the batch in flight commit first
                self._wait_turn()
            self._closed = True
            if self._head_file is not None:
                self._head_file.flush()
            with self._readers_lock:
                for conn in list(self._readers):
                    conn.close()
                self._readers.clear()
            if self._checkpoints is not None:
                self._checkpoints.close()
            self._writer.close()

    def append_logged(self, events: Sequence[LoggedEvent], *, copy_of: str | None = None,
                      copied: bool = False) -> Head:
        """Append rows of another log as they are, projections included, and mark or unmark an
        unfinished copy in the same transaction (see the port)."""
        with self.exclusive("appended to") as conn, translated_errors("appending events of another log"):
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                if copy_of is not None:
                    set_copy_mark(cur, copy_of)
                heads = read_chain_heads(cur)
                append_logged_rows(cur, last_position(cur), heads, events)
                if copied:
                    clear_copy_mark(cur)
                if len(heads) > 1:
                    write_chain_heads(cur, heads, range(len(heads)))
                head = head_of(heads)
                cur.execute("COMMIT")
            except BaseException:
                roll_back(conn)
                raise
        self._head = head
        if self._head_file is not None and events:
            self._head_file.advanced(head, len(events))
        return head

    def adopt_chains(self, chains: int) -> None:
        """An empty log takes the number of chains of the log it is about to receive (see the port)."""
        with self.exclusive("given chains") as conn, translated_errors("setting the log's chains"):
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                set_chain_count(cur, chains)
                cur.execute("COMMIT")
            except BaseException:
                roll_back(conn)
                raise
        self.chains = chains

    # --- reads ----------------------------------------------------------------------------------

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        """Events after ``after`` in log order (only ``stream``'s when given); redacted ones skipped."""
        with translated_errors("reading the event log"):
            yield from read_log(self.reader().cursor(), after, stream)

    def read_log(self, after: int = 0) -> Iterator[LoggedEvent]:
        """Every event after ``after`` as stored, redacted ones included (one read snapshot)."""
        with translated_errors("reading the event log"):
            for row in self.reader().cursor().execute(LOG_ROWS, (after,)):
                yield logged_from_row(row)

    def _read(self, sql: str, params: Any = (), *, doing: str = READING) -> list[tuple[Any, ...]]:
        # try/except, not the context manager: a prompt composes after three of these reads
        try:
            return self.reader().execute(sql, params).fetchall()
        except apsw.Error as exc:
            raise typed_error(doing, exc) from exc

    def problems_at_open(self) -> list[str]:
        """What opening found wrong and mended or kept as evidence (verify reports these)."""
        problems = self._head_problems()
        if self.restored_triggers:
            problems.append(f"the append-only triggers {', '.join(self.restored_triggers)} were missing when"
                            f" {self.name} was opened (re-created): the log could be changed meanwhile")
        return problems
