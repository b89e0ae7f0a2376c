"""One write transaction on the PostgreSQL store: the shared SQL transaction (its appends, chain,
projections and state loaders, run through :class:`PgCursor`) with PostgreSQL's way of sharing
the log between writers of many processes (ADR-0031).

A write holds the row lock of each chain it reads state of or appends to (``chain_heads ...
FOR UPDATE``), taken before that state is read and kept to COMMIT: writes of one chain run one
after the other, writes of different chains side by side. Locks are taken in chain order; a
write that needs a chain below one it holds only tries it (``NOWAIT``), and when another write
has it, the whole write is undone and run again taking all its chains in order from the start
(:class:`Reorder`): no two writes ever wait for each other in a circle.

The write runs in pipeline mode (ADR-0064): taking a chain's lock sends, in the same round trip,
the read of the entered stream's version and (several chains, when it is taken for an append)
the positions of the events appended, each after the lock is held; the appends, projections and heads then travel with
the COMMIT. A one-message append is two round trips.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from fermix_memory.adapters.postgres.connection import PgCursor
from fermix_memory.adapters.sql.event_log import write_chain_heads
from fermix_memory.adapters.sql.transaction import STREAM_VERSION_SQL, SqlTransaction
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.event_base import DomainEvent
from fermix_memory.domain.log_chain import GENESIS_HASH

log = logging.getLogger("fermix_memory.storage")


class Reorder(Exception):  # a signal to the write loop, not an error anyone sees
    """The write needs ``chains`` and must take them in order: run it again from the start."""

    def __init__(self, chains: frozenset[int]) -> None:
        super().__init__(f"chains {sorted(chains)} are taken in order on the next attempt")
        self.chains = chains


class PostgresTransaction(SqlTransaction):
    """The :class:`WriteTransaction` handed to use cases inside one write on PostgreSQL."""

    cursor: PgCursor

    def __init__(self, cursor: PgCursor, chains: int, lock_first: frozenset[int] = frozenset()) -> None:
        self._held: set[int] = set()
        self._lock_first = lock_first
        # Positions taken with the lock of ``chain`` for the append that took it (several chains).
        self._reserved: tuple[list[int], int] | None = None
        self._appending = 0  # how many events the append under way appends
        super().__init__(cursor, chains)

    def _start(self) -> tuple[int, str]:
        for chain in sorted(self._lock_first):
            self._lock(chain, wait=True)
        return 0, GENESIS_HASH  # positions come from each chain's head (one chain) or a sequence

    def _lock(self, chain: int, *, wait: bool, stream: str | None = None) -> None:
        """Hold ``chain``'s lock and read its head; in the same round trip, once the lock is held,
        ``stream``'s version (unless known) and, on a log of several chains, the positions of the
        append under way (it takes the chain: it is the first to need them, and gets them)."""
        head = self.cursor.cursor().execute("SELECT position, hash FROM chain_heads WHERE chain = ? FOR UPDATE"
                                            + ("" if wait else " NOWAIT"), (chain,))
        version = None if stream is None or stream in self.versions else self.cursor.cursor().execute(
            STREAM_VERSION_SQL, (stream,))
        position = self.cursor.cursor().execute(*positions_sql(self._appending)
                                                ) if self.chains > 1 and self._appending else None
        rows = head.fetchall()  # the answers of all three
        if not rows:
            raise AssertionError(f"chain {chain} has no head row")  # the store made one per chain
        self.heads[chain] = (int(rows[0][0]), str(rows[0][1]))
        self._held.add(chain)
        if version is not None and stream is not None:
            rows = version.fetchall()
            self.versions[stream] = int(rows[0][0]) if rows else 0
        if position is not None:
            self._reserved = ([int(r[0]) for r in position.fetchall()], chain)

    def enter(self, stream: str) -> bool:
        chain = chain_for(stream, self.chains)
        if chain in self._held:
            return False
        if not self._held or chain > max(self._held):
            self._lock(chain, wait=True, stream=stream)
            return True
        try:
            self._lock(chain, wait=False, stream=stream)
        except pg_errors.LockNotAvailable:
            raise Reorder(frozenset(self._held | {chain})) from None
        return True

    def append(self, stream: str, events: Sequence[DomainEvent], *,
               expected_version: int | None = None) -> list[int]:
        self._appending = len(events)
        try:
            return super().append(stream, events, expected_version=expected_version)
        finally:
            self._appending, self._reserved = 0, None

    def stream_version(self, stream: str) -> int:
        if stream not in self.versions:
            self.enter(stream)  # taking its chain reads the version in the same round trip
        known = self.versions.get(stream)
        return super().stream_version(stream) if known is None else known

    def _chain_head(self, chain: int) -> tuple[int, str]:
        return self.heads[chain]  # taken with its lock by ``enter``

    def _positions(self, chain: int, count: int) -> list[int]:
        if self.chains == 1:  # the one chain's head is the log's: positions run on without gaps
            last = self.heads[0][0]
            return list(range(last + 1, last + count + 1))
        reserved, self._reserved = self._reserved, None
        if reserved is not None and reserved[1] == chain and len(reserved[0]) == count:
            return reserved[0]
        rows = self.cursor.execute(*positions_sql(count)).fetchall()
        return [int(r[0]) for r in rows]

    def finish(self) -> None:
        write_chain_heads(self.cursor, self.heads, self.touched)

    @staticmethod
    def _version_clash(exc: Exception) -> bool:
        return isinstance(exc, pg_errors.UniqueViolation) and "events_stream_version_key" in str(exc)


# Up to this many positions, the count is written in the statement (see ``positions_sql``).
LITERAL_POSITIONS = 16


def positions_sql(count: int) -> tuple[str, tuple[int, ...]]:
    """The statement (and its parameters) taking ``count`` positions of the log's sequence. A
    count up to :data:`LITERAL_POSITIONS` is written in it: a statement without parameters is
    planned once on a connection, whereas ``generate_series(1, $1)`` is planned again at every
    run (its generic plan, estimated at a thousand rows, never looks cheaper than a custom one),
    which cost the server more than the rest of that statement (ADR-0098)."""
    if 0 < count <= LITERAL_POSITIONS:
        return f"SELECT nextval('events_position') FROM generate_series(1, {int(count)})", ()
    return "SELECT nextval('events_position') FROM generate_series(1, ?)", (count,)


def committed(done: PgCursor) -> bool:
    """Whether the COMMIT sent on ``done`` was answered as a commit (a transaction that failed
    before it is answered ROLLBACK, or not at all in an aborted pipeline)."""
    result = done.result()
    return result is not None and bool(result.command_status == b"COMMIT")


def undo(conn: Any) -> None:
    """Roll back what a failed write left open on ``conn``, so the pool gets it back clean. Sent
    by libpq itself: a ROLLBACK seen by the driver makes it drop every prepared statement of the
    session (``DEALLOCATE ALL``), the writes' too."""
    if conn.broken:
        return
    try:
        if conn.pgconn.transaction_status != TransactionStatus.IDLE:
            conn.pgconn.exec_(b"ROLLBACK")
    except Exception:
        log.debug("rolling back a failed write failed", exc_info=True)
