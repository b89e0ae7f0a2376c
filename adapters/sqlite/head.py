"""The head anchor (ADR-0011): the log's last (position, hash), kept OUTSIDE the database so that
cutting events off the end of the log — which leaves a perfectly valid shorter chain — shows.

Operators keep ``fermix events head`` output elsewhere and check it with ``verify
--expect-head``; the home keeps its own last-seen head in ``<home>/head``, written after commits
(at most every :data:`WRITE_EVERY_EVENTS` events or :data:`WRITE_EVERY_S` seconds, and on close).
An anchor naming position 0 (the empty log) holds only for an empty log.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import apsw
import attrs

from fermix_memory.adapters.durable_file import replace_durably
from fermix_memory.adapters.sqlite.connection import int_value, text_value
from fermix_memory.application.errors import IntegrityError
from fermix_memory.domain.log_chain import GENESIS_HASH
from fermix_memory.domain.values import INT64_MAX, preview

log = logging.getLogger("fermix_memory.storage")

WRITE_EVERY_EVENTS = 1_000
WRITE_EVERY_S = 5.0
_HEAD = re.compile(r"([0-9]{1,18}):([0-9a-f]{64})")


class BadHeadAnchor(IntegrityError):
    """A head anchor that is not ``POSITION:HASH`` (64 lower-case hex digits)."""


@attrs.frozen
class Head:
    """The last event of the log: its position and row hash (position 0: an empty log)."""

    position: int
    hash: str

    def __str__(self) -> str:
        return f"{self.position}:{self.hash}"


def parse_head(text: str) -> Head:
    match = _HEAD.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise BadHeadAnchor(f"a head anchor is POSITION:HASH (64 hex digits), got {preview(text, 80)}")
    return Head(int(match.group(1)), match.group(2))


def checked_head(value: object) -> Head:
    """``value`` as a :class:`Head`: its ``POSITION:HASH`` text, or a ``Head`` whose position is
    a log position (0 to 2**63-1) and whose hash is 64 lower-case hex digits."""
    if not isinstance(value, Head):
        return parse_head(value)  # type: ignore[arg-type]  # not text either: parse_head says so
    position, digest = value.position, value.hash
    if type(position) is not int or not 0 <= position <= INT64_MAX:
        shown = str(position) if type(position) is int and abs(position) < 10**30 else preview(position)
        raise BadHeadAnchor(f"a head anchor's position is a whole number from 0 to {INT64_MAX}, got {shown}")
    return parse_head(f"{position}:{digest}") if isinstance(digest, str) else parse_head(digest)


def read_head(conn: apsw.Connection) -> Head:
    rows = conn.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchall()
    return Head(int_value(rows[0][0]), text_value(rows[0][1])) if rows else Head(0, GENESIS_HASH)


def head_problem(conn: apsw.Connection, head: Head, label: str) -> str:
    """Empty when the log holds ``head``; else why not (truncated, or rewritten). Position 0 is
    the empty log: it holds only while the log is empty (else anything would pass for it)."""
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


class HeadFile:
    """``<home>/head``: the last head this home saw. Replaced atomically and durably (temp file,
    fsync, rename, folder fsync), but only now and then, so a crash or power loss can lose the
    heads of the last few seconds: truncation of events written in that window is not noticed.
    A file that cannot be read as a head (empty, garbage, a folder) is kept as evidence, like
    a head the log does not hold: a warning, a usable memory, and every ``verify`` fails."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly  # a read-only home is checked against its anchor, never written
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

    def check_at_open(self, conn: apsw.Connection) -> None:
        label = f"this home's last-seen head ({self.path})"
        anchor: Head | None = None
        try:
            anchor = self.load()
        except BadHeadAnchor as exc:
            self.problem = f"{label} is damaged ({exc})"
        else:
            self.problem = "" if anchor is None else head_problem(conn, anchor, label)
        if self.problem:
            log.warning("%s; verify fails until this is explained (the file %s is kept as evidence; remove it"
                        " to accept the log as it is)", self.problem, self.path)
            return
        if anchor is not None:
            self._recorded = anchor.position
            return
        # First open with an anchor: record where the log is (an empty log: at its first commit).
        self._last = read_head(conn)
        self._unwritten = 1 if self._last.position else 0
        self.flush()

    def anchor(self) -> Head | None:
        """What this home last recorded (``None``: nothing yet, or the file is kept as evidence)."""
        if self.problem:
            return None
        try:
            return self.load()
        except BadHeadAnchor:
            return None

    def advanced(self, head: Head, events: int) -> None:
        """After a commit: write now and then (never while an open-time problem is unexplained),
        and at once while the file holds no event yet: an anchor at position 0 on a log that has
        events is a failed check, so the file must not stay there."""
        self._last = head
        self._unwritten += events
        if self._unwritten >= WRITE_EVERY_EVENTS or time.monotonic() - self._written_at >= WRITE_EVERY_S \
                or not self._recorded:
            self.flush()

    def flush(self) -> None:
        if self.readonly or self.problem or self._last is None or self._unwritten == 0:
            return
        try:
            replace_durably(self.path, f"{self._last}\n".encode("ascii"))
        except OSError as exc:
            log.warning("could not record the log head in %s: %s", self.path, exc)
            return
        self._written_at = time.monotonic()
        self._unwritten = 0
        self._recorded = self._last.position
