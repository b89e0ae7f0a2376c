"""What the shared SQL core runs its statements through: the few calls an apsw cursor (or
connection) and the PostgreSQL dialect's psycopg cursor both offer.

SQL is written once, with SQLite's placeholders (``?`` and ``:name``); a dialect whose driver
takes others translates them in its cursor (PostgreSQL: ``postgres.connection.pg_sql``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from fermix_memory.application.errors import StorageError


class SqlRows(Protocol):
    """The result of one statement: its rows, all at once or one by one."""

    def fetchall(self) -> list[tuple[Any, ...]]: ...

    def __iter__(self) -> Iterator[Any]: ...


class SqlReader(Protocol):
    """Runs one statement (a read connection, a cursor)."""

    def execute(self, sql: str, params: Any = ..., /) -> SqlRows: ...


class RowChanges(Protocol):
    """How many rows the last statement changed (SQLite's ``connection.changes()``)."""

    def changes(self) -> int: ...


class SqlCursor(SqlReader, Protocol):
    """A cursor inside one write transaction: statements, batches of one statement, and the
    count of rows the last statement changed (through ``connection``, as apsw gives it)."""

    def executemany(self, sql: str, rows: Iterable[Any], /) -> object: ...

    @property
    def connection(self) -> RowChanges: ...


def int_value(value: object) -> int:
    """A column the schema declares INTEGER, narrowed for the type checker (NULL is refused)."""
    if isinstance(value, int):
        return value
    raise StorageError(f"expected an integer column, found {type(value).__name__}")


def text_value(value: object) -> str:
    """A column the schema declares TEXT, narrowed for the type checker (NULL is refused)."""
    if isinstance(value, str):
        return value
    raise StorageError(f"expected a text column, found {type(value).__name__}")


def scalar_int(reader: SqlReader, sql: str, params: Any = ()) -> int:
    """The one integer a query such as ``SELECT count(*)`` returns; SQL NULL (``max`` over no
    rows) counts as 0."""
    value = reader.execute(sql, params).fetchall()[0][0]
    return 0 if value is None else int_value(value)
