"""Replay and verification (R-REPLAY, R-LOG): rebuild projections from the log alone, check the
hash chain, and compare canonical per-table checksums."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import attrs

from fermix_memory.adapters.sqlite.codec import decode_payload
from fermix_memory.adapters.sqlite.connection import enable_wal, open_connection, scalar_int
from fermix_memory.adapters.sqlite.event_store import chain_hash, payload_digest
from fermix_memory.adapters.sqlite.head import GENESIS_HASH, Head, head_problem
from fermix_memory.adapters.sqlite.projections import project
from fermix_memory.adapters.sqlite.schema import (
    FTS_TABLES,
    PROJECTION_TABLES,
    deferred_indexing,
    migrate,
    missing_triggers,
)
from fermix_memory.application.errors import ForeignDatabase, IntegrityError, StorageError
from fermix_memory.domain.events import OwnerForgotten

Progress = Callable[[int, int], None]
_BATCH = 5_000


@attrs.frozen(kw_only=True)
class VerifyReport:
    ok: bool
    events: int
    first_bad_position: int | None = None
    problem: str = ""
    redacted: int = 0
    table_checksums: dict[str, str] = attrs.field(factory=dict)


def _canonical(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, float):
        return repr(value)
    return value


def table_checksums(conn: apsw.Connection) -> dict[str, str]:
    """SHA-256 of every projection table's rows in a canonical order and encoding."""
    sums = {}
    for table in PROJECTION_TABLES:
        ncols = len(conn.execute(f"PRAGMA table_info({table})").fetchall())
        order = ", ".join(str(i) for i in range(1, ncols + 1))
        digest = hashlib.sha256()
        for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}"):
            digest.update(json.dumps([_canonical(v) for v in row], ensure_ascii=False).encode())
            digest.update(b"\n")
        sums[table] = digest.hexdigest()
    return sums


def fts_integrity(conn: apsw.Connection) -> None:
    """Run FTS5's 'integrity-check' on both full-text indexes (raises on damage)."""
    for table in FTS_TABLES:
        try:
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        except apsw.Error as exc:
            raise IntegrityError(f"{table} does not match its content table: {exc}") from exc


def check_chain(conn: apsw.Connection, progress: Progress | None = None) -> VerifyReport:
    """Walk the log in order; name the first row whose payload or chain hash is wrong."""
    total = scalar_int(conn, "SELECT count(*) FROM events")
    prev, count, redacted, expected_position = GENESIS_HASH, 0, 0, 1
    erasures = _ErasureAccount()
    rows = conn.execute(
        "SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash, hash"
        " FROM events ORDER BY position"
    )
    for position, stream, version, kind, schema, recorded_at, payload, digest, prev_hash, row_hash in rows:
        count += 1
        if position != expected_position:
            return VerifyReport(
                ok=False,
                events=count,
                first_bad_position=position,
                problem=f"gap in the log: expected position {expected_position}",
            )
        expected_position += 1
        if payload is None:
            redacted += 1
            erasures.unaccounted[position] = kind
        elif payload_digest(payload) != digest:
            return VerifyReport(
                ok=False,
                events=count,
                first_bad_position=position,
                problem=f"event {position} ({kind}): payload does not match its digest",
            )
        if prev_hash != prev:
            return VerifyReport(
                ok=False,
                events=count,
                first_bad_position=position,
                problem=f"event {position} ({kind}): previous hash does not link to event {position - 1}",
            )
        if chain_hash(prev, position, stream, version, kind, schema, recorded_at, digest) != row_hash:
            return VerifyReport(
                ok=False,
                events=count,
                first_bad_position=position,
                problem=f"event {position} ({kind}): row hash does not match its contents",
            )
        prev = row_hash
        if kind == OwnerForgotten.kind and payload is not None:
            problem = erasures.record(position, schema, payload)
            if problem:
                return VerifyReport(ok=False, events=count, first_bad_position=position, problem=problem,
                                    redacted=redacted)
        if progress is not None and count % _BATCH == 0:
            progress(count, total)
    if erasures.unaccounted:
        position, kind = min(erasures.unaccounted.items())
        return VerifyReport(
            ok=False, events=count, first_bad_position=position, redacted=redacted,
            problem=f"event {position} ({kind}): payload is NULL but no recorded erasure names it"
                    f" ({len(erasures.unaccounted)} such events)",
        )
    if progress is not None:
        progress(count, total)
    return VerifyReport(ok=True, events=count, redacted=redacted)


class _ErasureAccount:
    """Every NULL payload must be named by a later ``owner.forgotten`` record; schema-1 records
    (which only gave a number) account for that many of the unnamed ones before them."""

    def __init__(self) -> None:
        self.unaccounted: dict[int, str] = {}
        self.accounted: set[int] = set()

    def record(self, position: int, schema: int, payload: str) -> str:
        try:
            event = decode_payload(OwnerForgotten.kind, schema, payload)
        except IntegrityError as exc:
            return f"event {position} (owner.forgotten): {exc}"
        assert isinstance(event, OwnerForgotten)
        if event.redacted_positions is None:
            for old in sorted(self.unaccounted)[:event.erased_events]:
                del self.unaccounted[old]
                self.accounted.add(old)
            return ""
        for named in event.redacted_positions:
            if self.unaccounted.pop(named, None) is None:
                state = "was already accounted for" if named in self.accounted else "is not redacted"
                return f"event {position} (owner.forgotten) names event {named} as erased, but it {state}"
            self.accounted.add(named)
        return ""


@attrs.frozen(kw_only=True)
class LogEntry:
    """One row of the log as an auditor reads it; ``event`` is ``None`` once redacted."""

    position: int
    stream: str
    version: int
    kind: str
    recorded_at: str
    payload_sha256: str
    event: Any


def log_entries(conn: apsw.Connection, after: int = 0, kind: str | None = None) -> Iterator[LogEntry]:
    """Every event after ``after`` in log order (of one kind when given), redacted ones included."""
    sql = ("SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256 FROM events"
           " WHERE position > ?" + (" AND kind = ?" if kind else "") + " ORDER BY position")
    for position, stream, version, row_kind, schema, recorded_at, payload, digest in conn.execute(
        sql, (after, kind) if kind else (after,)
    ):
        yield LogEntry(position=position, stream=stream, version=version, kind=row_kind, recorded_at=recorded_at,
                       payload_sha256=digest,
                       event=None if payload is None else decode_payload(row_kind, schema, payload))


def fold_log(source: apsw.Connection, target: apsw.Connection, progress: Progress | None = None) -> int:
    """Copy ``source``'s log into the empty ``target`` and rebuild every projection from it.

    Runs in batched transactions on ``target``, with the full-text indexes and plain indexes
    built once at the end (:func:`deferred_indexing`); returns the number of events folded.
    """
    total = scalar_int(source, "SELECT count(*) FROM events")
    count = 0
    with deferred_indexing(target):
        cur = target.cursor()
        rows = source.execute(
            "SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash, hash"
            " FROM events ORDER BY position"
        )
        cur.execute("BEGIN IMMEDIATE")
        try:
            for row in rows:
                cur.execute(
                    "INSERT INTO events(position, stream, version, kind, schema, recorded_at, payload,"
                    " payload_sha256, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    row,
                )
                position, kind, schema, payload = row[0], row[3], row[4], row[6]
                if payload is not None:
                    project(cur, position, decode_payload(kind, schema, payload))
                count += 1
                if count % _BATCH == 0:
                    cur.execute("COMMIT")
                    if progress is not None:
                        progress(count, total)
                    cur.execute("BEGIN IMMEDIATE")
            cur.execute("COMMIT")
        except BaseException:
            if target.in_transaction:
                target.execute("ROLLBACK")
            raise
    if progress is not None:
        progress(count, total)
    return count


def replay_into(source_path: Path, target_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Rebuild ``source_path``'s projections from its log into ``target_dir/memory.db``.

    The target must not exist yet (nothing is ever overwritten). Returns the figures and
    whether every projection checksum equals the source's.
    """
    target_dir.mkdir(parents=True, exist_ok=True)
    target_path = target_dir / "memory.db"
    if target_path.exists():
        raise StorageError(f"{target_path} already exists; replay only writes into a new folder")
    source = open_connection(source_path, readonly=True)
    try:
        target = open_connection(target_path)
    except BaseException:
        source.close()
        raise
    finished = False
    try:
        migrate(target, str(target_path))
        enable_wal(target)
        source.execute("BEGIN")  # one consistent snapshot of the source
        try:
            events = fold_log(source, target, progress)
            live = table_checksums(source)
        finally:
            source.execute("COMMIT")
        rebuilt = table_checksums(target)
        fts_integrity(target)
        finished = True
    finally:
        source.close()
        target.close()
        if not finished:  # a half-built copy is no copy: remove the files this call created
            for leftover in (target_path, *(target_path.with_name(target_path.name + s) for s in ("-wal", "-shm"))):
                leftover.unlink(missing_ok=True)
    differing = sorted(t for t in live if live[t] != rebuilt[t])
    return {
        "events": events,
        "target": str(target_path),
        "identical": not differing,
        "differing_tables": differing,
        "checksums": rebuilt,
    }


def _fts_problem(conn: apsw.Connection, readonly: bool) -> str:
    """FTS5's integrity check (an INSERT command, rolled back); on a copy when read-only."""
    target = conn
    if readonly:
        target = apsw.Connection(":memory:")
        with target.backup("main", conn, "main") as copy:
            copy.step()
    try:
        target.execute("BEGIN IMMEDIATE")
        try:
            fts_integrity(target)
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
    """
    try:
        return _verify(path, progress, anchors, noted, readonly)
    except (apsw.CorruptError, apsw.NotADBError, ForeignDatabase) as exc:
        return VerifyReport(ok=False, events=0, problem=f"memory.db is damaged and cannot be read: {exc}")


def _verify(path: Path, progress: Progress | None, anchors: Sequence[tuple[str, Head]],
            noted: Sequence[str], readonly: bool) -> VerifyReport:
    conn = open_connection(path, readonly=readonly)
    try:
        fts_problem = _fts_problem(conn, readonly)
        conn.execute("BEGIN")
        try:
            report = check_chain(conn, progress)
            if not report.ok:
                return report
            problems = [p for label, head in anchors if (p := head_problem(conn, head, label))]
            missing = missing_triggers(conn)
            if missing:
                problems.append(f"the append-only triggers {', '.join(missing)} are missing")
            problems += [*noted, *([fts_problem] if fts_problem else [])]
            if problems:
                return attrs.evolve(report, ok=False, problem="; ".join(problems))
            live = table_checksums(conn)
            scratch = open_connection(":memory:")
            try:
                migrate(scratch, ":memory:")
                fold_log(conn, scratch)
                rebuilt = table_checksums(scratch)
                differing = sorted(t for t in live if live[t] != rebuilt[t])
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
    return attrs.evolve(report, table_checksums=live)
