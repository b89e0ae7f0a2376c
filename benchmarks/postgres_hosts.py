"""Many hosts on one PostgreSQL database: what hearing each other's writes costs (ADR-0064).

For each host count N (``--hosts 2,4,8`` of ``benchmarks/postgres.py``, or this script alone):
N processes open the same database, each with a home of its own (as hosts do); N-1 append
messages, one only listens. The processes start together at a barrier. Printed for the change
feed on and off (the store's ``feed=False``, in the same run, the two taking turns at each N):

* ``idle_cpu_ms_per_foreign_write``: the CPU the listening host spent (all its threads) from the
  barrier until it had heard every write, less its idle CPU over the same time (its rate measured
  in the same process right after, while nothing is written), divided by the writes of the others;
* ``idle_feed_cpu_ms_per_foreign_write``: the same of its change feed's thread alone (the thread's
  own CPU clock: no idle baseline to subtract, nothing else counted);
* ``idle_raw_cpu_ms_per_foreign_write``: all its CPU, no baseline subtracted (an upper bound);
* ``writer_cpu_ms_per_append``: a writer's CPU, from the barrier until every host has finished
  writing and it has heard every write, per append of its own (it hears the others too);
* ``writer_cpu_ms_per_foreign_write``: what a writer's CPU grows by with the feed on, per write
  of the others (on minus off, divided by the others' writes); ``writer_feed_cpu_ms_per_foreign_write``:
  its change feed thread's CPU per write of the others;
* ``appends_per_s``: all appends over the time from the first start to the last finish.

``--against DIR`` (this script alone) measures, beside this tree, the package found in ``DIR``
(a folder holding ``fermix_memory/``, such as an earlier version's files), feed on, in the same
run: figures under ``feed_on_against``.

Run (from the repository root)::

    .venv/bin/python benchmarks/postgres_hosts.py --hosts 2,4,8 --messages 300

Progress goes to stderr; :func:`run_hosts` returns the figures for ``postgres.py``'s JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

WAIT_S = 60.0
POLL_S = 0.02  # how often the listening host looks whether it has heard everything
BASELINE_S = 1.0  # how long the listening host measures its CPU while nothing is written
FEED_THREAD = "fermix-change-feed"


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def feed_cpu() -> float:
    """The CPU seconds of this process's change-feed thread (its own clock)."""
    total = 0.0
    for thread in threading.enumerate():
        if thread.name == FEED_THREAD and thread.ident is not None:
            try:
                total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except OSError:
                continue  # it ended meanwhile
    return total


def _host(url: str, home: Path, process: int, count: int, feed: bool, barrier: Any, written: Any, out: Any,
          package: str | None = None) -> None:
    """One host: append ``count`` messages after the barrier (0: only listen), then report its CPU."""
    if package is not None:  # a tree measured beside this one (--against): found before this one
        sys.path.insert(0, package)
    from postgres import append_one, texts

    from fermix_memory import MemorySystem
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store = PostgresEventStore(url, feed=feed)
    with MemorySystem(bootstrap(home, store=store)) as memory:
        deadline = time.monotonic() + WAIT_S
        while feed and not store.listening and time.monotonic() < deadline:
            time.sleep(0.01)
        lines = texts(process, count + 1)
        if count:
            append_one(memory, process, count, lines[-1])  # connections and statements, untimed
        barrier.wait()
        cpu, thread_cpu, started = time.process_time(), feed_cpu(), time.monotonic()
        for i in range(count):
            append_one(memory, process, i, lines[i])
        ended = time.monotonic()
        written.wait(WAIT_S)  # every host finished writing: then what this host has still to hear
        last = store.last_position() if feed else 0
        while store.known_position() < last and time.monotonic() < deadline + WAIT_S:
            time.sleep(POLL_S)
        heard = time.monotonic()
        used, thread_used = time.process_time() - cpu, feed_cpu() - thread_cpu
        idle_rate = 0.0
        if not count:  # nothing is written now: what this host spends doing nothing
            quiet, quiet_cpu = time.monotonic(), time.process_time()
            time.sleep(BASELINE_S)
            idle_rate = (time.process_time() - quiet_cpu) / (time.monotonic() - quiet)
        out.put({"process": process, "count": count, "started": started, "ended": ended, "cpu": used,
                 "feed_cpu": thread_used, "idle_cpu": idle_rate * (heard - started)})


def one_run(url: str, base: Path, hosts: int, messages: int, feed: bool,
            package: str | None = None) -> dict[str, Any]:
    """``hosts`` processes on the database of ``url``: ``hosts - 1`` writers sharing ``messages``, one listener."""
    ctx = mp.get_context("spawn")
    barrier, written, out = ctx.Barrier(hosts), ctx.Barrier(hosts), ctx.Queue()
    writers = hosts - 1
    shares = [0] + [messages // writers + (w < messages % writers) for w in range(writers)]
    workers = [ctx.Process(target=_host, args=(url, base / f"host-{p}", p, shares[p], feed, barrier, written, out,
                                               package)) for p in range(hosts)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=600) for _ in range(hosts)]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"a host exited with {worker.exitcode}")
    written = [r for r in results if r["count"]]
    idle = next(r for r in results if not r["count"])
    elapsed = max(r["ended"] for r in written) - min(r["started"] for r in written)
    foreign_per_writer = sum(r["count"] for r in written) / len(written) * (writers - 1) if writers > 1 else 0.0
    writer_feed = sum(r["feed_cpu"] for r in written) / len(written)
    return {"appends_per_s": round(messages / elapsed, 1),
            "idle_cpu_ms_per_foreign_write": round((idle["cpu"] - idle["idle_cpu"]) * 1000 / messages, 4),
            "idle_feed_cpu_ms_per_foreign_write": round(idle["feed_cpu"] * 1000 / messages, 4),
            "idle_raw_cpu_ms_per_foreign_write": round(idle["cpu"] * 1000 / messages, 4),
            "writer_cpu_ms_per_append": round(sum(r["cpu"] for r in written) * 1000 / messages, 3),
            "writer_feed_cpu_ms_per_foreign_write": round(writer_feed * 1000 / foreign_per_writer, 4)
            if foreign_per_writer else None,
            "_writer_cpu_s": sum(r["cpu"] for r in written) / len(written), "_foreign_per_writer": foreign_per_writer}


def run_hosts(server: Any, base: Path, counts: list[int], messages: int,
              against: str | None = None) -> dict[str, Any]:
    """The figures of every host count, feed on and off (and feed on with ``against``'s package),
    on a fresh database each."""
    figures: dict[str, Any] = {}
    for hosts in counts:
        row: dict[str, Any] = {}
        runs = [("feed_on", True, None), ("feed_off", False, None)]
        if against is not None:
            runs.insert(1, ("feed_on_against", True, against))
        for label, feed, package in runs:
            progress(f"hosts: {hosts} on one database ({hosts - 1} writing), {label}")
            folder = base / f"hosts-{hosts}-{label}"
            folder.mkdir(parents=True)
            row[label] = one_run(server.fresh_database(), folder, hosts, messages, feed, package)
        off = row["feed_off"]
        off_cpu = off.pop("_writer_cpu_s")
        off.pop("_foreign_per_writer")
        for label in [label for label, feed, _ in runs if feed]:
            on = row[label]
            foreign = on.pop("_foreign_per_writer")
            grown = on.pop("_writer_cpu_s") - off_cpu
            on["writer_cpu_ms_per_foreign_write"] = round(grown * 1000 / foreign, 4) if foreign else None
        row["appends_feed_on_to_off"] = round(row["feed_on"]["appends_per_s"] / off["appends_per_s"], 2)
        figures[str(hosts)] = row
    return figures


def print_hosts(figures: dict[str, Any]) -> None:
    print("hosts on one database (one only listens): CPU per write of the others (ms), appends/s, feed on | off")
    print(f"{'hosts':>5} | {'run':<15} | {'idle, net':>9} | {'idle feed':>9} | {'idle raw':>8} | {'writer':>7}"
          f" | {'writer feed':>11} | {'appends/s':>9}")
    for hosts, row in figures.items():
        for label, run in row.items():
            if not isinstance(run, dict):
                continue
            writer = run.get("writer_cpu_ms_per_foreign_write")
            writer_feed = run["writer_feed_cpu_ms_per_foreign_write"]
            print(f"{hosts:>5} | {label:<15} | {run['idle_cpu_ms_per_foreign_write']:>9.4f} | "
                  f"{run['idle_feed_cpu_ms_per_foreign_write']:>9.4f} | "
                  f"{run['idle_raw_cpu_ms_per_foreign_write']:>8.4f} | {_cell(writer):>7} | "
                  f"{_cell(writer_feed):>11} | {run['appends_per_s']:>9,.0f}")


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU per write of the other hosts, change feed on and off.")
    parser.add_argument("--hosts", default="2,4,8", help="host counts on one database, comma-separated")
    parser.add_argument("--messages", type=int, default=300, help="appends of each run")
    parser.add_argument("--against", default=None, help="a folder holding another fermix_memory/ to measure beside")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.postgres_server
    from tests.postgres_server import missing_server, running_server

    if missing := missing_server():
        print(f"postgres_hosts.py: {missing}", file=sys.stderr)
        return 2
    counts = sorted(int(h) for h in args.hosts.split(",") if h.strip())
    against = str(Path(args.against).resolve()) if args.against else None
    base = Path(tempfile.mkdtemp(prefix="fermix-bench-hosts-"))
    try:
        with running_server(durable=True) as server:
            figures = run_hosts(server, base, counts, args.messages, against)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_hosts(figures)
    print(json.dumps({"benchmark": "postgres_hosts", "messages": args.messages, "hosts": figures}, sort_keys=True))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # as postgres.py: meaning only where asked for
    sys.exit(main())
