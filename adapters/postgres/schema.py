"""The PostgreSQL store's schema: numbered migrations, each recorded in ``fermix_migrations``
with when it ran, run at open under an advisory lock (two processes opening a new database
at once migrate it once); a database written by newer code, or holding tables that are not
ours, is refused untouched."""

from __future__ import annotations

from typing import Any

from fermix_memory.adapters.postgres.connection import connect, shown, translated_errors
from fermix_memory.adapters.postgres.migrations import APPEND_ONLY_TRIGGERS, MIGRATIONS
from fermix_memory.application.errors import DatabaseTooNew, ForeignDatabase, ReadOnlyStore

SCHEMA_VERSION = len(MIGRATIONS)
MIGRATION_LOCK = 0x46524D58_0001  # "FRMX", 1: the advisory lock migrations run under


def migrate(conn: Any, url: str) -> int:
    """Bring the schema up to :data:`SCHEMA_VERSION` (``conn`` in autocommit); the version found before."""
    with translated_errors("migrating the PostgreSQL store"), conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        known = conn.execute("SELECT to_regclass('fermix_migrations') IS NOT NULL").fetchone()[0]
        if not known:
            others = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()[0]
            if others:
                raise ForeignDatabase(f"{shown(url)} holds tables of another application; not touching it")
            conn.execute("CREATE TABLE fermix_migrations(version INTEGER PRIMARY KEY,"
                         " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        version = int(conn.execute("SELECT coalesce(max(version), 0) FROM fermix_migrations").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise DatabaseTooNew(f"{shown(url)} has schema version {version}, newer than this fermix-memory"
                                 f" understands ({SCHEMA_VERSION}); upgrade fermix-memory — nothing was changed")
        for number in range(version + 1, SCHEMA_VERSION + 1):
            conn.execute(MIGRATIONS[number - 1])
            conn.execute("INSERT INTO fermix_migrations(version) VALUES (%s)", (number,))
    return version


def check_schema(conn: Any, url: str) -> None:
    """What :func:`migrate` checks, changing nothing: the database is ours and at :data:`SCHEMA_VERSION`."""
    with translated_errors("checking the PostgreSQL store's schema"):
        known = conn.execute("SELECT to_regclass('fermix_migrations') IS NOT NULL").fetchone()[0]
        version = int(conn.execute("SELECT coalesce(max(version), 0) FROM fermix_migrations").fetchone()[0]) \
            if known else 0
    if version == 0:
        raise ForeignDatabase(f"{shown(url)} is not a fermix-memory database (or an empty one); not touching it")
    if version > SCHEMA_VERSION:
        raise DatabaseTooNew(f"{shown(url)} has schema version {version}, newer than this fermix-memory"
                             f" understands ({SCHEMA_VERSION}); upgrade fermix-memory — nothing was changed")
    if version < SCHEMA_VERSION:
        raise ReadOnlyStore(f"{shown(url)} has schema version {version} and needs an upgrade, which a read-only"
                            " open cannot do; open it once with write access")


def migrate_url(url: str) -> int:
    with connect(url) as conn:
        return migrate(conn, url)


def missing_triggers(conn: Any) -> list[str]:
    """The append-only triggers that are not on ``events``."""
    rows = conn.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'events'::regclass AND NOT tgisinternal"
                        " AND tgenabled <> 'D'").fetchall()
    present = {r[0] for r in rows}
    return [name for name in APPEND_ONLY_TRIGGERS if name not in present]
