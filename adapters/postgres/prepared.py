"""A read prepared once per connection and run by libpq in one call (ADR-0098).

Recall's statements (``PgCursor``'s ``prepare=True``) run on a connection that holds only them
while they run: the driver's general path spends about as much of the client's CPU on one such
read (its prepare bookkeeping, its generators waiting for the answer, its dumpers choosing a type
for each parameter) as the rest of a recall's Python together. Here the statement is prepared
under a name of this module's on the connection at its first run (its parameters' types
inferred by the server from the statement, as they are for SQLite's untyped values), and each run
is one ``PQexecPrepared`` of the parameters as text: libpq sends, waits and receives without the
interpreter (and without holding the GIL); the rows are loaded by the driver's own loaders, so
they are the values the general path returns. The call cannot be interrupted while it waits
(the general path cancels the statement on ``KeyboardInterrupt``): these are short reads.

A statement the server no longer knows (a ``DEALLOCATE ALL`` the driver sends after a
``ROLLBACK`` on a connection that also wrote) is prepared again once. A parameter of another
type than ``None``, ``bool``, ``int``, ``float`` and ``str``, or a statement with named
placeholders, takes the general path (``None`` from :func:`prepared_rows`).
"""

from __future__ import annotations

import functools
import itertools
import re
import weakref
from collections.abc import Sequence
from typing import Any

_QUESTION = re.compile(r"\?")
UNKNOWN_STATEMENT = b"26000"  # invalid_sql_statement_name: no statement of that name on the session
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class StatementNames:
    """The statements prepared on one connection under this module's names, by their SQL. A
    name is never given twice on a connection, so forgetting a name too early costs only a
    statement prepared again."""

    __slots__ = ("_count", "_names")

    def __init__(self) -> None:
        self._names: dict[str, bytes] = {}
        self._count = itertools.count()

    def get(self, sql: str) -> bytes | None:
        return self._names.get(sql)

    def add(self, sql: str) -> bytes:
        """A new name for ``sql``, which the caller prepares under it."""
        name = self._names[sql] = f"_fermix_{next(self._count)}".encode()
        return name

    def forget(self, sql: str) -> None:
        self._names.pop(sql, None)

    def clear(self) -> None:
        self._names.clear()


# The statements prepared on each connection (its names go with it).
_PREPARED: weakref.WeakKeyDictionary[Any, StatementNames] = weakref.WeakKeyDictionary()


def statement_names(conn: Any) -> StatementNames:
    """The statements prepared on ``conn`` by this module's callers."""
    names = _PREPARED.get(conn)
    if names is None:
        names = _PREPARED[conn] = StatementNames()
    return names


@functools.lru_cache(maxsize=256)
def numbered(sql: str) -> bytes | None:
    """``sql`` with SQLite's ``?`` placeholders as libpq's ``$1``, ``$2``...; ``None`` when it
    has named ones (the general path binds those)."""
    if _NAMED.search(sql):
        return None
    counter = itertools.count(1)
    return _QUESTION.sub(lambda _: f"${next(counter)}", sql).encode()


@functools.lru_cache(maxsize=1024)
def placeholders(sql: str) -> tuple[bytes, tuple[str, ...] | None]:
    """``sql`` with SQLite's placeholders as libpq's ``$1``, ``$2``...; for named ones, the
    names in the order of their numbers (``None``: positional)."""
    command = numbered(sql)
    if command is not None:
        return command, None
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return _NAMED.sub(number, sql).encode(), tuple(order)


def as_text(value: Any) -> bytes | None:
    """A parameter as PostgreSQL's text input of it (``TypeError`` for a kind not handled here)."""
    kind = type(value)
    if kind is str:
        return value.encode()  # type: ignore[no-any-return]
    if kind is int:
        return str(value).encode()
    if value is None:
        return None
    if kind is bool:
        return b"t" if value else b"f"
    if kind is float:
        return repr(value).encode()
    raise TypeError(kind)


def prepared_rows(conn: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]] | None:
    """The rows of ``sql`` (SQLite's placeholders) with ``params`` on ``conn`` (psycopg's, idle,
    autocommit), prepared there at its first run; ``None``: the statement or a parameter is of a
    kind the general path must run. A statement that fails raises the driver's error."""
    command = numbered(sql)
    if command is None:
        return None
    try:
        values = [as_text(p) for p in params]
    except TypeError:
        return None
    pgconn = conn.pgconn
    result = pgconn.exec_prepared(_name(conn, sql, command), values)
    if result.status == FATAL and result.error_field(SQLSTATE) == UNKNOWN_STATEMENT:
        statement_names(conn).clear()  # the session's statements were dropped: prepare again (new names)
        result = pgconn.exec_prepared(_name(conn, sql, command), values)
    if result.status != TUPLES:
        if result.status == COMMAND:  # a statement that returns no rows
            return []
        raise error_from_result(result, encoding=conn.info.encoding)
    loader = Transformer(conn)
    loader.set_pgresult(result)
    rows: list[tuple[Any, ...]] = loader.load_rows(0, result.ntuples, tuple)
    return rows


def _name(conn: Any, sql: str, command: bytes) -> bytes:
    """The name of ``sql``'s statement on ``conn``, prepared there first if it is not."""
    names = statement_names(conn)
    name = names.get(sql)
    if name is None:
        name = names.add(sql)
        result = conn.pgconn.prepare(name, command)
        if result.status != COMMAND:
            names.forget(sql)
            raise error_from_result(result, encoding=conn.info.encoding)
    return name


# The libpq codes and the driver's loaders and errors, used here and by ``write_pipeline`` (imported
# once, not at each read); absent without the driver, which the store checks for first.
FATAL: Any = None
TUPLES: Any = None
COMMAND: Any = None
SYNC: Any = None
OK: Any = None
SQLSTATE: Any = None
Transformer: Any = None
error_from_result: Any = None
try:
    from psycopg.adapt import Transformer
    from psycopg.errors import error_from_result
    from psycopg.pq import ConnStatus, DiagnosticField, ExecStatus

    FATAL, TUPLES, COMMAND = ExecStatus.FATAL_ERROR, ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK
    SYNC, OK, SQLSTATE = ExecStatus.PIPELINE_SYNC, ConnStatus.OK, DiagnosticField.SQLSTATE
except ImportError:  # pragma: no cover - the [postgres] extra is optional
    pass
