"""The head anchor (ADR-0011): the log's last (position, hash), kept OUTSIDE the database so that
cutting events off the end of the log — which leaves a perfectly valid shorter chain — shows.

Operators keep ``fermix events head`` output elsewhere and check it with ``verify
--expect-head``; the home keeps its own last-seen head in ``<home>/head``, written after commits
(at most every :data:`WRITE_EVERY_EVENTS` events or :data:`WRITE_EVERY_S` seconds, and on close).
An anchor naming position 0 (the empty log) holds only for an empty log.

Beside it, ``<home>/head-origin`` holds the hash of the first event of the log the anchor is of
(ADR-0049): when the anchor does not hold, a log whose first event differs (or that holds none)
is another database, and the warning says the home and the database do not belong together
instead of calling it a rewrite.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fermix_memory.adapters.durable_file import replace_durably
from fermix_memory.adapters.sql.cursor import SqlReader, text_value
from fermix_memory.adapters.sql.event_log import chain_count, read_chain_heads
from fermix_memory.application.errors import IntegrityError
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.log_chain import GENESIS_HASH, MAX_CHAINS, checkpoint_hash, head_of
from fermix_memory.domain.log_chain import Head as Head  # the anchor value: imported from here by the stores
from fermix_memory.domain.values import INT64_MAX, preview

log = logging.getLogger("fermix_memory.storage")

WRITE_EVERY_EVENTS = 1_000
WRITE_EVERY_S = 5.0
ORIGIN_NAME = "head-origin"
_ORIGIN = re.compile(r"[0-9a-f]{64}")
_HEAD = re.compile(r"([0-9]{1,18}(?:,[0-9]{1,18}){0,N}):([0-9a-f]{64})".replace("N", str(MAX_CHAINS - 1)))


class BadHeadAnchor(IntegrityError):
    """A head anchor that is not ``POSITION:HASH`` (64 lower-case hex digits)."""


def parse_head(text: str) -> Head:
    """A head anchor's text: ``POSITION:HASH`` (one chain) or ``P0,P1,...:CHECKPOINT`` (several)."""
    match = _HEAD.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise BadHeadAnchor("a head anchor is POSITION:HASH (or P0,P1,...:CHECKPOINT for a log of several chains;"
                            f" 64 hex digits), got {preview(text, 80)}")
    positions = tuple(int(p) for p in match.group(1).split(","))
    if len(positions) == 1:
        return Head(positions[0], match.group(2))
    return Head(max(positions), match.group(2), positions)


def checked_head(value: object) -> Head:
    """``value`` as a :class:`Head`: its ``POSITION:HASH`` text, or a ``Head`` whose position is
    a log position (0 to 2**63-1) and whose hash is 64 lower-case hex digits."""
    if not isinstance(value, Head):
        return parse_head(value)  # type: ignore[arg-type]  # not text either: parse_head says so
    chains = value.chains if isinstance(value.chains, tuple) and value.chains else (value.position,)
    for position in chains:
        if type(position) is not int or not 0 <= position <= INT64_MAX:
            shown = str(position) if type(position) is int and abs(position) < 10**30 else preview(position)
            raise BadHeadAnchor(f"a head anchor's position is a whole number from 0 to {INT64_MAX}, got {shown}")
    digest = value.hash
    text = ",".join(map(str, chains))
    return parse_head(f"{text}:{digest}") if isinstance(digest, str) else parse_head(digest)


def read_head(conn: SqlReader) -> Head:
    return head_of(read_chain_heads(conn))


def first_hash(conn: SqlReader) -> str | None:
    """The hash of the log's first event (``None``: an empty log): which log this is."""
    rows = conn.execute("SELECT hash FROM events ORDER BY position LIMIT 1").fetchall()
    return text_value(rows[0][0]) if rows else None


UNREADABLE = "unreadable"


def _readable_first(conn: SqlReader) -> str | None:
    """:func:`first_hash`, or :data:`UNREADABLE` when that page cannot be read (a damaged file:
    the open goes on, and ``verify`` names the damage)."""
    try:
        return first_hash(conn)
    except Exception as exc:
        log.debug("could not read the log's first event: %s", exc)
        return UNREADABLE


def head_problem(conn: SqlReader, head: Head, label: str) -> str:
    """Empty when the log holds ``head``; else why not (truncated, or rewritten). Position 0 is
    the empty log: it holds only while the log is empty (else anything would pass for it).
    Several chains: each chain must still hold the event the anchor names as its head, and
    those events' hashes must give the anchor's checkpoint."""
    chains = chain_count(conn)
    if len(head.chains or (0,)) != chains:
        return (f"{label} {head} names {len(head.chains or (0,))} chain(s), but the log has {chains}:"
                " it is not this log's anchor")
    if head.chains:
        return _chains_problem(conn, head, label)
    if head.position == 0:
        events = read_head(conn).position
        if events:
            return f"{label} {head} names the empty log, but the log holds {events} events"
        return "" if head.hash == GENESIS_HASH else f"{label} {head}: the empty log's hash is {GENESIS_HASH}"
    rows = conn.execute("SELECT hash FROM events WHERE position = ?", (head.position,)).fetchall()
    if not rows:
        last = read_head(conn).position
        return f"{label} {head} is not in the log, which ends at event {last}: events were cut off its end"
    if rows[0][0] != head.hash:
        return f"{label} {head}: event {head.position} has hash {rows[0][0]}: the log was rewritten"
    return ""


def _chains_problem(conn: SqlReader, head: Head, label: str) -> str:
    pairs = []
    for chain, position in enumerate(head.chains):
        if position == 0:
            pairs.append((0, GENESIS_HASH))
            continue
        rows = conn.execute("SELECT stream, hash FROM events WHERE position = ?", (position,)).fetchall()
        if not rows:
            return (f"{label} {head}: event {position}, the head of chain {chain}, is not in the log:"
                    " events were cut off its end")
        if chain_for(text_value(rows[0][0]), len(head.chains)) != chain:
            return f"{label} {head}: event {position} is not in chain {chain}: the log was rewritten"
        pairs.append((position, text_value(rows[0][1])))
    if checkpoint_hash(pairs) != head.hash:
        return f"{label} {head}: the chains' heads do not give its checkpoint: the log was rewritten"
    return ""


class HeadFile:
    """``<home>/head``: the last head this home saw. Replaced atomically and durably (temp file,
    fsync, rename, folder fsync), but only now and then, so a crash or power loss can lose the
    heads of the last few seconds: truncation of events written in that window is not noticed.
    A file that cannot be read as a head (empty, garbage, a folder) is kept as evidence, like
    a head the log does not hold: a warning, a usable memory, and every ``verify`` fails.

    The periodic writes happen on a background thread, off the committing writer's path (its
    two fsyncs would hold every other writer back); the file never goes backwards: a head
    reported after a newer one is ignored, and a write never replaces a newer head with an
    older one. The first head of a home, and the one on close (:meth:`flush`), are written
    before the call returns."""

    def __init__(self, path: Path, *, readonly: bool = False, current: Callable[[], Head] | None = None,
                 database: str = "the database", reader: Callable[[], Any] | None = None) -> None:
        """``current``: reads the log's head when a commit did not give it (a store whose head
        costs a query: it is then read only when the file is written). ``database``: how messages
        name the store; ``reader``: a read connection of it, for the log's first event when the
        home's origin is recorded after a commit (else it is recorded at an open)."""
        self.path = path
        self.origin_path = path.with_name(ORIGIN_NAME)
        self.database = database
        self._reader = reader
        self._origin_known = False  # the origin file names this log
        self.foreign = False  # the anchor is of another database's log
        self.readonly = readonly  # a read-only home is checked against its anchor, never written
        self._current = current
        self._stale = False  # commits happened whose head was not given
        self._reports = 0  # commits reported so far (a head read for stale ones covers those before it)
        self._state = threading.Lock()  # several writing threads may report commits (PostgreSQL)
        self._writing = threading.Lock()  # one write of the file at a time, in the order of the heads
        self._behind: threading.Thread | None = None  # the background write in flight
        self.problem = ""  # set when, at open, the log did not hold the anchor: the file is then kept
        self._written_at = time.monotonic()
        self._unwritten = 0
        self._last: Head | None = None
        self._recorded = 0  # the position the file holds (0: none yet, or the empty log)

    def load(self) -> Head | None:
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise BadHeadAnchor(f"cannot be read: {exc}") from exc
        return parse_head(text)

    def check_at_open(self, conn: SqlReader) -> None:
        label = f"this home's last-seen head ({self.path})"
        anchor: Head | None = None
        try:
            anchor = self.load()
        except BadHeadAnchor as exc:
            self.problem = f"{label} is damaged ({exc})"
        else:
            self.problem = "" if anchor is None else head_problem(conn, anchor, label)
            if self.problem and anchor is not None:
                self.problem = self._foreign(conn, anchor) or self.problem
        if self.problem:
            what = ("open the home with its own database, or remove it to make this database the home's"
                    if self.foreign else "remove it to accept the log as it is")
            log.warning("%s; verify fails until this is explained (the file %s is kept as evidence; %s)",
                        self.problem, self.path, what)
            return
        first = _readable_first(conn)
        if first != UNREADABLE:
            self._note_origin(first, replace=anchor is None)
        if anchor is not None:
            self._recorded = anchor.position
            return
        # First open with an anchor: record where the log is (an empty log: at its first commit).
        self._last = read_head(conn)
        self._unwritten = 1 if self._last.position else 0
        self.flush()

    def _foreign(self, conn: SqlReader, anchor: Head) -> str:
        """Why the anchor that does not hold is of another database's log, or empty (unknown: no
        origin recorded; or the same log, rewritten or cut)."""
        try:
            origin = self.origin_path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return ""
        first = _readable_first(conn)
        if not _ORIGIN.fullmatch(origin) or first in (origin, UNREADABLE):
            return ""
        self.foreign = True
        holds = f"whose first event has hash {first}" if first else "which holds no event"
        return (f"the home {self.path.parent} and {self.database} do not belong together: the home's last-seen head"
                f" {anchor} is of another database's log (its first event has hash {origin}, as {self.origin_path}"
                f" says), not of {self.database}, {holds}")

    def _note_origin(self, first: str | None, *, replace: bool) -> None:
        """Record which log the anchor is of (``replace``: the anchor is new, an older origin goes)."""
        if self.readonly:
            return
        try:
            if not replace and self.origin_path.is_file():
                self._origin_known = True
            elif first is None:
                self.origin_path.unlink(missing_ok=True)  # recorded after the first commit
            else:
                replace_durably(self.origin_path, f"{first}\n".encode("ascii"))
                self._origin_known = True
        except OSError as exc:
            log.warning("could not record the log's origin in %s: %s", self.origin_path, exc)

    def anchor(self) -> Head | None:
        """What this home last recorded (``None``: nothing yet, or the file is kept as evidence)."""
        if self.problem:
            return None
        try:
            return self.load()
        except BadHeadAnchor:
            return None

    def advanced(self, head: Head | None, events: int) -> None:
        """After a commit (``head``: the log's head after it, or ``None`` to read it when written):
        write now and then in the background (never while an open-time problem is unexplained),
        and at once while the file holds no event yet: an anchor at position 0 on a log that has
        events is a failed check, so the file must not stay there."""
        with self._state:
            self._reports += 1
            if head is None:
                self._stale = True
            elif self._last is None or head.position >= self._last.position:
                self._last = head  # (an older head reported late is ignored)
            self._unwritten += events
            if self._recorded:
                if self._behind is None and (self._unwritten >= WRITE_EVERY_EVENTS
                                             or time.monotonic() - self._written_at >= WRITE_EVERY_S):
                    self._behind = threading.Thread(target=self._write_behind, name="fermix-head-anchor",
                                                    daemon=True)
                    self._behind.start()
                return
        self.flush()

    def flush(self) -> None:
        """Write the last head now (after any background write in flight)."""
        with self._writing:
            self._write()

    def _write_behind(self) -> None:
        try:
            with self._writing:
                self._write()
        finally:
            with self._state:
                self._behind = None

    def _write(self) -> None:
        """Under ``_writing``: record the newest head known, unless the file holds it already."""
        with self._state:
            if self.readonly or self.problem or self._unwritten == 0:
                return
            last, events, stale, reports = self._last, self._unwritten, self._stale, self._reports
        if stale and self._current is not None:
            try:
                read = self._current()
            except Exception as exc:  # the store is unreachable: the file waits for the next commit
                log.warning("could not read the log head for %s: %s", self.path, exc)
                return
            with self._state:
                if self._last is None or read.position >= self._last.position:
                    self._last = read
                self._stale = self._reports != reports  # commits reported since may be past what was read
                last = self._last
        if last is None:
            return
        if self._recorded and last.position < self._recorded:  # never backwards
            return
        try:
            replace_durably(self.path, f"{last}\n".encode("ascii"))
        except OSError as exc:
            log.warning("could not record the log head in %s: %s", self.path, exc)
            return
        with self._state:
            self._written_at = time.monotonic()
            self._unwritten -= events
            self._recorded = last.position
        if not self._origin_known and self._reader is not None:
            try:
                first = first_hash(self._reader())
            except Exception as exc:  # the store is unreachable: the next write or open records it
                log.debug("could not read the log's first event for %s: %s", self.origin_path, exc)
            else:
                self._note_origin(first, replace=True)
