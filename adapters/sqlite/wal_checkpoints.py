"""Checkpoints of the writer's WAL in the pauses between commits (ADR-0046).

SQLite's own automatic checkpoint runs inside the COMMIT that takes the log past 1,000 pages:
that commit copies the log's pages into the database file and syncs both, a stall of several
milliseconds on one append in some seventy. A host's appends come in bursts (a turn's few
messages) with pauses between them. Here the writer connection's WAL hook asks a thread of this
store for a checkpoint once the log holds :data:`EVERY_PAGES`; the thread waits for a pause of
:data:`QUIET_S` without a commit and then checkpoints (``PASSIVE``, on a connection of its own:
it waits for nobody and nobody waits for it). A checkpoint that copied every page lets the next
commit start the log afresh, so a host that pauses never reaches SQLite's threshold, and no
append carries a checkpoint. Appends that never pause get what SQLite did: the committing thread
checkpoints the log once it holds :data:`BACKSTOP_PAGES`. A host that says it pauses
(``wait_for_background``) has the log checkpointed at once (:meth:`WalCheckpoints.settle`).

Appends that never pause (ADR-0067): once the log holds :data:`NONSTOP_PAGES` the thread no longer
waits for a pause. It catches up (``PASSIVE`` checkpoints, each copying what came during the one
before, until few pages came meanwhile and few are left). SQLite starts the log afresh only when
a commit begins on a log that was copied whole, which a thread beside appends that never pause
cannot make happen; so the committing thread, at its next commit, copies the few pages left
(:attr:`WalCheckpoints.tail_runs`) and the commit after it starts the log afresh. The backstop
(the whole log copied by a commit) is then reached only if the thread cannot keep up.

A tail copy syncs the log and the database file on the committing thread (milliseconds on a busy
disk), so it is left until the log holds :data:`RESET_PAGES`: before that, a catch-up that copied
the log is followed by the next one once :data:`NONSTOP_PAGES` more came, and the backstop counts
the pages no catch-up copied yet (ADR-0093, amended).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw

from fermix_memory.application.store_ports import PAUSE_S

log = logging.getLogger("fermix_memory.storage")

# The log's length (pages) from which the background is asked for a checkpoint in the next pause.
EVERY_PAGES = 100
# A pause: this long without a commit (the host's pause, as the index upkeep waits for).
QUIET_S = PAUSE_S
# The committing thread checkpoints a log this long itself (SQLite's own automatic threshold).
BACKSTOP_PAGES = 1_000
# The log's length from which appends that never paused are caught up with at once, not in a pause.
NONSTOP_PAGES = 600
# A catch-up stops once a step found at most this many new pages and left at most as many; the
# committing thread copies what is left if it is at most :data:`TAIL_LIMIT` pages when it looks.
TAIL_PAGES = 32
TAIL_LIMIT = 4 * TAIL_PAGES
CATCH_UP_STEPS = 3
# The log's length from which a committing thread copies what a catch-up left (and the log then
# starts afresh); below it the background catches up again once the log grew NONSTOP_PAGES more.
RESET_PAGES = 3 * NONSTOP_PAGES
# A catch-up that left too much (a reader keeps old pages, or the appends ran ahead) is asked for
# again once the log grew this much more.
RETRY_PAGES = 64
JOIN_S = 10.0


class WalCheckpoints:
    """Install with :meth:`install` on the writer connection; :meth:`held` keeps background
    checkpoints out of a block (whole-file work); :meth:`close` before the writer closes."""

    def __init__(self, connect: Callable[[], apsw.Connection], *, every_pages: int = EVERY_PAGES,
                 quiet_s: float = QUIET_S, backstop_pages: int = BACKSTOP_PAGES,
                 nonstop_pages: int | None = None, reset_pages: int | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """``connect``: opens the connection the background checkpoints through (at its first);
        ``nonstop_pages``: :data:`NONSTOP_PAGES` as it is when the store opens, unless given;
        ``reset_pages``: :data:`RESET_PAGES` as it is then (the nonstop mark when ``nonstop_pages``
        is given alone)."""
        self._connect = connect
        self._every, self._quiet_s, self._backstop = every_pages, quiet_s, backstop_pages
        nonstop = NONSTOP_PAGES if nonstop_pages is None else nonstop_pages
        self._nonstop = self._catch_up_at = nonstop  # the writer's hook moves the latter
        self._reset = (RESET_PAGES if nonstop_pages is None else nonstop) if reset_pages is None else reset_pages
        self._monotonic = monotonic
        self._wake = threading.Condition()
        self._wanted = False  # a checkpoint was asked for and has not started
        self._now = False  # ... and it is a catch-up, which waits for no pause
        self._catching_up = False  # a catch-up was asked for and has not finished
        self._busy = False  # the background took a request and has not finished it
        self._closed = False
        self._last_commit = monotonic()
        self._thread: threading.Thread | None = None
        self._running = threading.Lock()  # held by a checkpoint on ``_conn``, and by :meth:`held`
        self._conn: apsw.Connection | None = None  # what checkpoints run through (``_running`` held)
        self.background_runs = 0  # checkpoints the background ran (a catch-up counts once)
        self.tail_runs = 0  # what a catch-up left, copied by a committing thread
        self._copied: int | None = None  # how far the last catch-up copied the log (None: no tail to copy)
        self._done = 0  # how far checkpoints copied the log since it last started afresh
        self.inline_runs = 0  # checkpoints a committing thread ran (the log reached the backstop)
        # A commit on a thread that must not wait (ADR-0110) runs no checkpoint, which syncs; at
        # the backstop it leaves one ``due`` to the next commit that may wait.
        self.at_once = False
        self.due = False
        self.settled_runs = 0  # checkpoints :meth:`settle` ran

    def install(self, writer: apsw.Connection) -> None:
        """Take over the writer's checkpoints (SQLite's automatic ones stop: one hook per connection)."""
        writer.setwalhook(self.after_commit)

    def after_commit(self, conn: apsw.Connection, db: str, pages: int) -> int:
        """The WAL hook: SQLite calls it after each commit, the write lock released, with the
        log's length in pages. It never raises: the commit has happened."""
        self._last_commit = self._monotonic()
        try:
            if pages < self._done:  # the log started afresh
                self._done = 0
            self.due = self.due and self.at_once  # a commit that may wait runs what is due, or finds none
            if pages - self._done >= self._backstop:
                if self.at_once:  # left to the next commit that may wait; the background asked now
                    self.due = True
                    self._ask(now=True)
                else:  # passive; busy while the background runs one: that one goes on
                    self.inline_runs += 1
                    self._done = conn.wal_checkpoint(db)[1]
            elif pages < self._nonstop:
                self._catch_up_at, self._copied = self._nonstop, None
                if pages >= self._every and not self._wanted:
                    self._ask()
            elif not self.at_once and (copied := self._copied) is not None and \
                    copied <= pages <= copied + TAIL_LIMIT and pages >= self._reset:
                self._copied = None
                # Passive: the pages since the catch-up's; the log then starts afresh.
                self._done = conn.wal_checkpoint(db)[1]
                self.tail_runs += 1
            elif pages >= self._catch_up_at and not self._catching_up:
                # A catch-up; again a while later if it met a reader on old pages, or fell behind.
                self._catch_up_at, self._copied, self._catching_up = pages + RETRY_PAGES, None, True
                self._ask(now=True)
        except apsw.BusyError:
            pass
        except Exception as exc:  # the commit stands whatever happens here
            log.warning("checkpoint of %s after a commit failed: %s", conn.filename, exc)
        return apsw.SQLITE_OK

    def _ask(self, *, now: bool = False) -> None:
        with self._wake:
            if self._closed:
                return
            self._wanted = True
            self._now = self._now or now
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fermix-wal-checkpoint", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _pause(self) -> bool:
        """Under ``_wake``: wait until no commit came for ``quiet_s`` (or a catch-up is asked
        for, which waits for none); False once closed."""
        while not self._closed:
            if self._now:
                return True
            left = self._last_commit + self._quiet_s - self._monotonic()
            if left <= 0:
                return True
            self._wake.wait(left)
        return False

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._wanted and not self._closed:
                    self._wake.wait()
                if not self._pause():
                    return
                if not self._wanted:
                    continue  # answered meanwhile by :meth:`settle`
                catch_up, self._wanted, self._now, self._busy = self._now, False, False, True
            try:
                with self._running:
                    if self._catch_up() if catch_up else self._checkpoint():
                        self.background_runs += 1
            finally:
                with self._wake:
                    self._busy = False
                    if catch_up:
                        self._catching_up = False

    def _checkpoint(self) -> bool:
        """One passive checkpoint on the connection of checkpoints (``_running`` held); False
        when it did not run (busy, or a failure, logged: the next request tries again)."""
        def passive(conn: apsw.Connection) -> bool:
            conn.wal_checkpoint()
            return True
        return self._checkpoints(passive)

    def _catch_up(self) -> bool:
        """Catch up with appends that never pause (``_running`` held): passive steps until one
        found at most :data:`TAIL_PAGES` new pages and left at most as many uncopied (a reader on
        old pages keeps them: then after :data:`CATCH_UP_STEPS`); the committing thread is told
        how far the log was copied."""
        def steps(conn: apsw.Connection) -> bool:
            seen = -TAIL_PAGES - 1
            for _ in range(CATCH_UP_STEPS):
                logged, copied = conn.wal_checkpoint()
                if logged - seen <= TAIL_PAGES and logged - copied <= TAIL_PAGES:
                    break
                seen = logged
            self._done = max(self._done, copied)
            if logged - copied <= TAIL_PAGES:  # caught up: the next one once the log grew as much again
                self._catch_up_at = max(self._catch_up_at, copied + self._nonstop)
            self._copied = copied
            return True
        return self._checkpoints(steps)

    def _checkpoints(self, run: Callable[[apsw.Connection], bool]) -> bool:
        try:
            if self._conn is None:
                if self._closed:
                    return False
                self._conn = self._connect()
                # A connection checkpoints only once it has read the file (WAL or not).
                self._conn.execute("PRAGMA user_version").fetchall()
            return run(self._conn)
        except apsw.BusyError:
            return False  # another checkpoint runs (another process, or the backstop)
        except Exception as exc:  # the file cannot be opened or written
            log.warning("checkpoint of the log failed (the next one tries again): %s", exc)
            return False

    def settle(self, timeout: float | None = None) -> bool:
        """The host pauses now: checkpoint what the log holds at once, in the calling thread (a
        request waiting for a pause is answered by it). False when ``timeout`` passed first (a
        checkpoint or whole-file work held the connection that long)."""
        with self._wake:
            if self._closed:
                return True
            self._wanted = self._now = self._catching_up = False
        if not self._running.acquire(timeout=-1 if timeout is None else timeout):
            return False
        try:
            if self._checkpoint():
                self.settled_runs += 1
        finally:
            self._running.release()
        return True

    @contextmanager
    def held(self) -> Iterator[None]:
        """No background checkpoint runs during the block (one in progress finishes first)."""
        with self._running:
            yield

    def idle(self) -> bool:
        """Whether no checkpoint is asked for or running."""
        with self._wake:
            return not self._wanted and not self._busy

    def close(self) -> None:
        """Stop the background (a checkpoint in progress finishes) and close its connection."""
        with self._wake:
            self._closed = True
            thread = self._thread
            self._wake.notify()
        if thread is not None:
            thread.join(JOIN_S)
        if self._running.acquire(timeout=JOIN_S):
            try:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
            finally:
                self._running.release()
