"""The reads of a PostgreSQL store: on a connection of the store's own while one caller at a time
reads, on the pool's otherwise (ADR-0088).

Most reads come one after another from one thread (a host's recall, its prompt's reads): each
taken from the pool and given back costs that thread more than a small statement's own work
(the pool's lock, checks and bookkeeping), and goes to whichever session the pool hands out, so
a grown pool spreads one host's reads over sessions that each prepare and warm up alone. The
store's own read connection is taken with a lock that is never waited on: a read finding it
busy takes a pooled connection as before. A connection that failed, or that a read left in any
state but idle, is closed and opened again at the next read; while it cannot be opened, the
reads go to the pool (which reports an unreachable server as it does).

A store's writes take a connection of their own the same way (``held``, ADR-0099).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fermix_memory.adapters.postgres.connection import CONNECT_TIMEOUT_S, PgCursor

log = logging.getLogger("fermix_memory.postgres")

# After a failed attempt to open the read connection, the pool serves the reads this long.
REOPEN_AFTER_S = 5.0


class ReadConnections:
    """Rows of one read, on the store's own read connection when free, else on ``pool``'s (and,
    through :meth:`held`, a store's writes on a connection of their own the same way).
    The read connection is opened to ``url`` with the pool's connection ``options`` (``url``
    ``None``: there is none, every read is the pool's: a store of one connection keeps every
    statement on it); ``failed(conn, exc)`` is the error a read's failure on ``conn`` raises
    (``exc`` itself: raised as it is)."""

    def __init__(self, pool: Any, url: str | None, options: dict[str, Any]) -> None:
        self._pool = pool
        self._connect: Callable[[], Any] | None = None if url is None else functools.partial(
            _connect, url, options)
        self._lock = threading.Lock()
        self._conn: Any = None
        self._closed = False
        self._reopen_at = 0.0

    def rows(self, sql: str, params: Any, prepare: bool | None,
             failed: Callable[[Any, Exception], BaseException]) -> list[tuple[Any, ...]]:
        own = self._take()
        conn = own
        try:
            if conn is None:
                conn = self._pool.getconn()
            return PgCursor.reading(conn, prepare).execute(sql, params).fetchall()
        except Exception as exc:
            error = failed(conn, exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            if own is not None:
                self._give_back(own)
            elif conn is not None:
                self._pool.putconn(conn)

    @contextmanager
    def held(self) -> Iterator[Any]:
        """The store's own connection while this caller holds it, else a pooled one."""
        own = self._take()
        if own is None:
            with self._pool.connection() as conn:
                yield conn
            return
        try:
            yield own
        finally:
            self._give_back(own)

    def close(self) -> None:
        """Close the read connection (waiting for a read on it to end); later reads use the pool."""
        with self._lock:
            conn, self._conn, self._closed = self._conn, None, True
        if conn is not None:
            conn.close()

    def _take(self) -> Any:
        """The read connection, held, if no other read holds it (else ``None``: use the pool)."""
        if self._connect is None or not self._lock.acquire(blocking=False):
            return None
        conn = self._conn
        if conn is None and not self._closed and time.monotonic() >= self._reopen_at:
            try:
                conn = self._conn = self._connect()
            except Exception:
                log.debug("opening the read connection failed; the pool serves the reads", exc_info=True)
                self._reopen_at = time.monotonic() + REOPEN_AFTER_S
        if conn is None:
            self._lock.release()
        return conn

    def _give_back(self, conn: Any) -> None:
        """Release the read connection; one that failed or is not idle is closed, not kept."""
        try:
            pgconn = conn.pgconn  # closed or broken: BAD; a read left unfinished: not idle
            if pgconn.status != _OK or pgconn.transaction_status != _IDLE:
                self._conn = None
                conn.close()
        finally:
            self._lock.release()


def _connect(url: str, options: dict[str, Any]) -> Any:
    import psycopg

    return psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, **options)


# A connection that works, between statements (autocommit: every read is one); absent without
# the driver, which the store checks for before it makes any of this.
_OK: Any = None
_IDLE: Any = None
try:
    from psycopg.pq import ConnStatus, TransactionStatus

    _OK, _IDLE = ConnStatus.OK, TransactionStatus.IDLE
except ImportError:  # pragma: no cover - the [postgres] extra is optional
    pass
