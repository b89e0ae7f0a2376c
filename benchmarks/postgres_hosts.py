"""Many hosts on one PostgreSQL database: what hearing each other's writes costs (ADR-0064).

For each host count N (``--hosts 2,4,8`` of ``benchmarks/postgres.py``): N processes open the same
database, each with a home of its own (as hosts do); N-1 append messages, one only listens. The
processes start together at a barrier. Printed for the change feed on and off (the store's
``feed=False``, in the same run, the two taking turns at each N):

* ``idle_cpu_ms_per_foreign_write``: the CPU the listening host spent (all its threads) from the
  barrier until it had heard every write, divided by the writes of the others;
* ``writer_cpu_ms_per_append``: a writer's CPU per append of its own (it hears the others too);
* ``writer_cpu_ms_per_foreign_write``: what a writer's CPU grows by with the feed on, per write
  of the others (on minus off, divided by the others' writes);
* ``appends_per_s``: all appends over the time from the first start to the last finish.

Progress goes to stderr; :func:`run_hosts` returns the figures for ``postgres.py``'s JSON line.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

from append_and_recall import progress

WAIT_S = 60.0


def _host(url: str, home: Path, process: int, count: int, feed: bool, barrier: Any, done: Any, out: Any) -> None:
    """One host: append ``count`` messages after the barrier (0: only listen), then report its CPU."""
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
        cpu, started = time.process_time(), time.monotonic()
        for i in range(count):
            append_one(memory, process, i, lines[i])
        ended = time.monotonic()
        done.wait(WAIT_S)  # every writer finished: then what this host has still to hear
        last = store.last_position() if feed else 0
        while store.known_position() < last and time.monotonic() < deadline + WAIT_S:
            time.sleep(0.005)
        out.put((process, count, started, ended, time.process_time() - cpu))


def one_run(url: str, base: Path, hosts: int, messages: int, feed: bool) -> dict[str, float]:
    """``hosts`` processes on the database of ``url``: ``hosts - 1`` writers sharing ``messages``, one listener."""
    ctx = mp.get_context("spawn")
    barrier, done, out = ctx.Barrier(hosts), ctx.Event(), ctx.Queue()
    writers = hosts - 1
    shares = [0] + [messages // writers + (w < messages % writers) for w in range(writers)]
    workers = [ctx.Process(target=_host, args=(url, base / f"host-{p}", p, shares[p], feed, barrier, done, out))
               for p in range(hosts)]
    for worker in workers:
        worker.start()
    results = []
    for _ in range(writers):
        results.append(out.get(timeout=600))
    done.set()
    results.append(out.get(timeout=600))
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"a host exited with {worker.exitcode}")
    written = [r for r in results if r[1]]
    idle = next(r for r in results if not r[1])
    elapsed = max(r[3] for r in written) - min(r[2] for r in written)
    foreign_per_writer = sum(r[1] for r in written) / len(written) * (writers - 1) if writers > 1 else 0.0
    return {"appends_per_s": round(messages / elapsed, 1),
            "idle_cpu_ms_per_foreign_write": round(idle[4] * 1000 / messages, 4),
            "writer_cpu_ms_per_append": round(sum(r[4] for r in written) * 1000 / messages, 3),
            "_writer_cpu_s": sum(r[4] for r in written) / len(written), "_foreign_per_writer": foreign_per_writer}


def run_hosts(server: Any, base: Path, counts: list[int], messages: int) -> dict[str, Any]:
    """The figures of every host count, feed on and off, on a fresh database each."""
    figures: dict[str, Any] = {}
    for hosts in counts:
        row: dict[str, Any] = {}
        for feed in (True, False):
            label = "feed_on" if feed else "feed_off"
            progress(f"hosts: {hosts} on one database ({hosts - 1} writing), change feed {'on' if feed else 'off'}")
            folder = base / f"hosts-{hosts}-{label}"
            folder.mkdir(parents=True)
            row[label] = one_run(server.fresh_database(), folder, hosts, messages, feed)
        on, off = row["feed_on"], row["feed_off"]
        foreign = on.pop("_foreign_per_writer")
        off.pop("_foreign_per_writer")
        grown = on.pop("_writer_cpu_s") - off.pop("_writer_cpu_s")
        on["writer_cpu_ms_per_foreign_write"] = round(grown * 1000 / foreign, 4) if foreign else None
        row["appends_feed_on_to_off"] = round(on["appends_per_s"] / off["appends_per_s"], 2)
        figures[str(hosts)] = row
    return figures


def print_hosts(figures: dict[str, Any]) -> None:
    print("hosts on one database (one only listens): CPU per write of the others, appends/s, feed on | off")
    print(f"{'hosts':>5} | {'idle ms/foreign':>15} | {'writer ms/foreign':>17} | {'appends/s on':>12}"
          f" | {'appends/s off':>13} | {'on/off':>6}")
    for hosts, row in figures.items():
        on, off = row["feed_on"], row["feed_off"]
        writer = on["writer_cpu_ms_per_foreign_write"]
        print(f"{hosts:>5} | {on['idle_cpu_ms_per_foreign_write']:>15.4f} | "
              f"{writer if writer is not None else float('nan'):>17.4f} | {on['appends_per_s']:>12,.0f}"
              f" | {off['appends_per_s']:>13,.0f} | {row['appends_feed_on_to_off']:>6.2f}")
