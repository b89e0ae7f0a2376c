"""The head anchor (ADR-0011): the log's last (position, hash), kept OUTSIDE the database so that
cutting events off the end of the log — which leaves a perfectly valid shorter chain — shows.

Operators keep ``fermix events head`` output elsewhere and check it with ``verify
--expect-head``; the home keeps its own last-seen head in ``<home>/head``, written after commits
(at most every :data:`WRITE_EVERY_EVENTS` events or :data:`WRITE_EVERY_S` seconds, and on close).
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from pathlib import Path

import apsw
import attrs

from fermix_memory.adapters.sqlite.connection import int_value, text_value
from fermix_memory.application.errors import IntegrityError
from fermix_memory.domain.values import preview

log = logging.getLogger("fermix_memory.storage")

GENESIS_HASH = "0" * 64
WRITE_EVERY_EVENTS = 1_000
WRITE_EVERY_S = 5.0
_HEAD = re.compile(r"(\d{1,18}):([0-9a-f]{64})")


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


def read_head(conn: apsw.Connection) -> Head:
    rows = conn.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchall()
    return Head(int_value(rows[0][0]), text_value(rows[0][1])) if rows else Head(0, GENESIS_HASH)


def head_problem(conn: apsw.Connection, head: Head, label: str) -> str:
    """Empty when the log holds ``head``; else why not (truncated, or rewritten)."""
    if head.position == 0:
        return ""
    rows = conn.execute("SELECT hash FROM events WHERE position = ?", (head.position,)).fetchall()
    if not rows:
        last = read_head(conn).position
        return f"{label} {head} is not in the log, which ends at event {last}: events were cut off its end"
    if rows[0][0] != head.hash:
        return f"{label} {head}: event {head.position} has hash {rows[0][0]}: the log was rewritten"
    return ""


class HeadFile:
    """``<home>/head``: the last head this home saw. Written atomically (temp file + rename),
    without an fsync per write, so a crash or power loss can lose the last few seconds of it:
    truncation of events written in that window is not noticed by it."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly  # a read-only home is checked against its anchor, never written
        self.problem = ""  # set when, at open, the log did not hold the anchor: the file is then kept
        self._written_at = time.monotonic()
        self._unwritten = 0
        self._last: Head | None = None

    def load(self) -> Head | None:
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise BadHeadAnchor(f"{self.path} cannot be read: {exc}") from exc
        return parse_head(text)

    def check_at_open(self, conn: apsw.Connection) -> None:
        try:
            anchor = self.load()
            label = f"this home's last-seen head ({self.path})"
            self.problem = "" if anchor is None else head_problem(conn, anchor, label)
        except BadHeadAnchor as exc:
            self.problem = str(exc)
        if anchor is None and not self.problem:  # first open with an anchor: record where the log is
            self._last, self._unwritten = read_head(conn), 1
            self.flush(sync=False)
        if self.problem:
            log.warning("%s; verify fails until this is explained (the file %s is kept as evidence; remove it"
                        " to accept the log as it is)", self.problem, self.path)

    def anchor(self) -> Head | None:
        """What this home last recorded (``None``: nothing yet, or the file is kept as evidence)."""
        if self.problem:
            return None
        try:
            return self.load()
        except BadHeadAnchor:
            return None

    def advanced(self, head: Head, events: int) -> None:
        """After a commit: write now and then (never while an open-time problem is unexplained)."""
        self._last = head
        self._unwritten += events
        if self._unwritten >= WRITE_EVERY_EVENTS or time.monotonic() - self._written_at >= WRITE_EVERY_S:
            self.flush(sync=False)

    def flush(self, *, sync: bool) -> None:
        if self.readonly or self.problem or self._last is None or self._unwritten == 0:
            return
        tmp = ""
        try:
            fd, tmp = tempfile.mkstemp(prefix=".head.", suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(f"{self._last}\n")
                if sync:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError:
            log.exception("could not record the log head in %s", self.path)
            if tmp:
                Path(tmp).unlink(missing_ok=True)
            return
        self._written_at = time.monotonic()
        self._unwritten = 0
