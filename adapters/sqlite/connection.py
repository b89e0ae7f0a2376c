"""Opening ``memory.db`` with the project's pragmas, and translating driver errors."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from fermix_memory.adapters.sql.cursor import int_value as int_value  # re-exported: the dialect's readers use them
from fermix_memory.adapters.sql.cursor import scalar_int as scalar_int
from fermix_memory.adapters.sql.cursor import text_value as text_value
from fermix_memory.application.errors import ForeignDatabase, ReadOnlyStore, StorageBusy, StorageError

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
    if readonly:
        return open_readonly(path)
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        conn = apsw.Connection(str(path), flags=flags)
        _configure(conn, durability)
    except apsw.ReadOnlyError as exc:
        raise ReadOnlyStore(f"{path} is read-only: {exc}") from None
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise ForeignDatabase(f"{path} is not a fermix-memory database (or is corrupt): {exc}") from None
    except apsw.BusyError as exc:
        raise StorageBusy(f"{path} is locked by another process: {exc}") from None
    except apsw.CantOpenError as exc:
        if _opens_read_only(path):
            raise ReadOnlyStore(f"{path} is read-only (it, or its folder, cannot be written)") from None
        raise StorageError(f"cannot open {path}: {exc}") from None
    return conn


def _opens_read_only(path: Path | str) -> bool:
    """Whether a file that would not open for writing opens for reading: then it is read-only."""
    if str(path) == ":memory:" or not Path(path).is_file():
        return False
    try:
        open_readonly(path).close()
    except StorageError:
        return False
    return True


def open_readonly(path: Path | str) -> apsw.Connection:
    """Open an EXISTING database so that nothing can be written through the connection.

    Works on a read-only mount or a folder the user may not change: SQLite needs the WAL's
    shared-memory file, and when that cannot be created the file is opened ``immutable``
    (nobody can be writing a file that nobody may change).
    """
    if not Path(path).is_file():
        raise StorageError(f"cannot open {path}: no such database file")
    uri = Path(path).absolute().as_uri()
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    try:
        try:
            conn = apsw.Connection(uri, flags=flags)
            _configure(conn, "normal")
        except (apsw.CantOpenError, apsw.ReadOnlyError):
            wal = Path(f"{path}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                # Immutable would ignore the log's newest commits: refuse rather than show stale rows.
                raise ReadOnlyStore(
                    f"{path} has commits in {wal.name} that a read-only open cannot read here (no"
                    " shared-memory index can be made in its folder); open it once with write access,"
                    " or copy the folder somewhere writable"
                ) from None
            conn = apsw.Connection(uri + "?immutable=1", flags=flags)
            _configure(conn, "normal")
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise ForeignDatabase(f"{path} is not a fermix-memory database (or is corrupt): {exc}") from None
    except apsw.BusyError as exc:
        raise StorageBusy(f"{path} is locked by another process: {exc}") from None
    except apsw.Error as exc:
        raise StorageError(f"cannot open {path} read-only: {exc}") from None
    return conn


def _configure(conn: apsw.Connection, durability: str) -> None:
    # apsw.bestpractice's connection_busy_timeout, _enable_foreign_keys, _dqs and
    # _recursive_triggers, as they do it: importing that module loads apsw.ext, which costs a
    # read-only command more than opening the database (ADR-0063).
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    conn.pragma("foreign_keys", "ON")
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
    conn.pragma("recursive_triggers", "ON")
    conn.execute(f"PRAGMA synchronous = {DURABILITY_PRAGMAS[durability]}")
    # Touch the schema now so a file that is not a database fails here, not mid-write.
    conn.execute("PRAGMA user_version").fetchall()


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
    except apsw.Error as exc:
        raise typed_error(what, exc) from exc


def typed_error(what: str, exc: apsw.Error) -> StorageError:
    """The application's typed error for driver error ``exc`` met while ``what``."""
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return StorageBusy(f"{what}: database stayed locked: {exc}")
    if isinstance(exc, apsw.ReadOnlyError):
        return ReadOnlyStore(f"{what}: memory.db is read-only: {exc}")
    if isinstance(exc, (apsw.NotADBError, apsw.CorruptError)):
        return ForeignDatabase(f"{what}: database file is corrupt: {exc}")
    return StorageError(f"{what}: {exc}")
