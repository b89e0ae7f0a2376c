"""What every SQL event store shares around its dialect's writes: the commit listeners and
after-commit reactions, the home's head anchor, and the reads of the log that are one statement
on every dialect. A dialect gives :meth:`SqlEventStore._read` (one statement, its driver's errors
translated), ``reader()`` and ``name``, and its own writes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from fermix_memory.adapters.sql.cursor import SqlReader
from fermix_memory.adapters.sql.event_log import LOG_COLUMNS, logged_from_row, read_chain_heads
from fermix_memory.adapters.sql.head import Head, HeadFile
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.log_chain import LoggedEvent, head_of

log = logging.getLogger("fermix_memory.storage")
T = TypeVar("T")


def tell_each(listeners: Sequence[Callable[[T], object]], value: T, failed: str) -> None:
    """Call every listener with ``value``; one that raises is logged (``failed`` says what it was:
    "commit listener %r failed") and the others are still called: the write has committed."""
    for listener in listeners:
        try:
            listener(value)
        except Exception:
            log.exception(failed, listener)

CommitListener = Callable[[list[RecordedEvent]], None]
READING = "reading the event log"


class SqlEventStore:
    """The dialect-neutral part of the ``EventStore`` port on a SQL database."""

    name: str  # how messages name this store (its file, or its server's database)
    readonly: bool
    _head_file: HeadFile | None

    def __init__(self) -> None:
        self._listeners: list[CommitListener] = []
        self._reactions: list[CommitListener] = []

    @property
    def writes_at_once(self) -> bool:
        """Whether a write asked to commit at once may (ADR-0110): not on a server, whose every
        statement is a round trip."""
        return False

    def reader(self) -> SqlReader:
        """A read connection of this store (this thread's, or a pooled one for each statement)."""
        raise NotImplementedError

    def _read(self, sql: str, params: Any = (), *, doing: str = READING) -> list[tuple[Any, ...]]:
        """The rows of one read statement, the driver's errors translated into the store's."""
        raise NotImplementedError

    # --- after a commit ---------------------------------------------------------------------------

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener`` with the events of every commit, right after the commit and before
        any caller of that commit is answered. Listeners must not write (caches only)."""
        self._listeners.append(listener)

    def add_after_commit(self, reaction: CommitListener) -> None:
        """Call ``reaction`` with the events of every commit, after the listeners, before the
        call that wrote them returns. Reactions may write (e.g. record a prompt-file revision);
        their failures are logged, never raised into the write that already committed."""
        self._reactions.append(reaction)

    def _tell_listeners(self, recorded: list[RecordedEvent]) -> None:
        tell_each(self._listeners, recorded, "commit listener %r failed")

    def _react(self, recorded: list[RecordedEvent]) -> None:
        tell_each(self._reactions, recorded, "after-commit reaction %r failed; it is repaired on the next start")

    # --- the log, read --------------------------------------------------------------------------

    def unfinished_copy(self) -> str | None:
        """The home a copy into this log that was cut off copies (see the port), else ``None``."""
        rows = self._read("SELECT source FROM unfinished_copy WHERE id = 1")
        return str(rows[0][0]) if rows else None

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        # A range on the UNIQUE(stream, version) index: every stream starting with the prefix
        # (``stream`` compares byte-wise on every dialect).
        rows = self._read("SELECT stream, max(position) FROM events WHERE stream >= ? AND stream < ? GROUP BY stream",
                          (stream_prefix, stream_prefix + "\U0010ffff"))
        return {str(r[0]): int(r[1]) for r in rows}

    def logged_at(self, positions: Collection[int]) -> list[LoggedEvent]:
        """The events at ``positions`` as stored (redacted ones too), in log order (receipts, ADR-0079)."""
        wanted, found = sorted(set(positions)), []
        for i in range(0, len(wanted), 500):
            part = wanted[i:i + 500]
            found += self._read(f"SELECT {LOG_COLUMNS} FROM events WHERE position IN ({','.join('?' * len(part))})"
                                " ORDER BY position", part)
        return [logged_from_row(row) for row in found]

    def logged_of_kinds(self, kinds: Collection[str], after: int) -> list[LoggedEvent]:
        """Every event of one of ``kinds`` after ``after`` as stored, in log order: a walk of the
        log's tail after ``after`` (erasure records and receipts, ADR-0079)."""
        names = sorted(kinds)
        rows = self._read(f"SELECT {LOG_COLUMNS} FROM events WHERE position > ? AND kind IN"
                          f" ({','.join('?' * len(names))}) ORDER BY position", (after, *names))
        return [logged_from_row(row) for row in rows]

    def last_position(self) -> int:
        rows = self._read("SELECT max(position) FROM events")
        return int(rows[0][0] or 0)

    def head(self) -> Head:
        """The log's anchor (ADR-0011): its last (position, hash), or the checkpoint over its
        chains' heads."""
        return head_of(read_chain_heads(_Rows(self)))

    def home_anchor(self) -> Head | None:
        """The last head this home recorded outside the database (``None``: none)."""
        return self._head_file.anchor() if self._head_file is not None else None

    def _head_problems(self) -> list[str]:
        """What the head anchor's check at open found wrong (kept as evidence; verify reports it)."""
        return [self._head_file.problem] if self._head_file is not None and self._head_file.problem else []


class _Result(list[tuple[Any, ...]]):
    def fetchall(self) -> list[tuple[Any, ...]]:
        return self


class _Rows:
    """A store's :meth:`SqlEventStore._read` as a :class:`SqlReader` (errors translated)."""

    def __init__(self, store: SqlEventStore) -> None:
        self._store = store

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> _Result:
        return _Result(self._store._read(sql, params))

