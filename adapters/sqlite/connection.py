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

def open_connection(path: Path | str, *, durability: str = "normal", readonly: bool = False) -> apsw.Connection:
    """Open a connection: busy timeout, foreign keys, no double-quoted strings, recursive
    triggers, and the durability's synchronous mode.

    The practices of ``apsw.bestpractice`` are applied to OUR connection only (never
    process-wide: a host's own apsw connections are not ours to change), and nothing here
    writes to the file: WAL is switched on by :func:`enable_wal` once the file is known to be
    ours, so a foreign or newer database is refused byte-for-byte untouched.
    """
    if durability not in DURABILITY_PRAGMAS:
        raise StorageError(f"durability must be 'normal' or 'full', got {durability!r}")
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        conn = apsw.Connection(str(path), flags=flags)
        apsw.bestpractice.connection_busy_timeout(conn, BUSY_TIMEOUT_MS)
        apsw.bestpractice.connection_enable_foreign_keys(conn)
        apsw.bestpractice.connection_dqs(conn)
        apsw.bestpractice.connection_recursive_triggers(conn)
        conn.execute(f"PRAGMA synchronous = {DURABILITY_PRAGMAS[durability]}")
        # Touch the schema now so a file that is not a database fails here, not mid-write.
        conn.execute("PRAGMA user_version").fetchall()
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise ForeignDatabase(f"{path} is not a fermix-memory database (or is corrupt): {exc}") from None
    except apsw.BusyError as exc:
        raise StorageBusy(f"{path} is locked by another process: {exc}") from None
    except apsw.CantOpenError as exc:
        raise StorageError(f"cannot open {path}: {exc}") from None
    return conn


def enable_wal(conn: apsw.Connection) -> None:
    """Switch the (verified) database to WAL; persistent in the file, so readers inherit it."""
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchall()[0][0]
    if str(mode).lower() not in ("wal", "memory"):
        log.warning("could not switch %s to WAL (journal mode %s)", conn.filename, mode)


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
