"""Replay (R-REPLAY): fold the log alone into an empty database, rebuilding every projection,
and compare canonical per-table checksums with the live database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from fermix_memory.adapters.sql.audit import differing_tables, rows_checksum
from fermix_memory.adapters.sql.audit_chain import ALL_EVENT_ROWS, BATCH, Progress, Stages
from fermix_memory.adapters.sql.cursor import SqlReader
from fermix_memory.adapters.sql.event_log import insert_row, read_chain_heads, set_chain_count, write_chain_heads
from fermix_memory.adapters.sql.mark_writes import MARK_ALL, MARK_KIND, MARKED_UP_TO, marked_rows
from fermix_memory.adapters.sql.vectors import ORPHAN_VECTORS_SQL
from fermix_memory.adapters.sqlite.connection import enable_wal, open_connection, scalar_int
from fermix_memory.adapters.sqlite.migrations import SCOPE_SIZES_COUNTED
from fermix_memory.adapters.sqlite.schema import FTS_TABLES, PROJECTION_TABLES, deferred_indexing, migrate
from fermix_memory.adapters.sqlite.vectors import UNVECTORED_SQL
from fermix_memory.application.errors import IntegrityError, StorageError
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.log_chain import GENESIS_HASH


def table_checksums(conn: apsw.Connection, progress: Progress | None = None) -> dict[str, str]:
    """SHA-256 of every projection table's rows, all columns, ordered by each column in turn
    (``progress(done, total)`` after each table, in tables)."""
    sums = {}
    for table in PROJECTION_TABLES:
        ncols = len(conn.execute(f"PRAGMA table_info({table})").fetchall())
        order = ", ".join(str(i) for i in range(1, ncols + 1))
        if table == "message_marks" and _has_table(conn, "vector_marks"):  # with the marks still waiting (ADR-0085)
            sums[table] = rows_checksum(marked_rows(conn, MARKED_UP_TO))
        else:
            sums[table] = rows_checksum(conn.execute(f"SELECT * FROM {table} ORDER BY {order}"))
        if progress is not None:
            progress(len(sums), len(PROJECTION_TABLES))
    return sums


def _has_table(conn: apsw.Connection, name: str) -> bool:
    return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchall())


def index_rows(conn: apsw.Connection) -> list[int]:
    """The rows each step of :func:`fts_integrity` reads: each full-text index's content table,
    then ``messages`` again for the scope sizes (the units its progress is given in)."""
    sizes = [scalar_int(conn, f"SELECT count(*) FROM {table.removesuffix('_fts')}") for table in FTS_TABLES]
    return [*sizes, sizes[FTS_TABLES.index("messages_fts")]]


def fts_integrity(conn: apsw.Connection, progress: Progress | None = None) -> None:
    """Run FTS5's 'integrity-check' on both full-text indexes, and check the scope sizes history
    search ranks with against ``messages`` (raises on damage). ``progress(done, total)`` is
    called after each step, in rows checked."""
    steps = index_rows(conn) if progress is not None else []
    total, done = sum(steps), 0
    for step, table in enumerate(FTS_TABLES):
        try:
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        except apsw.Error as exc:
            raise IntegrityError(f"{table} does not match its content table: {exc}") from exc
        if progress is not None:
            done += steps[step]
            progress(done, total)
    stored = "SELECT token, messages, chars FROM scope_sizes"
    counted = f"SELECT * FROM ({SCOPE_SIZES_COUNTED})"
    wrong = scalar_int(conn, f"SELECT count(DISTINCT token) FROM ({counted} EXCEPT {stored}"
                             f" UNION ALL SELECT * FROM ({stored} EXCEPT {counted}))")
    if wrong:
        raise IntegrityError(f"scope_sizes does not match messages ({wrong} scope(s) differ)")
    orphans = scalar_int(conn, ORPHAN_VECTORS_SQL)
    if orphans:
        raise IntegrityError(f"{orphans} vector(s) or vector queue entries point at no message or row (ADR-0043)")
    if unvectored := scalar_int(conn, UNVECTORED_SQL):
        raise IntegrityError(f"{unvectored} message(s) or row(s) have no vector and wait for none (ADR-0043)")
    if progress is not None:
        progress(total, total)


def fold_log(source: SqlReader, target: apsw.Connection, progress: Progress | None = None) -> int:
    """Copy ``source``'s log into the empty ``target`` and rebuild every projection from it.

    Runs in batched transactions on ``target``, with the full-text indexes and plain indexes
    built once at the end (:func:`deferred_indexing`); returns the number of events folded.
    ``progress(done, total)`` rises through the copy and then through the index builds.
    """
    total = scalar_int(source, "SELECT count(*) FROM events")
    count = 0
    # The indexes are built after the last row is copied: they get a share of their own.
    stages = Stages(progress, [total, total])
    copying = stages.stage()
    with deferred_indexing(target, stages.stage()):
        cur = target.cursor()
        chains = len(read_chain_heads(source))
        heads = [(0, GENESIS_HASH)] * chains  # as the rows copied give them, whatever the source says
        rows = source.execute(ALL_EVENT_ROWS)
        cur.execute("BEGIN IMMEDIATE")
        try:
            set_chain_count(cur, chains)  # the copy has the log's chains (ADR-0031)
            for row in rows:
                insert_row(cur, row)
                heads[chain_for(row[1], chains)] = (row[0], row[9])
                count += 1
                if count % BATCH == 0:
                    cur.execute("COMMIT")
                    if copying is not None:
                        copying(count, total)
                    cur.execute("BEGIN IMMEDIATE")
            if chains > 1:
                write_chain_heads(cur, heads, range(chains))
            cur.execute(MARK_ALL, (MARK_KIND,))  # the fold wrote every message's marks (ADR-0085)
            cur.execute("COMMIT")
        except BaseException:
            if target.in_transaction:
                target.execute("ROLLBACK")
            raise
        if copying is not None:
            copying(count, total)
    return count


DB_FILE = "memory.db"


class SqliteReplica:
    """Implements :class:`~fermix_memory.adapters.sql.audit.Replica` on a new SQLite database:
    in memory (a scratch to compare with), or a new ``memory.db`` in a folder (a replay's target)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.target = ":memory:" if path is None else str(path)
        self.conn = open_connection(self.target)
        try:
            migrate(self.conn, self.target)
            if path is not None:
                enable_wal(self.conn)
        except BaseException:
            self.close(keep=False)
            raise

    @classmethod
    def new_in(cls, folder: Path) -> SqliteReplica:
        """A new ``memory.db`` in ``folder`` (made if missing); never one that exists already. A
        folder that cannot be made (a name too long, no permission, a file in the way) is a
        :class:`StorageError`."""
        path = folder / DB_FILE
        try:
            folder.mkdir(parents=True, exist_ok=True)
            exists = path.exists()
        except OSError as error:
            raise StorageError(f"cannot make the folder {folder}: {error.strerror or error}") from None
        if exists:
            raise StorageError(f"{path} already exists; replay only writes into a new folder")
        return cls(path)

    def fold(self, source: SqlReader, progress: Progress | None) -> int:
        return fold_log(source, self.conn, progress)

    def columns(self) -> dict[str, list[str]]:
        return {t: [str(r[1]) for r in self.conn.execute(f"PRAGMA table_info({t})")] for t in PROJECTION_TABLES}

    def checksums(self, progress: Progress | None) -> dict[str, str]:
        return table_checksums(self.conn, progress)

    def close(self, *, keep: bool) -> None:
        self.conn.close()
        if not keep and self.path is not None:  # a half-built copy is no copy: remove its files
            for leftover in (self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm"))):
                leftover.unlink(missing_ok=True)


def replay_into(source_path: Path, target_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Rebuild ``source_path``'s projections from its log into ``target_dir/memory.db``.

    The target must not exist yet (nothing is ever overwritten). Returns the figures and
    whether every projection checksum equals the source's.
    """
    replica = SqliteReplica.new_in(target_dir)
    finished = False
    try:
        source = open_connection(source_path, readonly=True)
        try:
            source.execute("BEGIN")  # one consistent snapshot of the source
            try:
                # One progress over the fold, the checksums and the index check (ADR-0038).
                events = scalar_int(source, "SELECT count(*) FROM events")
                stages = Stages(progress, [events, events, sum(index_rows(source))])
                replica.fold(source, stages.stage())
                checking = Stages(stages.stage(), [len(PROJECTION_TABLES)] * 2)
                live = table_checksums(source, checking.stage())
            finally:
                source.execute("COMMIT")
        finally:
            source.close()
        rebuilt = replica.checksums(checking.stage())
        fts_integrity(replica.conn, stages.stage())
        finished = True
    finally:
        replica.close(keep=finished)
    differing = differing_tables(live, rebuilt)
    return {
        "events": events,
        "target": replica.target,
        "identical": not differing,
        "differing_tables": differing,
        "checksums": rebuilt,
    }
