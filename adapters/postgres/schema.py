"""The PostgreSQL store's schema: numbered migrations, each recorded in ``fermix_migrations``
with when it ran, run at open under an advisory lock (two processes opening a new database
at once migrate it once); a database written by newer code, or holding tables that are not
ours, is refused untouched."""

from __future__ import annotations

from typing import Any

from fermix_memory.adapters.postgres.connection import PgCursor, shown, translated_errors
from fermix_memory.adapters.postgres.migrations import AFTER_MIGRATION, APPEND_ONLY_TRIGGERS, MIGRATIONS
from fermix_memory.application.errors import DatabaseTooNew, ForeignDatabase, IntegrityError, ReadOnlyStore
from fermix_memory.application.settings_storage import DEFAULT_CHAINS
from fermix_memory.domain.log_chain import GENESIS_HASH, MAX_CHAINS

SCHEMA_VERSION = len(MIGRATIONS)
MIGRATION_LOCK = 0x46524D58_0001  # "FRMX", 1: the advisory lock migrations run under


def migrate(conn: Any, url: str, chains: int | None = None) -> int:
    """Bring the schema up to :data:`SCHEMA_VERSION` (``conn`` in autocommit); the version found
    before. A log without chain rows gets them: an empty one ``chains`` (default
    :data:`DEFAULT_CHAINS`), one written before chains existed its one chain, headed by its last
    event; an empty log with other chains takes ``chains`` when given (ADR-0031)."""
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
            if number in AFTER_MIGRATION:
                AFTER_MIGRATION[number](PgCursor(conn))
            conn.execute("INSERT INTO fermix_migrations(version) VALUES (%s)", (number,))
        _chain_rows(conn, chains)
    return version


def adopt_chains(conn: Any, chains: int) -> None:
    """Give the empty log ``chains`` chains (``conn`` in autocommit); a log holding events keeps
    its own (:class:`IntegrityError`, nothing changed)."""
    if type(chains) is not int or not 1 <= chains <= MAX_CHAINS:
        raise IntegrityError(f"a log has 1 to {MAX_CHAINS} chains, not {chains!r}")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        rows = int(conn.execute("SELECT count(*) FROM chain_heads").fetchone()[0])
        if rows != chains and conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None:
            raise IntegrityError(f"this log holds events on {rows} chain(s); it cannot take {chains}:"
                                 " only an empty log can")
        _chain_rows(conn, chains)


def _chain_rows(conn: Any, chains: int | None) -> None:
    rows = int(conn.execute("SELECT count(*) FROM chain_heads").fetchone()[0])
    last = conn.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchone()
    if last is not None:
        if not rows:  # a log of one chain written before chains existed
            conn.execute("INSERT INTO chain_heads(chain, position, hash) VALUES (0, %s, %s)", (last[0], last[1]))
        return
    wanted = chains or (rows or DEFAULT_CHAINS)
    if rows == wanted:
        return
    conn.execute("DELETE FROM chain_heads")
    conn.execute("INSERT INTO chain_heads(chain, position, hash) SELECT c, 0, %s FROM generate_series(0, %s) c",
                 (GENESIS_HASH, wanted - 1))


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


def missing_triggers(conn: Any) -> list[str]:
    """The append-only triggers that are not on ``events``."""
    rows = conn.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'events'::regclass AND NOT tgisinternal"
                        " AND tgenabled <> 'D'").fetchall()
    present = {r[0] for r in rows}
    return [name for name in APPEND_ONLY_TRIGGERS if name not in present]
