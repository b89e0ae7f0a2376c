"""Verify and replay on the PostgreSQL store: the shared audit's checks, run over the server's
log in one read-only snapshot (``REPEATABLE READ``): the hash chain and erasure accounting
(``sql.audit_chain.check_chain``), the head anchors, the append-only triggers, and the
projections compared with the log folded into a :class:`~fermix_memory.adapters.sql.audit.Replica`
(another dialect's fresh database, given by the caller) by the same projection functions.

Table checksums are the replica's own: the server's rows are read over the columns the replica
has (PostgreSQL's generated ``search`` vectors are the index, not the projection) in the order
SQLite gives them (text by code point, NULLs first), so a home moved between the stores keeps
its checksums.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from fermix_memory.adapters.postgres.connection import PgCursor
from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.adapters.postgres.schema import missing_triggers
from fermix_memory.adapters.postgres.vectors import UNVECTORED_SQL
from fermix_memory.adapters.sql.audit import Progress, Replica, Stages, VerifyReport, differing_tables, rows_checksum
from fermix_memory.adapters.sql.audit_chain import check_chain
from fermix_memory.adapters.sql.cursor import scalar_int
from fermix_memory.adapters.sql.ddl import PROJECTION_TABLES
from fermix_memory.adapters.sql.head import Head, head_problem
from fermix_memory.adapters.sql.vectors import ORPHAN_VECTORS_SQL, WAITING_SQL
from fermix_memory.application.errors import IntegrityError

TEXT_TYPES = frozenset({"text", "character varying", "character"})


def live_checksums(cur: PgCursor, columns: dict[str, list[str]], progress: Progress | None = None
                   ) -> dict[str, str]:
    """The server's projection tables checksummed as the replica's checksums read the same rows
    (the replica's ``columns``, in its order; rows ordered by each column in turn, text by code
    point as SQLite's BINARY collation, NULLs first), so both stores of one log agree
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


@contextmanager
def _snapshot(store: PostgresEventStore) -> Iterator[PgCursor]:
    """One read-only, repeatable-read snapshot of the server's database."""
    with store.connection("auditing the PostgreSQL store") as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield PgCursor(conn)


def _fold(source: PgCursor, replica: Replica, progress: Progress | None,
          checking: Progress | None = None) -> tuple[int, dict[str, str], dict[str, str]]:
    """Fold the server's log into ``replica``; the event count and both checksums (``checking``:
    the progress of the checksums)."""
    events = replica.fold(source, progress)
    tables = Stages(checking, [len(PROJECTION_TABLES)] * 2)
    return events, live_checksums(source, replica.columns(), tables.stage()), replica.checksums(tables.stage())


def verify_postgres(store: PostgresEventStore, scratch: Callable[[], Replica], progress: Progress | None = None, *,
                    anchors: Sequence[tuple[str, Head]] = (), noted: Sequence[str] = ()) -> VerifyReport:
    """The chain, the head ``anchors``, the append-only triggers, and that replaying the log into
    a ``scratch()`` replica gives the same projection tables (``noted``: problems found when the
    store was opened)."""
    with _snapshot(store) as cur:
        # One progress over the chain walk, the replay and the checksums, in events (ADR-0038).
        events = scalar_int(cur, "SELECT count(*) FROM events")
        stages = Stages(progress, [events, events, events])
        report = check_chain(cur, stages.stage())
        if not report.ok:
            return report
        problems = [p for label, head in anchors if (p := head_problem(cur, head, label))]
        missing = missing_triggers(cur)
        if missing:
            problems.append(f"the append-only triggers {', '.join(missing)} are missing")
        problems += noted
        if orphans := scalar_int(cur, ORPHAN_VECTORS_SQL):
            problems.append(f"{orphans} vector(s) or vector queue entries point at no message or row (ADR-0043)")
        if unvectored := scalar_int(cur, UNVECTORED_SQL):
            problems.append(f"{unvectored} message(s) or row(s) have no vector and wait for none (ADR-0043)")
        waiting = scalar_int(cur, WAITING_SQL)
        if problems:
            return attrs.evolve(report, ok=False, problem="; ".join(problems))
        replica = scratch()
        try:
            _, live, rebuilt = _fold(cur, replica, stages.stage(), stages.stage())
        except IntegrityError as exc:
            return attrs.evolve(report, ok=False, problem=f"the log does not replay: {exc}")
        finally:
            replica.close(keep=False)
    differing = differing_tables(live, rebuilt)
    if differing:
        return attrs.evolve(report, ok=False, table_checksums=live,
                            problem=f"projection tables differ from the log: {', '.join(differing)}")
    return attrs.evolve(report, table_checksums=live, vectors_waiting=waiting)


def replay_postgres(store: PostgresEventStore, target_dir: Path, replica_in: Callable[[Path], Replica],
                    progress: Progress | None = None) -> dict[str, Any]:
    """Rebuild the server's projections from its log into ``replica_in(target_dir)`` (a new
    database, never one that exists); the figures and whether every projection equals the server's."""
    replica = replica_in(target_dir)
    finished = False
    try:
        with _snapshot(store) as cur:
            # One progress over the fold and the checksums (ADR-0038).
            count = scalar_int(cur, "SELECT count(*) FROM events")
            stages = Stages(progress, [count, count])
            events, live, rebuilt = _fold(cur, replica, stages.stage(), stages.stage())
        finished = True
    finally:
        replica.close(keep=finished)
    differing = differing_tables(live, rebuilt)
    return {"events": events, "target": replica.target, "identical": not differing,
            "differing_tables": differing, "checksums": rebuilt}
