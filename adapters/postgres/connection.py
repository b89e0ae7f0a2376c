"""Connections to the PostgreSQL server: the URL's checks, driver errors translated at the edge
into the store's typed errors, and the cursor the shared projections write through."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import urlsplit

from fermix_memory.adapters.postgres.prepared import prepared_rows
from fermix_memory.adapters.postgres.write_pipeline import WritePipeline
from fermix_memory.application.errors import ConfigError, StorageBusy, StorageError
from fermix_memory.application.settings_storage import URL_SHAPE, storage_url_problem

try:
    import psycopg
    from psycopg import errors as pg_errors
except ImportError:  # the [postgres] extra is optional: ``require_driver`` says so in one line
    psycopg = None  # type: ignore[assignment]
    pg_errors = None  # type: ignore[assignment]

EXTRA_MISSING = ("a PostgreSQL URL is configured but the PostgreSQL driver is not installed:"
                 " pip install 'fermix-memory[postgres]'")
CONNECT_TIMEOUT_S = 5


class StoreUnreachable(StorageError):
    """The PostgreSQL server could not be reached, refused the connection, or has no such database."""


def require_driver() -> None:
    if psycopg is None:
        raise ConfigError(EXTRA_MISSING)
    try:
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise ConfigError(EXTRA_MISSING) from None


def shown(url: str) -> str:
    """The URL as it may be shown in an error: never a password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def described(url: str) -> str:
    """How a message names the database of ``url`` (never its password)."""
    return f"the PostgreSQL database {shown(url)}"


def check_url(url: str, source: str) -> str:
    """``url`` if it names a PostgreSQL database without a password, else a ``ConfigError``
    saying what is wrong (the password comes from PGPASSWORD or the password file, ADR-0029)."""
    problem = storage_url_problem(url) if isinstance(url, str) and url.strip() else f"empty; give {URL_SHAPE}"
    if problem is not None:
        raise ConfigError(f"{source} is {problem}")
    return url


def connection_failure(url: str, exc: BaseException) -> StoreUnreachable:
    """One clear line for a failed connection: refused, unknown host, missing database, refused login."""
    text = " ".join(str(exc).split())
    database = urlsplit(url).path.strip("/")
    if "does not exist" in text and "database" in text:
        why = f"the database {database!r} does not exist on the server (create it: createdb {database})"
    elif "password authentication failed" in text or "no password supplied" in text:
        why = "the server refused the login (the password comes from PGPASSWORD or ~/.pgpass)"
    elif "Connection refused" in text or "No such file or directory" in text:
        why = "no PostgreSQL server answers there (connection refused)"
    elif "could not translate host name" in text or "Name or service not known" in text:
        why = "the host name is unknown"
    else:
        why = text
    return StoreUnreachable(f"cannot open the PostgreSQL store {shown(url)}: {why}")


def connect(url: str) -> Any:
    """A new connection, outside the pool (migrations, checks at open)."""
    require_driver()
    try:
        return psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
    except psycopg.Error as exc:
        raise connection_failure(url, exc) from None


def is_retryable(exc: BaseException) -> bool:
    """A write that PostgreSQL undid to let another go first, or that met a statement the
    session had dropped (``write_pipeline``): run it again."""
    return pg_errors is not None and isinstance(
        exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected | pg_errors.InvalidSqlStatementName)


def session_lost(conn: Any, exc: BaseException) -> bool:
    """Whether ``exc`` says that ``conn``'s session is gone: the connection is broken or closed, or
    the failure is the connection's own (libpq's, without a SQLSTATE; class 08) or the server's
    ending of the session (57P01-57P04) before libpq has read the end of the stream."""
    if conn.broken:
        return True
    if psycopg is None or not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    code = exc.sqlstate
    return bool(conn.closed) or code is None or code.startswith(("08", "57P"))


def translated(exc: BaseException, doing: str) -> BaseException:
    """The store's typed error for a driver error (others are returned as they are)."""
    if psycopg is None or not isinstance(exc, psycopg.Error):
        return exc
    if is_retryable(exc):
        return StorageBusy(f"{doing}: the server kept undoing the write to let others go first: {exc}")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StorageError(f"{doing}: the connection to the PostgreSQL server was lost; if this was a write,"
                            f" it may or may not have committed: {' '.join(str(exc).split())}")
    return StorageError(f"{doing} failed, nothing of it was applied: {' '.join(str(exc).split())}")


@contextmanager
def translated_errors(doing: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        error = translated(exc, doing)
        if error is exc:
            raise
        raise error from exc


_PLACEHOLDER = re.compile(r"\?|(?<![:\w]):([A-Za-z_]\w*)")


@functools.lru_cache(maxsize=1024)
def pg_sql(sql: str) -> str:
    """SQL written with SQLite's placeholders (``?``, ``:name``) in psycopg's (``%s``, ``%(name)s``)."""
    return _PLACEHOLDER.sub(lambda m: "%s" if m.group(0) == "?" else f"%({m.group(1)})s", sql.replace("%", "%%"))


@functools.lru_cache(maxsize=1024)
def pipelined_prepare(sql: str) -> bool:
    """Whether a statement of a write's pipeline is server-side prepared at its first run on a
    connection (ADR-0072): its statements, not the transaction's control (BEGIN, COMMIT,
    NOTIFY). The driver forgets a statement whose answer was not a success (one parsed or
    skipped in a pipeline the server aborted), and the ROLLBACK after a failed write drops
    every statement on the connection, so none is believed prepared and missing."""
    return sql.lstrip()[:7].upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"))


# How many rows one INSERT of a write's batch takes at most (ADR-0099): a batch is cut into
# statements of these sizes, largest first, so an INSERT has few shapes to prepare on a connection.
ROWS_AT_ONCE = (64, 16, 4, 1)
_ONE_ROW = re.compile(r"(\s*INSERT\s+INTO\s.+?\bVALUES\s*)(\((?:\s*\?\s*,)*\s*\?\s*\))(.*)", re.S | re.I)
_NOT_PER_ROW = re.compile(r"\bRETURNING\b|\bDO\s+UPDATE\b", re.I)


@functools.lru_cache(maxsize=256)
def rows_sql(sql: str, count: int) -> str | None:
    """``sql``, an INSERT of one row of ``?`` placeholders, inserting ``count`` rows in one
    statement: the rows in order, each row's triggers as for a statement of its own, a conflict
    skipped (``DO NOTHING``) row by row. ``None`` for any other statement, and for an INSERT
    that returns rows or updates on a conflict (their answers differ from the rows one by one)."""
    match = _ONE_ROW.fullmatch(sql)
    if match is None or _NOT_PER_ROW.search(match.group(3)):
        return None
    return match.group(1) + ", ".join([match.group(2)] * count) + match.group(3)


# The attribute of a connection holding the driver cursor of its reads: kept with the connection,
# gone when it is (a weak-keyed map would keep every connection alive: a cursor refers to its own).
_READ_CURSOR = "_fermix_read_cursor"


class PgCursor:
    """The shared core's :class:`~fermix_memory.adapters.sql.cursor.SqlCursor` on a psycopg
    connection (``execute(...).fetchall()``, ``executemany``, iteration, ``connection.changes()``),
    SQLite's placeholders translated: the same SQL runs on every dialect.

    ``pipeline``: a write's :class:`~.write_pipeline.WritePipeline` on the connection
    (ADR-0064, ADR-0099): a statement is queued without waiting for its answer, and the answers
    of everything queued so far are waited for only when a result is asked for (``fetchall``,
    ``changes``): the statements that return nothing travel with the next read or with the
    COMMIT. A write's statements are prepared (``pipelined_prepare``).

    ``prepare``: a read outside a pipeline is a server-side prepared statement from its first
    run on a connection (recall's statements, ADR-0029) instead of after psycopg's fifth: each
    unprepared run is planned again, and the first plans of a new connection are its slowest.
    Such a read runs in one libpq call of its own when it can (``prepared.prepared_rows``)."""

    _rows: list[tuple[Any, ...]] | None = None  # the rows of the last read run by ``prepared_rows``
    _answer: Any = None  # in a pipeline: the answer of the last statement (``WritePipeline.send``)

    def __init__(self, conn: Any, pipeline: WritePipeline | None = None, *, prepare: bool | None = None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self._prepare = False if pipeline is not None else prepare
        self.connection = self
        self._cur: Any = conn.cursor() if pipeline is None else None

    @classmethod
    def reading(cls, conn: Any, prepare: bool | None) -> PgCursor:
        """A cursor for one read on ``conn`` outside a pipeline, whose driver cursor is kept with
        the connection for its next reads (making one costs a tenth of a small read); its rows
        must be fetched before the connection runs anything else."""
        self = cls.__new__(cls)
        self._conn = conn
        self._cur = getattr(conn, _READ_CURSOR, None)
        if self._cur is None or self._cur.closed:
            self._cur = conn.cursor()
            setattr(conn, _READ_CURSOR, self._cur)
        self._pipeline, self._prepare, self.connection = None, prepare, self
        return self

    def execute(self, sql: str, params: Any = (), /) -> PgCursor:
        if self._pipeline is not None:
            self._answer = self._pipeline.send(sql, params, prepare=pipelined_prepare(sql))
            return self
        # A read to prepare runs in one libpq call when it can (``prepared``, ADR-0098).
        self._rows = prepared_rows(self._conn, sql, params) if self._prepare else None
        if self._rows is None:
            self._cur.execute(pg_sql(sql), params, prepare=self._prepare)
        return self

    def executemany(self, sql: str, seq: Iterable[Any], /) -> PgCursor:
        rows = list(seq)
        if rows and self._pipeline is not None:  # pipelined: one round trip for all
            if len(rows) == 1 or type(rows[0]) is dict or rows_sql(sql, 2) is None:
                for row in rows:
                    self.execute(sql, row)
                return self
            done = 0
            while done < len(rows):
                count = next(n for n in ROWS_AT_ONCE if n <= len(rows) - done)
                if count == 1:
                    self.execute(sql, rows[done])
                else:
                    self.execute(cast(str, rows_sql(sql, count)),
                                 [value for row in rows[done:done + count] for value in row])
                done += count
        elif rows:
            self._cur.executemany(pg_sql(sql), rows)
        return self

    def result(self) -> Any:
        """The libpq result of the last statement, if it was answered (``None``: not yet, or never)."""
        if self._pipeline is not None:
            return None if self._answer is None else self._answer[0]
        return self._cur.pgresult

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self._pipeline is not None:
            return self._pipeline.rows(self._answer)  # one round trip for all queued, when due
        if self._rows is not None:  # read by ``prepared_rows``
            rows, self._rows = self._rows, None
            return rows
        # Rows when the statement returned any (``description``, without building its columns).
        result = self._cur.pgresult
        return list(self._cur.fetchall()) if result is not None and (
            result.nfields or result.status == psycopg.pq.ExecStatus.TUPLES_OK) else []

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())

    def changes(self) -> int:
        """Rows changed by the last ``execute`` (SQLite's ``connection.changes()``)."""
        if self._pipeline is not None:
            return int(self._pipeline.answer(self._answer).command_tuples or 0)
        return int(self._cur.rowcount)

    def cursor(self) -> PgCursor:
        """Another cursor on the same connection (and transaction, and pipeline)."""
        return PgCursor(self._conn, self._pipeline)
