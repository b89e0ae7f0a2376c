"""The LangGraph store beside the one a host would use instead: ``FermixStore`` against
LangGraph's ``SqliteStore`` (package ``langgraph-checkpoint-sqlite``, WAL, ``synchronous =
NORMAL``, fermix's default durability) in the same run, on the same machine.

Each store gets two owners in one database: one holding ``small`` items, one holding ``large``
items (filled by one batch each, untimed). Then, owner by owner, the two stores take turns slice
by slice (so a noisy neighbour taxes both alike) and each figure is the median slice:

- ``put``: one ``store.put`` of a new key per call (throughput, ours ÷ peer; target ≥ 0.5, and
  the same at both sizes: a put costs what one item costs, not what the owner holds);
- ``get``: one ``store.get`` of an existing key (throughput, ours ÷ peer; target ≥ 0.8);
- ``search``: ``store.search(namespace, limit=10)`` without a query (time, ours ÷ peer;
  target ≤ 2, and the same at both sizes: a page read in SQL);
- ``search_query``: ours with a full-text query, beside the peer's search given the same query
  (without an embedding index the peer ignores the query: not like for like, shown for scale);
- ``search_filter``: ``store.search(namespace, filter={"text": ...}, limit=10)`` matching one item
  (time, ours ÷ peer; the filter's texts are looked for in SQL first, ADR-0107);
- ``search_number``: ``store.search(namespace, filter={"n": {"$gte": size - 10}}, limit=10)``, a
  number compared (time, ours ÷ peer; the bound is looked for in SQL first, ADR-0109);
- ``list_namespaces``: ``store.list_namespaces(limit=100)`` (time, ours ÷ peer): read without the
  items' values (ADR-0104), so the same at both sizes;
- ``update`` and ``delete``: a put of an existing key, a delete of one ``put`` added (throughput,
  ours ÷ peer; no target in the issue: ADR-0106);
- ``aput``: ``await store.aput`` of a new key on an owner of 2,000 items, beside LangGraph's
  ``AsyncSqliteStore`` (throughput, ours ÷ peer; what an async graph's put costs, ADR-0110).

Ratios by CPU time of the process (``cpu_*``) are reported too: other processes on a shared
machine move them far less than wall-clock time.

Run (from the repository root)::

    .venv/bin/python benchmarks/peers_langgraph.py --quick   # well under a minute
    .venv/bin/python benchmarks/peers_langgraph.py           # more slices and calls

``run(quick)`` returns the figures as a JSON-ready dict (``benchmarks/peers.py`` reports it
beside the other ways in); run as a script, the LAST line of stdout is that JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.sqlite import SqliteStore

from fermix_memory import MemorySystem
from fermix_memory.langgraph import FermixStore

WORDS = ("coffee", "violin", "paris", "tea", "garden", "chess", "river", "piano")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _value(i: int) -> dict[str, Any]:
    return {"text": f"fact {i}: likes {WORDS[i % len(WORDS)]} and {WORDS[(i * 3 + 1) % len(WORDS)]}",
            "n": i, "user": {"access-level": ["low", "high"][i % 2]}}


@contextmanager
def _stores(workdir: Path) -> Iterator[tuple[BaseStore, BaseStore, Callable[[], None]]]:
    with ExitStack() as stack:
        memory = stack.enter_context(MemorySystem.open(workdir / "home"))
        conn = sqlite3.connect(workdir / "peer.db", check_same_thread=False, isolation_level=None)
        stack.callback(conn.close)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        peer = SqliteStore(conn)
        peer.setup()

        def settle() -> None:
            """Untimed, between operations: what each store does when its host pauses is done (ours:
            the background index merge and log checkpoint, ADR-0046; the peer: its checkpoint)."""
            memory.wait_for_background()
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

        yield FermixStore(memory, agent_id="bench"), peer, settle


def _fill(store: BaseStore, namespace: tuple[str, ...], count: int) -> None:
    for start in range(0, count, 500):
        store.batch([PutOp(namespace, f"item-{i}", _value(i)) for i in range(start, min(count, start + 500))])


def _slices(calls: dict[str, Callable[[int], None]], slices: int, per_slice: int) -> dict[str, dict[str, float]]:
    """Each store's median seconds (and CPU seconds) per call over ``slices`` turns."""
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    counter = 0
    for _ in range(slices):
        for name, call in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(per_slice):
                call(counter)
                counter += 1
            wall[name].append((time.perf_counter() - start) / per_slice)
            cpu[name].append((time.process_time() - start_cpu) / per_slice)
    return {name: {"s": statistics.median(wall[name]), "cpu_s": statistics.median(cpu[name])} for name in calls}


def _figures(stores: dict[str, BaseStore], settle: Callable[[], None], namespace: tuple[str, ...], size: int,
             slices: int, per_slice: int) -> dict[str, Any]:
    """The four operations on one owner holding ``size`` items, ours against the peer."""
    def put(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.put(namespace, f"new-{size}-{i}", _value(i))

    def get(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.get(namespace, f"item-{(i * 7919) % size}")

    def search(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.search(namespace, limit=10)

    def query(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.search(namespace, query=WORDS[i % len(WORDS)], limit=10)

    def filtered(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.search(namespace, filter={"text": _value((i * 7919) % size)["text"]}, limit=10)

    def numbered(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.search(namespace, filter={"n": {"$gte": size - 10}}, limit=10)

    def namespaces(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.list_namespaces(limit=100)

    def update(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.put(namespace, f"item-{(i * 7919) % size}", _value(i + 1))

    def delete(store: BaseStore) -> Callable[[int], None]:
        return lambda i: store.delete(namespace, f"new-{size}-{i}")  # what ``put`` added, one each

    out: dict[str, Any] = {}
    for name, make, throughput in (("put", put, True), ("get", get, True), ("search", search, False),
                                   ("search_query", query, False), ("search_filter", filtered, False),
                                   ("search_number", numbered, False),
                                   ("list_namespaces", namespaces, False),
                                   ("update", update, True), ("delete", delete, True)):
        settle()
        measured = _slices({k: make(s) for k, s in stores.items()}, slices, per_slice)
        ours, peer = measured["ours"], measured["peer"]
        # throughput ratio (ours ÷ peer, higher is better) for put and get; time ratio for searches
        ratio = (peer["s"] / ours["s"]) if throughput else (ours["s"] / peer["s"])
        cpu_ratio = (peer["cpu_s"] / ours["cpu_s"]) if throughput else (ours["cpu_s"] / peer["cpu_s"])
        out[name] = {"ours_ms": round(ours["s"] * 1e3, 3), "peer_ms": round(peer["s"] * 1e3, 3),
                     ("throughput_ratio" if throughput else "time_ratio"): round(ratio, 3),
                     ("cpu_throughput_ratio" if throughput else "cpu_time_ratio"): round(cpu_ratio, 3)}
        _say(f"  {size:>6} items  {name:<13} ours {ours['s'] * 1e3:8.3f} ms  peer {peer['s'] * 1e3:8.3f} ms"
             f"  -> {ratio:.3f}x ({'throughput' if throughput else 'time'})")
    return out


def _async_put(workdir: Path, size: int, slices: int, per_slice: int) -> dict[str, Any]:
    """``await store.aput`` of a new key on an owner holding ``size`` items, ours against
    LangGraph's ``AsyncSqliteStore`` (aiosqlite, WAL, ``synchronous = NORMAL``), in one event loop,
    taking turns slice by slice: what a put costs an async graph (ours commits a batch of puts on
    the loop's thread when nothing would make it wait, ADR-0110; the peer hops to its connection's
    thread)."""
    import asyncio

    import aiosqlite
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    namespace = ("memories", "async-owner")

    async def measure(memory: MemorySystem) -> dict[str, dict[str, float]]:
        ours = FermixStore(memory, agent_id="bench")
        _fill(ours, namespace, size)
        conn = await aiosqlite.connect(str(workdir / "async-peer.db"), isolation_level=None)
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA synchronous=NORMAL")
            peer = AsyncSqliteStore(conn)
            await peer.setup()
            for start in range(0, size, 500):
                await peer.abatch([PutOp(namespace, f"item-{i}", _value(i))
                                   for i in range(start, min(size, start + 500))])
            samples: dict[str, list[tuple[float, float]]] = {"ours": [], "peer": []}
            counter = 0
            for _ in range(slices):
                for name, store in (("ours", ours), ("peer", peer)):
                    start_s, start_cpu = time.perf_counter(), time.process_time()
                    for _ in range(per_slice):
                        await store.aput(namespace, f"new-{counter}", _value(counter))
                        counter += 1
                    samples[name].append(((time.perf_counter() - start_s) / per_slice,
                                          (time.process_time() - start_cpu) / per_slice))
                    memory.wait_for_background()  # untimed, as ``settle``
                    await conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            await conn.close()
        return {name: {"s": statistics.median(w for w, _ in got), "cpu_s": statistics.median(c for _, c in got)}
                for name, got in samples.items()}

    with MemorySystem.open(workdir / "async-home") as memory:
        measured = asyncio.run(measure(memory))
    ours, peer = measured["ours"], measured["peer"]
    _say(f"  {size:>6} items  aput          ours {ours['s'] * 1e3:8.3f} ms  peer {peer['s'] * 1e3:8.3f} ms"
         f"  -> {peer['s'] / ours['s']:.3f}x (throughput, AsyncSqliteStore)")
    return {f"aput_ours_ms_{size}": round(ours["s"] * 1e3, 3), f"aput_peer_ms_{size}": round(peer["s"] * 1e3, 3),
            f"aput_throughput_ratio_{size}": round(peer["s"] / ours["s"], 3),
            f"aput_cpu_throughput_ratio_{size}": round(peer["cpu_s"] / ours["cpu_s"], 3)}


def run(quick: bool = False) -> dict[str, Any]:
    """Every figure, ours ÷ SqliteStore in the same run (see the module's docstring)."""
    small, large = 100, 2_000
    slices, per_slice = (5, 10) if quick else (9, 30)
    with tempfile.TemporaryDirectory(prefix="fermix-peers-langgraph-") as tmp, \
            _stores(Path(tmp)) as (ours, peer, settle):
        stores = {"ours": ours, "peer": peer}
        sizes = {small: ("memories", "small-owner"), large: ("memories", "large-owner")}
        for size, namespace in sizes.items():
            for store in stores.values():
                _fill(store, namespace, size)
        by_size = {}
        for size, namespace in sizes.items():
            _say(f"owner holding {size} items ({'quick' if quick else 'full'} run)")
            by_size[size] = _figures(stores, settle, namespace, size, slices, per_slice)
        aput = _async_put(Path(tmp), large, slices, per_slice)
    result: dict[str, Any] = {"benchmark": "peers_langgraph", "quick": quick, "peer": "langgraph SqliteStore (WAL, "
                              "synchronous NORMAL)", "sizes": [small, large], "slices": slices,
                              "calls_per_slice": per_slice}
    for size, figures in by_size.items():
        for name, figure in figures.items():
            for k, v in figure.items():
                result[f"{name}_{k}_{size}"] = v
    result |= aput
    result["put_flatness"] = round(by_size[large]["put"]["throughput_ratio"]
                                   / by_size[small]["put"]["throughput_ratio"], 3)
    result["search_flatness"] = round(by_size[large]["search"]["ours_ms"] / by_size[small]["search"]["ours_ms"], 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer slices and calls (well under a minute)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
