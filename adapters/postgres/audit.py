"""Verify and replay on the PostgreSQL store: the SQLite audit's own checks, run over the server's
log in one read-only snapshot (``REPEATABLE READ``): the hash chain and erasure accounting
(``audit_chain.check_chain``), the head anchors, the append-only triggers, and the projections
compared with the log folded into a fresh SQLite database by the same projection functions.

Table checksums here are SQLite's own (``table_checksums``): the server's rows are read over the
columns the two stores share (PostgreSQL's generated ``search`` vectors are the index, not the
projection) in the order SQLite would give them, so a home moved between the stores keeps its
checksums.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import apsw
import attrs

from fermix_memory.adapters.postgres.connection import SqlCursor
from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.adapters.postgres.schema import missing_triggers
from fermix_memory.adapters.sqlite.audit_chain import Progress, Stages, VerifyReport, check_chain
from fermix_memory.adapters.sqlite.audit_replay import differing_tables, fold_log, rows_checksum, table_checksums
from fermix_memory.adapters.sqlite.connection import enable_wal, open_connection, scalar_int
from fermix_memory.adapters.sqlite.head import Head, head_problem
from fermix_memory.adapters.sqlite.schema import PROJECTION_TABLES, migrate
from fermix_memory.adapters.sqlite.vectors import ORPHAN_VECTORS_SQL, WAITING_SQL, unvectored_sql
from fermix_memory.application.errors import IntegrityError, StorageError

Rows = Callable[[str], list[tuple[Any, ...]]]


TEXT_TYPES = frozenset({"text", "character varying", "character"})


def live_checksums(cur: SqlCursor, columns: dict[str, list[str]], progress: Progress | None = None
                   ) -> dict[str, str]:
    """The server's projection tables checksummed as SQLite's :func:`table_checksums` does the
    same rows (the columns SQLite has, in its order; rows ordered by each column in turn, text by
    code point as SQLite's BINARY collation, NULLs first), so both stores of one log agree
    (``progress(done, total)`` after each table, in tables)."""
    types = {(str(t), str(c)): str(d) for t, c, d in cur.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema()").fetchall()}
    sums = {}
    for table in PROJECTION_TABLES:
        order = ", ".join(f'{c} COLLATE "C" NULLS FIRST' if types.get((table, c)) in TEXT_TYPES else f"{c} NULLS FIRST"
                          for c in columns[table])
        sums[table] = rows_checksum(cur.execute(f"SELECT {', '.join(columns[table])} FROM {table} ORDER BY {order}"
                                                ).fetchall())
        if progress is not None:
            progress(len(sums), len(PROJECTION_TABLES))
    return sums


def _columns(sqlite: apsw.Connection) -> dict[str, list[str]]:
    return {t: [str(r[1]) for r in sqlite.execute(f"PRAGMA table_info({t})")] for t in PROJECTION_TABLES}


@contextmanager
def _snapshot(store: PostgresEventStore) -> Iterator[SqlCursor]:
    """One read-only, repeatable-read snapshot of the server's database."""
    with store.connection("auditing the PostgreSQL store") as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield SqlCursor(conn)


def _fold(source: SqlCursor, target: apsw.Connection, progress: Progress | None,
          checking: Progress | None = None) -> tuple[int, dict[str, str], dict[str, str]]:
    """Fold the server's log into ``target`` (migrated, empty); the event count and both checksums
    (``checking``: the progress of the checksums)."""
    events = fold_log(cast(Any, source), target, progress)
    columns = _columns(target)
    tables = Stages(checking, [len(PROJECTION_TABLES)] * 2)
    return events, live_checksums(source, columns, tables.stage()), table_checksums(target, tables.stage())


def verify_postgres(store: PostgresEventStore, progress: Progress | None = None, *,
                    anchors: Sequence[tuple[str, Head]] = (), noted: Sequence[str] = ()) -> VerifyReport:
    """The chain, the head ``anchors``, the append-only triggers, and that replaying the log gives
    the same projection tables (``noted``: problems found when the store was opened)."""
    with _snapshot(store) as cur:
        # One progress over the chain walk, the replay and the checksums, in events (ADR-0038).
        events = scalar_int(cast(Any, cur), "SELECT count(*) FROM events")
        stages = Stages(progress, [events, events, events])
        report = check_chain(cast(Any, cur), stages.stage())
        if not report.ok:
            return report
        problems = [p for label, head in anchors if (p := head_problem(cast(Any, cur), head, label))]
        missing = missing_triggers(cur)
        if missing:
            problems.append(f"the append-only triggers {', '.join(missing)} are missing")
        problems += noted
        if orphans := scalar_int(cast(Any, cur), ORPHAN_VECTORS_SQL):
            problems.append(f"{orphans} vector(s) or vector queue entries point at no message or row (ADR-0043)")
        if unvectored := scalar_int(cast(Any, cur), f"SELECT {unvectored_sql(marked=False)}"):
            problems.append(f"{unvectored} message(s) or row(s) have no vector and wait for none (ADR-0043)")
        waiting = scalar_int(cast(Any, cur), WAITING_SQL)
        if problems:
            return attrs.evolve(report, ok=False, problem="; ".join(problems))
        scratch = open_connection(":memory:")
        try:
            migrate(scratch, ":memory:")
            _, live, rebuilt = _fold(cur, scratch, stages.stage(), stages.stage())
        except IntegrityError as exc:
            return attrs.evolve(report, ok=False, problem=f"the log does not replay: {exc}")
        finally:
            scratch.close()
    differing = differing_tables(live, rebuilt)
    if differing:
        return attrs.evolve(report, ok=False, table_checksums=live,
                            problem=f"projection tables differ from the log: {', '.join(differing)}")
    return attrs.evolve(report, table_checksums=live, vectors_waiting=waiting)


def replay_postgres(store: PostgresEventStore, target_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Rebuild the server's projections from its log into a new SQLite ``target_dir/memory.db``
    (never overwritten); the figures and whether every projection equals the server's."""
    target_dir.mkdir(parents=True, exist_ok=True)
    target_path = target_dir / "memory.db"
    if target_path.exists():
        raise StorageError(f"{target_path} already exists; replay only writes into a new folder")
    target = open_connection(target_path)
    finished = False
    try:
        migrate(target, str(target_path))
        enable_wal(target)
        with _snapshot(store) as cur:
            # One progress over the fold and the checksums (ADR-0038).
            count = scalar_int(cast(Any, cur), "SELECT count(*) FROM events")
            stages = Stages(progress, [count, count])
            events, live, rebuilt = _fold(cur, target, stages.stage(), stages.stage())
        finished = True
    finally:
        target.close()
        if not finished:
            for leftover in (target_path, *(target_path.with_name(target_path.name + s) for s in ("-wal", "-shm"))):
                leftover.unlink(missing_ok=True)
    differing = differing_tables(live, rebuilt)
    return {"events": events, "target": str(target_path), "identical": not differing,
            "differing_tables": differing, "checksums": rebuilt}
