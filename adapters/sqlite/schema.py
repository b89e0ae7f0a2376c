"""Running the numbered schema migrations of ``memory.db`` (``PRAGMA user_version``; their DDL is in
``migrations``), and checking a database is ours and whole.

Migration N brings the schema from version N-1 to N. They run at start-up inside one
IMMEDIATE transaction; a database whose version is newer than the code is refused untouched,
and so is a database that is not ours (``PRAGMA application_id``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw

from fermix_memory.adapters.sql.ddl import PROJECTION_TABLES as PROJECTION_TABLES  # re-exported: the audit's
from fermix_memory.adapters.sqlite.connection import scalar_int, text_value
from fermix_memory.adapters.sqlite.full_text_catch_up import ALL_INDEXED
from fermix_memory.adapters.sqlite.migrations import (
    AFTER_MIGRATION,
    APPEND_ONLY_TRIGGERS,
    MIGRATIONS,
    SCOPE_SIZES_REBUILD,
)
from fermix_memory.application.errors import DatabaseTooNew, ForeignDatabase, ReadOnlyStore

APPLICATION_ID = 0x46524D58  # "FRMX"

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: apsw.Connection, path: str) -> int:
    """Bring the schema up to :data:`SCHEMA_VERSION`; return the version found before.

    Refuses (untouched) a database written by newer code, and a non-empty SQLite file that
    is not a fermix-memory database.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = scalar_int(conn, "PRAGMA user_version")
        app_id = scalar_int(conn, "PRAGMA application_id")
        if app_id not in (0, APPLICATION_ID):
            raise ForeignDatabase(f"{path} belongs to another application (application_id {app_id:#x})")
        if version > SCHEMA_VERSION:
            raise DatabaseTooNew(
                f"{path} has schema version {version}, newer than this fermix-memory "
                f"understands ({SCHEMA_VERSION}); upgrade fermix-memory — the file was not changed"
            )
        if version == 0:
            tables = scalar_int(conn, "SELECT count(*) FROM sqlite_schema")
            if tables:
                raise ForeignDatabase(f"{path} is an SQLite database of another application; not touching it")
        for number in range(version + 1, SCHEMA_VERSION + 1):
            conn.execute(MIGRATIONS[number - 1])
            if number in AFTER_MIGRATION:
                AFTER_MIGRATION[number](conn.cursor())
            conn.execute(f"PRAGMA user_version = {number}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return version


def missing_triggers(conn: apsw.Connection) -> list[str]:
    """Names of the append-only triggers that are not in the database."""
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'")}
    return [name for name in APPEND_ONLY_TRIGGERS if name not in present]


def restore_triggers(conn: apsw.Connection) -> list[str]:
    """Re-create missing append-only triggers; returns the names that were missing."""
    missing = missing_triggers(conn)
    if missing:
        with conn:
            for name in missing:
                conn.execute(APPEND_ONLY_TRIGGERS[name])
    return missing


def check_schema(conn: apsw.Connection, path: str) -> None:
    """What :func:`migrate` checks, for a read-only connection that must not change the file:
    the database is ours and at exactly :data:`SCHEMA_VERSION`."""
    version = scalar_int(conn, "PRAGMA user_version")
    app_id = scalar_int(conn, "PRAGMA application_id")
    if app_id != APPLICATION_ID or version == 0:
        raise ForeignDatabase(f"{path} is not a fermix-memory database; not touching it")
    if version > SCHEMA_VERSION:
        raise DatabaseTooNew(
            f"{path} has schema version {version}, newer than this fermix-memory "
            f"understands ({SCHEMA_VERSION}); upgrade fermix-memory — the file was not changed"
        )
    if version < SCHEMA_VERSION:
        raise ReadOnlyStore(
            f"{path} has schema version {version} and needs an upgrade, which a read-only open cannot"
            " do; open it once with write access"
        )


# External-content FTS5 tables: new rows indexed by a catch-up, kept in sync by ``<table>_delete|update``
# triggers at or below its mark (ADR-0091).
FTS_TABLES: tuple[str, ...] = ("messages_fts", "memories_fts")


@contextmanager
def deferred_indexing(conn: apsw.Connection,
                      progress: Callable[[int, int], None] | None = None) -> Iterator[None]:
    """Fill an EMPTY database faster: its FTS sync triggers and plain (non-unique) indexes are
    dropped, and afterwards recreated from their own DDL, the indexes built in one sort and each
    full-text index rebuilt in one pass over its content table, its mark moved past every row
    (ADR-0091), and ``scope_sizes``, kept by triggers of the same name family, counted anew.

    Unique indexes stay (upserts name them). The body runs its own transactions; the closing
    step is one transaction, whose ``progress(done, total)`` is told after each index, trigger
    and full-text rebuild. If the body fails the database is left without those triggers and
    indexes: callers only use this on a database they discard on failure.
    """
    if scalar_int(conn, "SELECT count(*) FROM events"):
        raise ValueError("deferred indexing is only for an empty database")
    deferred = conn.execute(
        "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL AND ("
        " (type = 'index' AND sql NOT LIKE 'CREATE UNIQUE%') OR"
        " (type = 'trigger' AND (" + " OR ".join(f"name LIKE '{t}\\_%' ESCAPE '\\'" for t in FTS_TABLES) + ")))"
        " ORDER BY type, name"
    ).fetchall()
    with conn:
        for kind, name, _ in deferred:
            conn.execute(f'DROP {text_value(kind).upper()} "{text_value(name)}"')
    yield
    steps = [*(text_value(sql) for _, _, sql in deferred),
             *(f"INSERT INTO {table}({table}) VALUES ('rebuild')" for table in FTS_TABLES), ALL_INDEXED,
             SCOPE_SIZES_REBUILD]
    with conn:
        for done, step in enumerate(steps, 1):
            conn.execute(step)
            if progress is not None:
                progress(done, len(steps))
