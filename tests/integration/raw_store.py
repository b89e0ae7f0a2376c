"""A raw connection on a memory's store, as an attacker or an administrator has it, whichever
store the memory lives in: an apsw connection on the home's SQLite file, or a psycopg session on
its PostgreSQL database (autocommit). The same SQL, with ``?`` placeholders, runs on both; each
knows the names of its own append-only triggers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import apsw

DELETE_TRIGGER = "events_append_only_delete"  # the same name on both stores


class RawConnection(ABC):
    """What a tamper test does to a store by hand: run SQL, read rows, drop a trigger."""

    store: str
    # The triggers that refuse an UPDATE of ``events`` other than a redaction (payload to NULL).
    update_triggers: tuple[str, ...]

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` (``?`` placeholders); the rows it returned (none for a statement without)."""

    @abstractmethod
    def changes(self) -> int:
        """Rows changed by the last INSERT, UPDATE or DELETE."""

    @abstractmethod
    def drop_trigger(self, name: str, table: str = "events") -> None:
        """Drop the trigger ``name`` of ``table``."""

    def drop_update_triggers(self) -> None:
        """Let every column of ``events`` be changed."""
        for name in self.update_triggers:
            self.drop_trigger(name)

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """The statements of the block commit together, or not at all."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""


class SqliteRaw(RawConnection):
    """A plain apsw connection on ``memory.db``."""

    store = "sqlite"
    update_triggers = ("events_append_only_update", "events_redact_only")

    def __init__(self, path: Path) -> None:
        self.conn = apsw.Connection(str(path))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(sql, params).fetchall())

    def changes(self) -> int:
        return int(self.conn.changes())

    def drop_trigger(self, name: str, table: str = "events") -> None:
        self.conn.execute(f"DROP TRIGGER {name}")  # a SQLite trigger's name is unique in its database

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


class PostgresRaw(RawConnection):
    """A psycopg session on the database of ``url``, in autocommit."""

    store = "postgres"
    # One row trigger checks every UPDATE of the log: only a payload set to NULL passes.
    update_triggers = ("events_redact_only",)

    def __init__(self, url: str) -> None:
        import psycopg  # the [postgres] extra: only a test on PostgreSQL needs it

        self.conn = psycopg.connect(url, autocommit=True)
        self._changes = 0

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # The tests' SQL has no "?" inside its literals, so every "?" is a placeholder.
        cur = self.conn.execute(sql.replace("%", "%%").replace("?", "%s"), params)
        if cur.description is not None:
            return list(cur.fetchall())
        self._changes = cur.rowcount
        return []

    def changes(self) -> int:
        return int(self._changes)

    def drop_trigger(self, name: str, table: str = "events") -> None:
        self.conn.execute(f"DROP TRIGGER {name} ON {table}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def close(self) -> None:
        self.conn.close()
