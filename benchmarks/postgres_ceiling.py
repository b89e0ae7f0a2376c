"""What one process's appends could reach: ours beside the bare commit loop of each store, in one run.

Every figure is one process appending one message per transaction, durable, on this machine's
disk (the server's data folder and the SQLite files in the same temporary folder):

* **bare PostgreSQL** — ``INSERT INTO bare(body) VALUES (%s)`` on an autocommit psycopg
  connection: one statement and its COMMIT per round trip, ``synchronous_commit`` and ``fsync``
  on (the server ``tests/postgres_server.py`` starts for benchmarks: ``running_server(durable=True)``).
* **ours, PostgreSQL** — ``MemorySystem.append_message`` on a fresh database of that server.
* **bare SQLite** (WAL, ``synchronous=FULL`` and ``NORMAL``) — the same INSERT loop with apsw.
* **ours, SQLite** — ``append_message`` with ``durability`` ``full`` and ``normal``.

Beside each rate: the client's CPU per append (this process, every thread) and, on PostgreSQL,
the server's (its postmaster, the children it reaped and its live ones: backends, WAL writer,
checkpointer). ``--sync-methods fdatasync,fsync,open_datasync`` runs the PostgreSQL pair once per
``wal_sync_method`` (set with ``ALTER SYSTEM`` and a reload). The rows take turns, ``--runs`` times;
each figure is the median of its runs.

Run (from the repository root; needs the ``[postgres]`` extra and PostgreSQL's binaries)::

    .venv/bin/python benchmarks/postgres_ceiling.py --quick

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from append_and_recall import progress
from postgres import append_one, texts

from fermix_memory import MemorySystem

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.postgres_server
from tests.postgres_server import PostgresServer, missing_server, running_server

Figures = tuple[float, float, float]
SETTINGS = ("wal_sync_method", "synchronous_commit", "fsync", "full_page_writes", "wal_level", "commit_delay",
            "shared_buffers", "wal_buffers", "data_directory")


def cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def server_cpu_s(server: PostgresServer | None) -> float:
    """CPU seconds of the server: its postmaster (with the children it reaped) and its live children."""
    if server is None:
        return 0.0
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # it ended meanwhile
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def timed(loop: Callable[[], None], count: int, server: PostgresServer | None = None) -> Figures:
    """(appends/s, client CPU µs per append, server CPU µs per append) of ``loop``, which appends
    ``count`` times."""
    started, cpu, served = time.perf_counter(), cpu_s(), server_cpu_s(server)
    loop()
    elapsed = time.perf_counter() - started
    return count / elapsed, (cpu_s() - cpu) / count * 1e6, (server_cpu_s(server) - served) / count * 1e6


def bare_postgres(url: str, lines: list[str], server: PostgresServer) -> Figures:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bare (id bigserial PRIMARY KEY, body text NOT NULL)")
        conn.execute("INSERT INTO bare (body) VALUES (%s)", ("warm",))

        def loop() -> None:
            for line in lines:
                conn.execute("INSERT INTO bare (body) VALUES (%s)", (line,))

        return timed(loop, len(lines), server)


def bare_sqlite(path: Path, synchronous: str, lines: list[str]) -> Figures:
    import apsw

    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE bare (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")

        def loop() -> None:
            for line in lines:
                conn.execute("INSERT INTO bare (body) VALUES (?)", (line,))

        return timed(loop, len(lines))
    finally:
        conn.close()


def ours(home: Path, durability: str, lines: list[str], server: PostgresServer | None = None) -> Figures:
    config: dict[str, Any] = {"fermix_core": {"memory": {"durability": durability}}}
    if server is not None:
        config["fermix_core"]["storage"] = {"url": server.fresh_database()}
    with MemorySystem.open(home, config=config) as memory:
        append_one(memory, 0, len(lines), "warm: connections and statements")

        def loop() -> None:
            for i, line in enumerate(lines):
                append_one(memory, 0, i, line)

        return timed(loop, len(lines), server)


def server_settings(server: PostgresServer) -> dict[str, str]:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        found = {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in SETTINGS}  # type: ignore[index]
    done = subprocess.run(["df", "--output=fstype", found["data_directory"]], capture_output=True, text=True,
                          check=False)
    found["data_directory_filesystem"] = done.stdout.split()[-1] if done.returncode == 0 else "?"
    return found


def one_round(server: PostgresServer, base: Path, run: int, methods: Sequence[str], lines: list[str]
              ) -> dict[str, Figures]:
    out: dict[str, Figures] = {}
    for method in methods:
        server.admin(f"ALTER SYSTEM SET wal_sync_method = '{method}'")
        server.admin("SELECT pg_reload_conf()")
        progress(f"run {run}: PostgreSQL ({method}), bare and ours")
        out[f"postgres_bare_{method}"] = bare_postgres(server.fresh_database(), lines, server)
        home = base / f"pg-{method}-{run}"
        home.mkdir()
        out[f"postgres_ours_{method}"] = ours(home, "full", lines, server)
    for synchronous in ("FULL", "NORMAL"):
        progress(f"run {run}: SQLite ({synchronous}), bare and ours")
        out[f"sqlite_bare_{synchronous.lower()}"] = bare_sqlite(base / f"bare-{synchronous}-{run}.db", synchronous,
                                                               lines)
        home = base / f"sqlite-{synchronous}-{run}"
        home.mkdir()
        out[f"sqlite_ours_{synchronous.lower()}"] = ours(home, synchronous.lower(), lines)
    return out


def summary(rounds: list[dict[str, Figures]], methods: Sequence[str]) -> dict[str, Any]:
    rate = {name: statistics.median(r[name][0] for r in rounds) for name in rounds[0]}
    cpu = {name: statistics.median(r[name][1] for r in rounds) for name in rounds[0]}
    served = {name: statistics.median(r[name][2] for r in rounds) for name in rounds[0] if name.startswith("postgres")}
    out: dict[str, Any] = {"appends_per_s": {k: round(v, 1) for k, v in rate.items()},
                           "client_cpu_us_per_append": {k: round(v, 1) for k, v in cpu.items()},
                           "server_cpu_us_per_append": {k: round(v, 1) for k, v in served.items()}}
    first = methods[0]
    out["ratios"] = {
        "postgres_ours_to_bare": round(rate[f"postgres_ours_{first}"] / rate[f"postgres_bare_{first}"], 3),
        "postgres_ours_to_sqlite_ours_full": round(rate[f"postgres_ours_{first}"] / rate["sqlite_ours_full"], 3),
        "postgres_bare_to_sqlite_bare_full": round(rate[f"postgres_bare_{first}"] / rate["sqlite_bare_full"], 3),
        "sqlite_ours_full_to_bare_full": round(rate["sqlite_ours_full"] / rate["sqlite_bare_full"], 3),
        "sqlite_ours_full_to_normal": round(rate["sqlite_ours_full"] / rate["sqlite_ours_normal"], 3),
    }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One process's appends beside the bare commit loops.")
    parser.add_argument("--messages", type=int, default=600, help="appends of each row")
    parser.add_argument("--runs", type=int, default=3, help="rounds of every row, taking turns")
    parser.add_argument("--sync-methods", default="fdatasync", help="PostgreSQL wal_sync_method values")
    parser.add_argument("--quick", action="store_true", help="300 appends, 2 runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.runs = 300, 2
    methods = [m.strip() for m in args.sync_methods.split(",") if m.strip()]
    if missing := missing_server():
        print(f"postgres_ceiling.py: {missing}", file=sys.stderr)
        return 2
    lines = texts(0, args.messages)
    base = Path(tempfile.mkdtemp(prefix="fermix-bench-ceiling-"))
    try:
        with running_server(durable=True) as server:
            settings = server_settings(server)
            rounds = [one_round(server, base, run, methods, lines) for run in range(args.runs)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = {"benchmark": "postgres_ceiling", "messages": args.messages, "runs": args.runs, "server": settings,
           **summary(rounds, methods)}
    for name, rate in out["appends_per_s"].items():
        server = out["server_cpu_us_per_append"].get(name)
        client = out["client_cpu_us_per_append"][name]
        print(f"{name:<28} {rate:>9,.0f} appends/s   CPU µs/append: client {client:>6.0f}"
              + (f", server {server:>6.0f}" if server is not None else ""))
    print("ratios: " + "  ".join(f"{k} {v:.2f}" for k, v in out["ratios"].items()))
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
