"""Opening ``memory.db`` with the project's pragmas, and translating driver errors."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import apsw.bestpractice

from fermix_memory.application.errors import ForeignDatabase, StorageBusy, StorageError

log = logging.getLogger("fermix_memory.storage")

BUSY_TIMEOUT_MS = 5_000
DURABILITY_PRAGMAS = {"normal": "NORMAL", "full": "FULL"}

_best_practice_applied = False


def _apply_best_practice() -> None:
    # apsw.bestpractice installs connection hooks process-wide; once is enough.
    global _best_practice_applied
    if not _best_practice_applied:
        apsw.bestpractice.apply(apsw.bestpractice.recommended)
        _best_practice_applied = True


def open_connection(
    path: Path | str, *, durability: str = "normal", readonly: bool = False
) -> apsw.Connection:
    """Open a connection: WAL, busy timeout, foreign keys, the durability's synchronous mode."""
    if durability not in DURABILITY_PRAGMAS:
        raise StorageError(f"durability must be 'normal' or 'full', got {durability!r}")
    _apply_best_practice()
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        conn.execute(f"PRAGMA synchronous = {DURABILITY_PRAGMAS[durability]}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Touch the schema now so a file that is not a database fails here, not mid-write.
        conn.execute("PRAGMA user_version").fetchall()
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise ForeignDatabase(f"{path} is not a fermix-memory database (or is corrupt): {exc}") from None
    except apsw.BusyError as exc:
        raise StorageBusy(f"{path} is locked by another process: {exc}") from None
    except apsw.CantOpenError as exc:
        raise StorageError(f"cannot open {path}: {exc}") from None
    return conn


@contextmanager
def translated_errors(what: str) -> Iterator[None]:
    """Turn driver errors that escape the adapter into the application's typed errors."""
    try:
        yield
    except (apsw.BusyError, apsw.LockedError) as exc:
        raise StorageBusy(f"{what}: database stayed locked: {exc}") from exc
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise ForeignDatabase(f"{what}: database file is corrupt: {exc}") from exc
    except apsw.Error as exc:
        raise StorageError(f"{what}: {exc}") from exc
