"""Checkpoints of the writer's WAL, off the thread that commits (ADR-0046).

SQLite's own automatic checkpoint runs inside the COMMIT that takes the log past 1,000 pages:
that commit copies the log's pages into the database file and syncs both, a stall of several
milliseconds on one append in some seventy. Here the writer connection's WAL hook only asks a
thread of this store to checkpoint (``PASSIVE``, on a connection of its own: it waits for nobody
and nobody waits for it) each time the log grew by :data:`EVERY_PAGES`. A log that keeps
growing because commits never leave the checkpoint a moment to catch up (a checkpoint only
empties the log when it copied every page before the next commit begins) is checkpointed by
the committing thread itself once it reaches :data:`BACKSTOP_PAGES`: the background has
copied nearly all of it by then, so that checkpoint is short, and the next commit starts the
log afresh.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw

log = logging.getLogger("fermix_memory.storage")

# The background checkpoints each time the log grew by this many pages (SQLite's own default).
EVERY_PAGES = 1_000
# The committing thread checkpoints a log this long itself (32 MiB of 4 KiB pages).
BACKSTOP_PAGES = 8_000
# A log started afresh is cut back to this size (bytes) when it grew longer (a bulk import's
# commits): above the backstop's length, so the log of steady appends is reused as it is
# (cutting it back each time, and growing it again, made appends slower).
LOG_SIZE_LIMIT = 64 * 1024 * 1024
JOIN_S = 10.0


class WalCheckpoints:
    """Install :meth:`after_commit` as the writer connection's WAL hook; :meth:`held` keeps
    background checkpoints out of a block (whole-file work); :meth:`close` before the writer."""

    def __init__(self, connect: Callable[[], apsw.Connection], *, every_pages: int = EVERY_PAGES,
                 backstop_pages: int = BACKSTOP_PAGES) -> None:
        """``connect``: opens the connection the background checkpoints through (at its first)."""
        self._connect = connect
        self._every, self._backstop = every_pages, backstop_pages
        self._wake = threading.Condition()
        self._wanted = False
        self._busy = False  # the background took a request and has not finished it
        self._closed = False
        self._mark = 0  # the log's length when the background was last asked
        self._thread: threading.Thread | None = None
        self._running = threading.Lock()  # held by a background checkpoint, and by :meth:`held`
        self.background_runs = 0  # checkpoints the background ran
        self.inline_runs = 0  # checkpoints a committing thread ran (the log reached the backstop)

    def install(self, writer: apsw.Connection) -> None:
        """Take over the writer's checkpoints (SQLite's automatic ones stop: one hook per connection)."""
        writer.execute(f"PRAGMA journal_size_limit = {LOG_SIZE_LIMIT}").fetchall()
        writer.setwalhook(self.after_commit)

    def after_commit(self, conn: apsw.Connection, db: str, pages: int) -> int:
        """The WAL hook: SQLite calls it after each commit, the write lock released, with the
        log's length in pages. It never raises: the commit has happened."""
        try:
            if pages < self._mark:
                self._mark = 0  # the log was started afresh
            if pages >= self._backstop:
                self._mark = 0
                self.inline_runs += 1
                conn.wal_checkpoint(db)  # passive; busy when the background runs one: it goes on
            elif pages - self._mark >= self._every:
                self._mark = pages
                self._ask()
        except apsw.BusyError:
            pass
        except Exception as exc:  # the commit stands whatever happens here
            log.warning("checkpoint of %s after a commit failed: %s", conn.filename, exc)
        return apsw.SQLITE_OK

    def _ask(self) -> None:
        with self._wake:
            if self._closed:
                return
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fermix-wal-checkpoint", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        conn: apsw.Connection | None = None
        try:
            while True:
                with self._wake:
                    while not self._wanted and not self._closed:
                        self._wake.wait()
                    if self._closed:
                        return
                    self._wanted, self._busy = False, True
                try:
                    with self._running:
                        if conn is None:
                            conn = self._connect()
                            # A connection checkpoints only once it has read the file (WAL or not).
                            conn.execute("PRAGMA user_version").fetchall()
                        conn.wal_checkpoint()  # passive
                        self.background_runs += 1
                except apsw.BusyError:
                    pass  # another checkpoint runs (another process, or the backstop)
                except Exception as exc:  # the file cannot be opened or written: the next request tries again
                    log.warning("background checkpoint failed (the next one tries again): %s", exc)
                finally:
                    with self._wake:
                        self._busy = False
        finally:
            if conn is not None:
                conn.close()

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
