"""Verification of ``memory.db`` (R-REPLAY, R-LOG): the hash chain, head anchors, append-only
triggers and FTS indexes checked, and the projections compared with a replay of the log. The
chain check is the shared one (``sql.audit_chain``), replay is in :mod:`.audit_replay`; the
SQLite audit's names are importable from here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import attrs

from fermix_memory.adapters.sql.audit import Progress, Stages, VerifyReport, check_chain, differing_tables
from fermix_memory.adapters.sql.ddl import PROJECTION_TABLES
from fermix_memory.adapters.sql.head import Head, head_problem
from fermix_memory.adapters.sqlite.audit_replay import (
    SqliteReplica,
    fold_log,
    fts_integrity,
    index_rows,
    replay_into,
    table_checksums,
)
from fermix_memory.adapters.sqlite.connection import open_connection, scalar_int
from fermix_memory.adapters.sqlite.full_text_catch_up import CATCH_UP_SCHEMA, index_new
from fermix_memory.adapters.sqlite.schema import migrate, missing_triggers
from fermix_memory.adapters.sqlite.vectors import WAITING_WITH_MARK_SQL
from fermix_memory.application.errors import ForeignDatabase, IntegrityError

__all__ = ["SqliteReplica", "first_difference", "fold_log", "fts_integrity", "replay_into", "table_checksums",
           "verify_database"]


def _fts_problem(conn: apsw.Connection, readonly: bool, progress: Progress | None) -> str:
    """FTS5's integrity check (an INSERT command, rolled back); on a copy when read-only. The rows
    waiting for their entries are indexed first in the same rolled-back transaction (ADR-0091):
    the check compares each index with all of its content table, as a catch-up leaves it."""
    target = conn
    if readonly:
        target = apsw.Connection(":memory:")
        with target.backup("main", conn, "main") as copy:
            copy.step()
    try:
        target.execute("BEGIN IMMEDIATE")
        try:
            if scalar_int(target, "PRAGMA user_version") >= CATCH_UP_SCHEMA:  # else every row is indexed
                index_new(target.cursor(), None)
            fts_integrity(target, progress)
        except IntegrityError as exc:
            return str(exc)
        finally:
            target.execute("ROLLBACK")
    finally:
        if target is not conn:
            target.close()
    return ""


def _sort_key(key: tuple[Any, ...]) -> tuple[tuple[bool, float, str], ...]:
    return tuple((v is None, v if isinstance(v, int | float) else 0, str(v)) for v in key)


def first_difference(live: apsw.Connection, rebuilt: apsw.Connection, table: str) -> str:
    """The first row (by primary key) of ``table`` that differs between the two databases."""
    info = live.execute(f"PRAGMA table_info({table})").fetchall()
    keys = [(row[1], i) for i, row in enumerate(info) if row[5]] or [("rowid", -1)]
    select = f"SELECT {'rowid, ' if keys[0][1] < 0 else ''}* FROM {table}"

    def rows(conn: apsw.Connection) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        out = {}
        for row in conn.execute(select):
            values = tuple(row[1:]) if keys[0][1] < 0 else tuple(row)
            out[tuple(row[0:1]) if keys[0][1] < 0 else tuple(row[i] for _, i in keys)] = values
        return out

    here, there = rows(live), rows(rebuilt)
    for key in sorted(set(here) | set(there), key=_sort_key):
        if here.get(key) != there.get(key):
            name = ", ".join(f"{k}={v!r}" for (k, _), v in zip(keys, key, strict=True))
            if key not in there:
                return f"{table} row {name} is not in the log"
            if key not in here:
                return f"{table} row {name} is missing"
            return f"{table} row {name} does not match the log"
    return f"{table}: rows are equal, their order or encoding is not"


def verify_database(path: Path, progress: Progress | None = None, *, anchors: Sequence[tuple[str, Head]] = (),
                    noted: Sequence[str] = (), readonly: bool = False) -> VerifyReport:
    """Check the hash chain, the head ``anchors`` (``(label, head)``: the log must hold each),
    the append-only triggers, the FTS indexes, and that replaying the log gives the same tables.
    ``noted``: problems found when the store was opened. A damaged file is a failed check.

    ``readonly`` opens the file read-only (a read-only mount, an auditor's copy): FTS5's
    integrity check is a write command, so it then runs on an in-memory copy of the database.
    ``progress(done, total)`` is called throughout: one count over the index check, the chain
    walk and the replay, that only rises.
    """
    try:
        return _verify(path, progress, anchors, noted, readonly)
    except (apsw.CorruptError, apsw.NotADBError, ForeignDatabase) as exc:
        return VerifyReport(ok=False, events=0, problem=f"memory.db is damaged and cannot be read: {exc}")


def _verify(path: Path, progress: Progress | None, anchors: Sequence[tuple[str, Head]],
            noted: Sequence[str], readonly: bool) -> VerifyReport:
    conn = open_connection(path, readonly=readonly)
    try:
        # One progress over the whole check, in rows read: the index check, the chain walk, the
        # replay of every event into the scratch database, the checksums of both (ADR-0038).
        events = scalar_int(conn, "SELECT count(*) FROM events")
        waiting = scalar_int(conn, WAITING_WITH_MARK_SQL)
        stages = Stages(progress, [sum(index_rows(conn)), events, events, events])
        fts_problem = _fts_problem(conn, readonly, stages.stage())
        conn.execute("BEGIN")
        try:
            report = check_chain(conn, stages.stage())
            if not report.ok:
                return report
            problems = [p for label, head in anchors if (p := head_problem(conn, head, label))]
            missing = missing_triggers(conn)
            if missing:
                problems.append(f"the append-only triggers {', '.join(missing)} are missing")
            problems += [*noted, *([fts_problem] if fts_problem else [])]
            if problems:
                return attrs.evolve(report, ok=False, problem="; ".join(problems))
            scratch = open_connection(":memory:")
            try:
                migrate(scratch, ":memory:")
                fold_log(conn, scratch, stages.stage())
                checking = Stages(stages.stage(), [len(PROJECTION_TABLES)] * 2)
                live = table_checksums(conn, checking.stage())  # same read transaction as the fold
                rebuilt = table_checksums(scratch, checking.stage())
                differing = differing_tables(live, rebuilt)
                where = first_difference(conn, scratch, differing[0]) if differing else ""
            except IntegrityError as exc:
                return attrs.evolve(report, ok=False, problem=f"the log does not replay: {exc}")
            finally:
                scratch.close()
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")
    finally:
        conn.close()
    # Strict even after redactions: forgetting must scrub the projections in the same
    # transaction, so a row that replay cannot rebuild is data that was not really forgotten.
    if differing:
        return attrs.evolve(
            report,
            ok=False,
            table_checksums=live,
            problem=f"projection tables differ from the log: {', '.join(differing)} (first: {where})",
        )
    return attrs.evolve(report, table_checksums=live, vectors_waiting=waiting)
