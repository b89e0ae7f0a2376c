"""Benchmark: the reads that compare a partial index's columns (scope type, category, promote
target) with a bound value, against the same statements with the value written out (ADR-0069).

SQLite prepares a statement again at each run when a value bound to it could decide whether a
partial index applies (``memories_agent_rules`` is partial on all three columns). For each read,
the statement as it was (values bound: ``bound``) and as the product builds it now (``literal``,
taken from the product's own code) run on the same home, same connection, same parameters, taking
turns slice by slice; a figure is the median per run over the slices (thread CPU time beside).

Run by hand: ``.venv/bin/python benchmarks/partial_index_literals.py [--runs 1000] [--rows 200]``.
The last line of stdout is one JSON object; ``*_ratio`` is bound time over literal time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.rows import MEMORY_COLUMNS, memory_columns, shown_rows_sql
from fermix_memory.adapters.sql.scope_sql import scope_sql
from fermix_memory.adapters.sqlite.fts_query import match_expression
from fermix_memory.adapters.sqlite.queries import SqliteQueries
from fermix_memory.domain.rendering import SHOWN_SECTIONS
from fermix_memory.domain.scopes import MemoryFilter
from fermix_memory.domain.values import ScopeType

AGENT, OWNER, CHAT = "ada", "alice", "c1"
CATEGORIES = ["identity", "preference", "interest", "goal", "context"]
SLICES = 10


def fill(home: Path, rows: int) -> str:
    """A home with ``rows`` owner rows and ``rows`` rows of one conversation; its scope id."""
    with MemorySystem.open(home) as memory:
        for writer, trust, conversation in (("operator", "operator", None),
                                            ("tool", "guest", {"channel": "cli", "chat_id": CHAT})):
            ops = [{"op": "add", "category": CATEGORIES[i % len(CATEGORIES)], "key": f"{writer}_{i}",
                    "value": f"note {i} about coffee and the project"} for i in range(rows)]
            for start in range(0, rows, 50):
                memory.write_memory(ops[start:start + 50], agent_id=AGENT, owner_id=OWNER, writer=writer,
                                    trust=trust, conversation=conversation)
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        return str(conn.execute("SELECT scope_id FROM memories WHERE scope_type = 'conversation' LIMIT 1")
                   .fetchall()[0][0])
    finally:
        conn.close()


def bound_scope_sql(where: MemoryFilter, alias: str = "") -> tuple[str, list[Any]]:
    """``scope_sql`` as it was: the scope types bound."""
    p = f"{alias}." if alias else ""
    clauses, params = [], [where.agent_id, where.owner_id]
    for stype, sid in where.scopes:
        if sid is None:
            clauses.append(f"{p}scope_type = ?")
            params.append(stype.value)
        else:
            clauses.append(f"({p}scope_type = ? AND {p}scope_id = ?)")
            params.extend((stype.value, sid))
    return f"{p}agent_id = ? AND {p}owner_id = ? AND ({' OR '.join(clauses)})", params


def memories_sql(scope: Callable[..., tuple[str, list[Any]]], where: MemoryFilter) -> tuple[str, list[Any]]:
    sql, params = scope(where)
    return f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {sql} AND archived_at IS NULL ORDER BY id", params


def recall_sql(scope: Callable[..., tuple[str, list[Any]]], where: MemoryFilter) -> tuple[str, list[Any]]:
    sql, params = scope(where, "m")
    return (f"SELECT {memory_columns('m')}, f.rank, snippet(memories_fts, 1, '[', ']', '…', 12) FROM memories_fts f"
            f" JOIN memories m ON m.id = f.rowid WHERE memories_fts MATCH ? AND {sql}"
            " AND m.archived_at IS NULL ORDER BY f.rank LIMIT ?", [match_expression("coffee project"), *params, 10])


def under_bound() -> tuple[str, list[Any]]:
    """``memories_under``'s page as it was: scope type and category bound."""
    return (f"SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? AND owner_id = ? AND scope_type = ?"
            " AND archived_at IS NULL AND category = ? AND promote_target IS NULL AND scope_type <> 'job'"
            " AND (substr(scope_id, 1, ?) = ?) ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            [AGENT, OWNER, "conversation", "context", 0, "", 10, 0])


def under_literal(conn: apsw.Connection) -> tuple[str, list[Any]]:
    """The statement the product's ``memories_under`` runs for the same page (traced)."""
    seen: list[tuple[str, Any]] = []
    conn.exec_trace = lambda _c, sql, bindings: seen.append((sql, bindings)) is None
    SqliteQueries(lambda: conn).memories_under(AGENT, OWNER, "conversation", [""], limit=10,
                                               unshown_category="context")
    conn.exec_trace = None
    return seen[-1][0], list(seen[-1][1])


def shown_bound() -> tuple[str, list[Any]]:
    one = (f"SELECT * FROM (SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? AND owner_id = ?"
           " AND promote_target = ? AND category = ? AND archived_at IS NULL AND scope_type <> 'job'"
           " AND (scope_type <> 'conversation' OR category <> 'directive')"
           " ORDER BY updated_at DESC, id DESC LIMIT ?) AS section_N")
    sql = " UNION ALL ".join(one.replace("section_N", f"section_{n}") for n in range(len(SHOWN_SECTIONS)))
    return sql, [p for t, c, cap in SHOWN_SECTIONS for p in (AGENT, OWNER, str(t), str(c), cap)]


def shown_literal() -> tuple[str, list[Any]]:
    return (shown_rows_sql(tuple((t, c) for t, c, _ in SHOWN_SECTIONS)),
            [p for *_, cap in SHOWN_SECTIONS for p in (AGENT, OWNER, cap)])


def time_pair(conn: apsw.Connection, pair: dict[str, tuple[str, list[Any]]], runs: int) -> dict[str, Any]:
    """Each form ``runs`` times, in turns of ``runs / SLICES``; µs per run (median slice), wall and CPU."""
    per = max(1, runs // SLICES)
    wall: dict[str, list[float]] = {k: [] for k in pair}
    cpu: dict[str, list[float]] = {k: [] for k in pair}
    for name, (sql, params) in pair.items():  # warm both, and check they read the same rows
        pair_rows = conn.execute(sql, params).fetchall()
        if name == "literal" and pair_rows != conn.execute(*pair["bound"]).fetchall():
            raise SystemExit("the two forms read different rows")
    for s in range(SLICES):
        for name in (list(pair) if s % 2 == 0 else list(pair)[::-1]):
            sql, params = pair[name]
            w, c = time.perf_counter(), time.thread_time()
            for _ in range(per):
                conn.execute(sql, params).fetchall()
            wall[name].append((time.perf_counter() - w) / per * 1e6)
            cpu[name].append((time.thread_time() - c) / per * 1e6)
    out: dict[str, Any] = {}
    for name in pair:
        out[f"{name}_us"] = round(statistics.median(wall[name]), 1)
        out[f"{name}_cpu_us"] = round(statistics.median(cpu[name]), 1)
    out["ratio"] = round(out["bound_us"] / out["literal_us"], 2)
    out["cpu_ratio"] = round(out["bound_cpu_us"] / out["literal_cpu_us"], 2)
    out["rows"] = len(conn.execute(*pair["literal"]).fetchall())
    return out


def run(runs: int, rows: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        print(f"filling {2 * rows} rows", file=sys.stderr)
        scope_id = fill(home, rows)
        current = MemoryFilter(agent_id=AGENT, owner_id=OWNER, scopes=(
            (ScopeType.OWNER, OWNER), (ScopeType.AGENT, AGENT), (ScopeType.CONVERSATION, scope_id)))
        every = MemoryFilter(agent_id=AGENT, owner_id=OWNER, scopes=(
            (ScopeType.OWNER, OWNER), (ScopeType.AGENT, AGENT), (ScopeType.CONVERSATION, None)))
        conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            probe = "SELECT id FROM memories WHERE {} LIMIT 1"  # the scope condition alone: preparation shows
            reads = {
                "scope_only": {"bound": (probe.format((b := bound_scope_sql(current))[0]), b[1]),
                               "literal": (probe.format((lit := scope_sql(current))[0]), lit[1])},
                "memories_current": {"bound": memories_sql(bound_scope_sql, current),
                                     "literal": memories_sql(scope_sql, current)},
                "recall_all": {"bound": recall_sql(bound_scope_sql, every), "literal": recall_sql(scope_sql, every)},
                "memories_under": {"bound": under_bound(), "literal": under_literal(conn)},
                "shown_rows": {"bound": shown_bound(), "literal": shown_literal()},
            }
            figures: dict[str, Any] = {"runs": runs, "rows": 2 * rows}
            for name, pair in reads.items():
                figures[name] = time_pair(conn, pair, runs)
                print(f"{name:18} {figures[name]}", file=sys.stderr)
            return figures
        finally:
            conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=1000, help="runs of each statement (default 1000)")
    p.add_argument("--rows", type=int, default=20, help="rows per scope (default 20)")
    args = p.parse_args()
    print(json.dumps(run(args.runs, args.rows)))


if __name__ == "__main__":
    main()
