"""What every read-side query class shares: this thread's read connection, and the dialect's
translation of driver errors around each statement."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from fermix_memory.adapters.sql.cursor import SqlReader

MAX_LIMIT = 1000

# Around each read: turns the driver's errors into the application's (none: the reader does).
Reading = Callable[[], AbstractContextManager[object]]


def clamp_limit(limit: int | None) -> int:
    """A row limit between 0 and :data:`MAX_LIMIT` (``None``: the maximum)."""
    return MAX_LIMIT if limit is None else max(0, min(int(limit), MAX_LIMIT))


class ReadSide:
    """Base of the query adapters; ``connection`` gives this thread's read connection, ``reading``
    wraps each statement (a dialect whose reader translates its own errors passes none)."""

    def __init__(self, connection: Callable[[], SqlReader], reading: Reading = nullcontext) -> None:
        self._conn = connection
        self._reading = reading

    def _rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        with self._reading():
            return self._conn().execute(sql, params).fetchall()
