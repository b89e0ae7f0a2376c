"""What every read-side query class shares: this thread's connection and translated errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from fermix_memory.adapters.sqlite.connection import translated_errors

MAX_LIMIT = 1000


def clamp_limit(limit: int | None) -> int:
    """A row limit between 0 and :data:`MAX_LIMIT` (``None``: the maximum)."""
    return MAX_LIMIT if limit is None else max(0, min(int(limit), MAX_LIMIT))


class ReadSide:
    """Base of the query adapters; ``connection`` gives this thread's read connection."""

    def __init__(self, connection: Callable[[], apsw.Connection]) -> None:
        self._conn = connection

    def _rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        with translated_errors("reading memory.db"):
            return self._conn().execute(sql, params).fetchall()
