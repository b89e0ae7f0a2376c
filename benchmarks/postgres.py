"""Many processes on one memory: PostgreSQL beside SQLite, side by side in one run (ADR-0029).

What is measured (every figure from THIS run, on THIS machine):

1. **Append throughput** with 1, 2, 4 and 8 processes (``--processes``): each process opens the
   memory itself and appends its share of ``--messages`` through
   ``MemorySystem.append_message`` (durable: ``--durability``, default ``full``), each process
   writing owners and conversations of its own. The processes start together at a barrier;
   the rate is all messages over the time from the first start to the last finish.
   * **PostgreSQL** (its default 16 chains, ADR-0031) — a throwaway server of the machine's
     PostgreSQL started for the run (``tests/postgres_server.py``) with ``fsync``,
     ``synchronous_commit`` and full-page writes **on**, over its Unix socket; each process has
     a home folder of its own (as replicas on several hosts have) and the URL of one fresh
     database per process count.
   * **PostgreSQL, one chain** — the same, on a database configured with one chain
     (``[fermix_core.storage] chains = 1``): every append of every process waits for the one
     before it, as before the log was partitioned.
   * **SQLite** — the processes share one home, so one ``memory.db`` file.
   * **PostgreSQL, 16 chains, no change feed** — a diagnostic: the same database of 16 chains
     with the processes' change feeds switched off inside the benchmark (no process reads the
     others' writes to keep its caches and prompt files current). Beside the first it shows what
     hearing the others costs when every process shares the same two cores.
   * **PostgreSQL, a database per process** — a diagnostic: the same server and processes, but
     each process appends to a database of its own, so to a chain head of its own. Beside the
     shared database it separates what the one global chain head costs from what the machine
     itself (its cores, shared by the server and the processes) allows.
   Where each saturates: the process count from which appends/s stop growing (less than 10%
   more for twice the processes).
2. **Recall p50/p95** on both stores over the same data (the 8-process append database, or the
   largest measured): ``recall(query, scope="current", source="history")`` of the same queries
   in the same conversations, each query's time the median of 3 runs, stores taking turns.
3. **Mixed workload**, 4 processes at once on each store: appends, ``review_now`` (every
   process reviews every conversation with new user messages, with the offline rules extractor:
   no provider is configured) and recalls. Afterwards: **lost writes** (acknowledged message
   ids missing from the store) and **duplicate reviews** (a conversation's batch of messages
   reviewed twice: two ``review.completed`` events whose claims start after the same message,
   or a batch starting before the previous one ended). Both must be 0. ``verify`` runs too.

4. **Round trips per append** on PostgreSQL (16 chains and one chain): the client's waits for
   the server (libpq's trace: each simple query, and each Sync or Flush the client then waits on)
   over 50 appends of one process on a pool of one connection.
5. **The bare ranking query** beside recall: the ranking of history recall's statement alone
   (candidates by ``ts_rank``, no rows, snippets or turns after), timed on the same queries.
   With each side's CPU per call: the calling thread's, and the server's processes'
   (``/proc/<pid>/schedstat`` on Linux), so that a loaded machine's waits are not read as cost
   (``recall_cpu_ratios``). ``--recall-only`` measures only this (after the appends of one
   process count).
6. **Hosts** (``--hosts 2,4,8``, ``benchmarks/postgres_hosts.py``): N processes on one database,
   N-1 writing, one listening: CPU per write of the others, appends/s, change feed on and off.

What one process's appends could reach (the bare INSERT + COMMIT loop of each store, CPU per
append of client and server, WAL sync methods): ``benchmarks/postgres_ceiling.py`` (ADR-0072).

Run (from the repository root; needs the ``[postgres]`` extra and PostgreSQL's binaries)::

    .venv/bin/python benchmarks/postgres.py            # defaults: about a minute on 2 cores
    .venv/bin/python benchmarks/postgres.py --messages 2000 --processes 1,2,4,8,16
    .venv/bin/python benchmarks/postgres.py --quick --hosts 2,4,8   # under a minute or two

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from append_and_recall import SEED, Corpus, percentile, progress

from fermix_memory import MemorySystem

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.postgres_server
from tests.postgres_server import PostgresServer, missing_server, running_server

AGENT = "agent-bench"
OWNERS_PER_PROCESS = 4
QUERY_REPEATS = 3
SATURATED = 1.10  # twice the processes, less than 10% more appends/s: flat
MIXED_PROCESSES = 4
SEPARATE = "postgres_db_per_process"
ONE_CHAIN = "postgres_one_chain"
DEAF = "postgres_no_change_feed"
BARE = "postgres_bare_ranking"
MIXED_REVIEW_EVERY = 20  # appends between two review_now calls of one process
MIXED_RECALL_EVERY = 4  # appends between two recalls


@dataclass(frozen=True)
class Target:
    """Where a process opens the memory: the SQLite home, or a home of its own and a URL (process
    ``p`` uses ``urls[p % len(urls)]``: one URL is one database every process shares)."""

    store: str  # "sqlite" | "postgres" | "postgres_one_chain" | "postgres_db_per_process"
    home: Path
    urls: tuple[str, ...] = ()
    durability: str = "full"
    chains: int | None = None  # PostgreSQL: the chains of a new log (None: the default)
    deaf: bool = False  # a diagnostic: no change feed (nothing of the other processes' writes is read)

    def url(self, process: int) -> str | None:
        return self.urls[process % len(self.urls)] if self.urls else None

    def open(self, process: int) -> MemorySystem:
        if self.deaf:  # the diagnostic only: every process a writer that never hears the others
            from fermix_memory.adapters.postgres import event_store

            event_store.ChangeFeed = _NoFeed  # type: ignore[misc,assignment]
        memory: dict[str, Any] = {"durability": self.durability}
        url = self.url(process)
        if url is None:
            return MemorySystem.open(self.home, config={"fermix_core": {"memory": memory}})
        storage: dict[str, Any] = {"url": url, **({"chains": self.chains} if self.chains else {})}
        return MemorySystem.open(self.home / f"host-{process}",
                                 config={"fermix_core": {"memory": memory, "storage": storage}})


class _NoFeed:
    listening = False

    def __init__(self, *args: Any) -> None:
        pass

    def stop(self, wake: Any) -> None:
        pass


def owner(process: int, i: int) -> str:
    return f"owner-{process}-{i % OWNERS_PER_PROCESS}"


def chat(process: int, i: int) -> tuple[str, str]:
    return ("telegram", f"chat-{process}-{i % OWNERS_PER_PROCESS}")


def texts(process: int, count: int) -> list[str]:
    corpus, rng = Corpus(random.Random(SEED)), random.Random(SEED + process)
    return [corpus.text(rng, rng.randint(4, 20)) for _ in range(count)]


def append_one(memory: MemorySystem, process: int, i: int, text: str) -> int:
    role = "user" if i % 2 == 0 else "assistant"
    return memory.append_message(agent_id=AGENT, owner_id=owner(process, i), conversation=chat(process, i),
                                 role=role, sender=owner(process, i) if role == "user" else AGENT, content=text)


# --- the processes (module level: started with "spawn") -----------------------------------------------


def appender(target: Target, process: int, count: int, barrier: Any, out: Any) -> None:
    """Append ``count`` messages after the barrier; report (start, end, acknowledged ids)."""
    lines = texts(process, count + 1)
    with target.open(process) as memory:
        warm = append_one(memory, process, count, lines[-1])  # connections and statements, untimed
        barrier.wait()
        started = time.monotonic()
        ids = [append_one(memory, process, i, lines[i]) for i in range(count)]
        out.put((process, started, time.monotonic(), [warm, *ids], {}))


def mixed(target: Target, process: int, count: int, barrier: Any, out: Any) -> None:
    """Appends with a recall every few and a ``review_now`` of every conversation every 20."""
    lines = texts(process, count)
    queries = texts(1000 + process, count // MIXED_RECALL_EVERY + 1)
    ids: list[int] = []
    stats = {"reviews": 0, "reviewed_conversations": 0, "recalls": 0, "errors": {}}
    with target.open(process) as memory:
        barrier.wait()
        started = time.monotonic()
        for i in range(count):
            try:
                ids.append(append_one(memory, process, i, lines[i]))
                if i % MIXED_RECALL_EVERY == 0:
                    memory.recall(" ".join(queries[i // MIXED_RECALL_EVERY].split()[:2]), agent_id=AGENT,
                                  owner_id=owner(process, i), conversation=chat(process, i), scope="current",
                                  source="history")
                    stats["recalls"] += 1
                if i % MIXED_REVIEW_EVERY == MIXED_REVIEW_EVERY - 1:
                    stats["reviewed_conversations"] += len(memory.review_now(agent_id=AGENT))
                    stats["reviews"] += 1
            except Exception as exc:  # counted and reported: a clear, typed error is allowed, a loss is not
                name = type(exc).__name__
                stats["errors"][name] = stats["errors"].get(name, 0) + 1
        out.put((process, started, time.monotonic(), ids, stats))


def run_processes(work: Callable[..., None], target: Target, processes: int, total: int
                  ) -> tuple[float, dict[int, list[int]], list[dict[str, Any]]]:
    """Run ``processes`` workers sharing ``total`` operations; (rate/s, each process's acknowledged
    ids, stats)."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    shares = [total // processes + (p < total % processes) for p in range(processes)]
    workers = [ctx.Process(target=work, args=(target, p, shares[p], barrier, out)) for p in range(processes)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"a {target.store} worker exited with {worker.exitcode}")
    elapsed = max(r[2] for r in results) - min(r[1] for r in results)
    return total / elapsed, {r[0]: r[3] for r in results}, [r[4] for r in results]


# --- reading a store back --------------------------------------------------------------------------------


def rows(target: Target, sql: str, process: int = 0) -> list[tuple[Any, ...]]:
    url = target.url(process)
    if url is None:
        import apsw

        conn = apsw.Connection(str(target.home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return [tuple(row) for row in conn.execute(sql)]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(row) for row in conn.execute(sql)]  # type: ignore[arg-type]  # the benchmark's own SQL


def lost_writes(target: Target, acknowledged: dict[int, list[int]]) -> int:
    """Acknowledged message ids (by process) that the process's database does not hold."""
    lost = 0
    for process, ids in acknowledged.items():
        present = {row[0] for row in rows(target, "SELECT id FROM messages", process)}
        lost += sum(1 for i in ids if i not in present)
    return lost


def duplicate_reviews(target: Target) -> tuple[int, int, int]:
    """(claims, completed reviews, batches reviewed twice): a completion's batch starts after its claim's
    ``reviewed_after_id``; per conversation, no two completions may start at the same message
    and none may start before the previous one's ``reviewed_up_to_message_id``."""
    claims: dict[str, int] = {}
    batches: dict[str, list[tuple[int, int]]] = {}
    for kind, payload in rows(target, "SELECT kind, payload FROM events WHERE kind IN ('review.claimed',"
                                      " 'review.completed') ORDER BY position"):
        event = json.loads(payload)
        if kind == "review.claimed":
            claims[event["claim_id"]] = event.get("reviewed_after_id", 0)
        else:
            key = json.dumps([event["agent_id"], event["owner_id"], event["conversation"]], sort_keys=True)
            batches.setdefault(key, []).append((claims[event["claim_id"]], event["reviewed_up_to_message_id"]))
    twice = 0
    for batch in batches.values():
        batch.sort()
        twice += sum(1 for (after, _), (_, up_to) in zip(batch[1:], batch, strict=False) if after < up_to)
    return len(claims), sum(len(b) for b in batches.values()), twice


# --- recall ----------------------------------------------------------------------------------------------


def recall_latencies(targets: dict[str, Target], processes: int, n_queries: int,
                     server: PostgresServer | None = None) -> dict[str, dict[str, float]]:
    """The same queries in the same conversations on every store, stores taking turns. Besides
    the times, the CPU of one call: the calling thread's (``client_cpu_ms``) and, on PostgreSQL,
    the server's processes' (``server_cpu_ms``), each the mean over the timed queries. The
    server's counters are read outside the thread's window on both sides (reading them costs
    this thread CPU of its own, which used to be counted into both sides' calls)."""
    corpus, rng = Corpus(random.Random(SEED)), random.Random(SEED + 7)
    asked = [(rng.randrange(processes), rng.randrange(OWNERS_PER_PROCESS), corpus.query(rng)) for _ in range(n_queries)]
    memories = {name: target.open(0) for name, target in targets.items()}
    times: dict[str, list[float]] = {name: [] for name in targets}
    cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
    server_cpu = ServerCpu(server.data) if server is not None else ServerCpu(None)
    bare = BareRanking(targets["postgres"].url(0)) if "postgres" in targets else None
    if bare is not None:
        times[BARE], cpu[BARE] = [], []
    try:
        for process, i, text in [*asked[:20], *asked]:
            server_cpu.rescan()
            if bare is not None:
                wall, used = bare.time(text, owner(process, i), chat(process, i), server_cpu)
                times[BARE].append(wall)
                cpu[BARE].append(used)
            for name, memory in memories.items():
                runs = []
                # The server's counters are read outside the thread's window (reading them is CPU
                # of this thread, which neither side's call spends).
                served = server_cpu.seconds() if name == "postgres" else 0.0
                thread = time.thread_time()
                for _ in range(QUERY_REPEATS):
                    started = time.perf_counter()
                    memory.recall(text, agent_id=AGENT, owner_id=owner(process, i), conversation=chat(process, i),
                                  scope="current", source="history")
                    runs.append((time.perf_counter() - started) * 1000)
                thread = time.thread_time() - thread
                served = server_cpu.seconds() - served if name == "postgres" else 0.0
                times[name].append(statistics.median(runs))
                cpu[name].append((thread / QUERY_REPEATS, served / QUERY_REPEATS))
    finally:
        for memory in memories.values():
            memory.close()
        if bare is not None:
            bare.close()
    return {name: {"p50_ms": round(percentile(t[20:], 50), 3), "p95_ms": round(percentile(t[20:], 95), 3),
                   "client_cpu_ms": round(1000 * statistics.mean(c for c, _ in cpu[name][20:]), 4),
                   **({"server_cpu_ms": round(1000 * statistics.mean(s for _, s in cpu[name][20:]), 4)}
                      if name in ("postgres", BARE) and server_cpu.available else {})}
            for name, t in times.items()}


class ServerCpu:
    """The CPU time of a PostgreSQL server's processes (its postmaster and every child: the
    backends serving both sides, and the server's own workers), from Linux's per-process
    scheduler counters (``/proc/<pid>/schedstat``, in nanoseconds). ``available`` is False
    where they cannot be read (another system, or the server's folder unknown)."""

    def __init__(self, data: Path | None) -> None:
        self._postmaster, self._pids = "", [""]
        try:
            self._postmaster = (data / "postmaster.pid").read_text().split()[0] if data is not None else ""
            self.available = bool(self._postmaster) and Path(f"/proc/{self._postmaster}/schedstat").exists()
        except OSError:
            self.available = False
        self._pids = [self._postmaster]

    def rescan(self) -> None:
        """Find the server's processes again (a new connection is a new process)."""
        if not self.available:
            return
        pids = [self._postmaster]
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat") as stat:
                        if stat.read().rsplit(")", 1)[1].split()[1] == self._postmaster:
                            pids.append(entry.name)
                except (OSError, IndexError):
                    continue
        self._pids = pids

    def seconds(self) -> float:
        total = 0
        for pid in self._pids if self.available else ():
            try:
                with open(f"/proc/{pid}/schedstat") as counters:
                    total += int(counters.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return total / 1e9


class BareRanking:
    """History recall's ranking alone (its ``WITH q`` and candidates by ``ts_rank``, LIMIT 10),
    on a connection of its own, each query's time the median of :data:`QUERY_REPEATS`."""

    def __init__(self, url: str | None) -> None:
        import psycopg

        self._conn = psycopg.connect(str(url), autocommit=True)

    def time(self, text: str, owner_id: str, conversation: tuple[str, str], server: ServerCpu
             ) -> tuple[float, tuple[float, float]]:
        """The median time of a run (ms), and the CPU of one run: the calling thread's and the
        server's (seconds)."""
        from fermix_memory.adapters.postgres.connection import pg_sql
        from fermix_memory.adapters.postgres.queries import any_word
        from fermix_memory.adapters.sql.scope_tokens import search_scope_token
        from fermix_memory.adapters.sql.search_terms import query_terms
        from fermix_memory.domain.scopes import HistoryFilter
        from fermix_memory.domain.values import ConversationKey

        terms = query_terms(text)
        key = ConversationKey(*conversation)
        token = search_scope_token(HistoryFilter(agent_id=AGENT, owner_id=owner_id, conversation=key))
        sql = pg_sql(f"WITH q AS MATERIALIZED (SELECT w.words, plainto_tsquery('simple', ?) && w.words AS match"
                     f" FROM (SELECT {any_word(terms)} AS words) w) SELECT s.id, ts_rank(s.search, q.words) AS score"
                     " FROM q, messages s WHERE s.agent_id = ? AND s.owner_id = ? AND s.channel = ? AND s.chat_id = ?"
                     " AND s.thread_scope = ? AND s.search @@ q.match ORDER BY score DESC, s.id DESC LIMIT 10")
        params = [token, *terms, AGENT, owner_id, key.channel, key.chat_id, key.thread_scope]
        runs = []
        served = server.seconds()  # outside the thread's window, as for recall
        thread = time.thread_time()
        for _ in range(QUERY_REPEATS):
            started = time.perf_counter()
            self._conn.execute(sql, params).fetchall()  # type: ignore[arg-type]  # the benchmark's own SQL
            runs.append((time.perf_counter() - started) * 1000)
        thread = time.thread_time() - thread
        used = (thread / QUERY_REPEATS, (server.seconds() - served) / QUERY_REPEATS)
        return statistics.median(runs), used

    def close(self) -> None:
        self._conn.close()


def round_trips(url: str, home: Path, appends: int = 50) -> float:
    """The client's waits for the server per append (see the module), on a pool of one connection."""
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.adapters.postgres.protocol_trace import round_trips as waits_in
    from fermix_memory.adapters.postgres.protocol_trace import traced
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store = PostgresEventStore(url, pool_max=1)
    trace = home / "trace.txt"
    with MemorySystem(bootstrap(home, store=store)) as memory:
        for i in range(5):
            append_one(memory, 0, i, f"warm {i}")
        with traced(store, trace):
            for i in range(appends):
                append_one(memory, 0, i, f"counted {i}")
    return waits_in(trace) / appends


# --- the run ---------------------------------------------------------------------------------------------


def saturation(rates: dict[int, float]) -> int | None:
    """The first process count from which twice the processes add less than 10%, or None."""
    counts = sorted(rates)
    for n in counts:
        if 2 * n in rates and rates[2 * n] < rates[n] * SATURATED:
            return n
    return None


def make_targets(stores: Sequence[str], base: Path, label: str, server: PostgresServer | None,
                 durability: str, databases: int = 1) -> dict[str, Target]:
    """A target per store; on PostgreSQL also one of one chain and, for several processes, one with
    ``databases`` databases (one per process)."""
    out = {}
    for store in stores:
        home = base / f"{store}-{label}"
        home.mkdir(parents=True)
        if store != "postgres" or server is None:
            out[store] = Target(store, home, (), durability)
            continue
        out[store] = Target(store, home, (server.fresh_database(),), durability)
        (base / f"{store}-{label}-one-chain").mkdir()
        out[ONE_CHAIN] = Target(ONE_CHAIN, base / f"{store}-{label}-one-chain", (server.fresh_database(),),
                                durability, chains=1)
        if databases > 1:
            (base / f"{store}-{label}-deaf").mkdir()
            out[DEAF] = Target(DEAF, base / f"{store}-{label}-deaf", (server.fresh_database(),), durability,
                               deaf=True)
        if databases > 1:
            (base / f"{store}-{label}-apart").mkdir()
            out[SEPARATE] = Target(SEPARATE, base / f"{store}-{label}-apart",
                                   tuple(server.fresh_database() for _ in range(databases)), durability)
    return out


def run(args: argparse.Namespace, server: PostgresServer | None, base: Path) -> dict[str, Any]:
    rates: dict[str, dict[int, float]] = {}
    last: dict[str, Target] = {}
    for processes in args.processes:
        targets = make_targets(args.stores, base, f"{processes}p", server, args.durability, processes)
        if args.recall_only:  # only the stores recall is timed on
            targets = {store: target for store, target in targets.items() if store in args.stores}
        for store, target in targets.items():  # stores take turns at each process count
            progress(f"append: {store}, {processes} process(es), {args.messages} messages")
            rate, ids, _ = run_processes(appender, target, processes, args.messages)
            rates.setdefault(store, {})[processes] = rate
            if lost := lost_writes(target, ids):
                raise RuntimeError(f"{store}: {lost} acknowledged appends are missing")
        last = {store: target for store, target in targets.items() if store in args.stores}
        if processes == 1 and "postgres" in rates:
            rates.setdefault(SEPARATE, {})[1] = rates["postgres"][1]  # one process: one database either way
            rates.setdefault(DEAF, {})[1] = rates["postgres"][1]  # and nobody else to hear
    trips = {}
    if server is not None and not args.recall_only:
        for chains in (16, 1):
            progress(f"round trips per append: PostgreSQL, {chains} chain(s)")
            (base / f"trips-{chains}").mkdir()
            url = server.fresh_database()
            if chains == 1:
                set_chains(url, 1)
            trips[str(chains)] = round(round_trips(url, base / f"trips-{chains}"), 2)
    progress(f"recall: {args.queries} queries on the {args.processes[-1]}-process databases")
    recall = recall_latencies(last, args.processes[-1], args.queries, server)
    hosts = {}
    if server is not None and args.hosts:
        from postgres_hosts import run_hosts

        hosts = run_hosts(server, base, args.hosts, args.host_messages)
    mixed_figures: dict[str, Any] = {}
    for store, target in make_targets(args.stores, base, "mixed", server, args.durability).items():
        if store in (ONE_CHAIN, DEAF) or args.recall_only:
            continue
        progress(f"mixed: {store}, {MIXED_PROCESSES} processes, {args.mixed_messages} appends")
        rate, ids, stats = run_processes(mixed, target, MIXED_PROCESSES, args.mixed_messages)
        claimed, completed, twice = duplicate_reviews(target)
        with target.open(0) as memory:
            report = memory.verify()
        errors: dict[str, int] = {}
        for s in stats:
            for name, count in s["errors"].items():
                errors[name] = errors.get(name, 0) + count
        mixed_figures[store] = {
            "appends_per_s": round(rate, 1), "acknowledged": sum(len(i) for i in ids.values()),
            "lost_writes": lost_writes(target, ids),
            "review_claims": claimed, "reviews_completed": completed, "duplicate_reviews": twice,
            "reviewed_conversations_returned": sum(s["reviewed_conversations"] for s in stats),
            "review_now_calls": sum(s["reviews"] for s in stats), "recalls": sum(s["recalls"] for s in stats),
            "errors": errors, "verify_ok": report.ok, "events": report.events}
    return {"rates": rates, "recall": recall, "mixed": mixed_figures, "round_trips": trips, "hosts": hosts}


def set_chains(url: str, chains: int) -> None:
    """Open the store of ``url`` once, so its empty log takes ``chains`` chains."""
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore

    PostgresEventStore(url, chains=chains, feed=False).close()


def print_human(args: argparse.Namespace, figures: dict[str, Any]) -> dict[str, Any]:
    rates = figures["rates"]
    out: dict[str, Any] = {"benchmark": "postgres", "messages": args.messages, "processes": args.processes,
                           "durability": args.durability, "postgres_fsync": "postgres" in args.stores,
                           "mixed_messages": args.mixed_messages, "queries": args.queries}
    print(f"appends/s, {args.messages} messages per row, durability {args.durability}"
          f"{', PostgreSQL with fsync and synchronous_commit on' if 'postgres' in args.stores else ''}")
    columns = {"sqlite": "sqlite", "postgres": "pg, 16 chains", ONE_CHAIN: "pg, one chain",
               DEAF: "pg, 16 chains, no feed", SEPARATE: "pg, db per process"}
    print(f"{'processes':>9} | " + " | ".join(f"{columns[store]:>10}" for store in rates)
          + (" | postgres/sqlite" if len(args.stores) == 2 else ""))
    for n in args.processes:
        cells = " | ".join(f"{rates[store][n]:>{max(10, len(columns[store]))},.0f}" for store in rates)
        ratio = f" | {rates['postgres'][n] / rates['sqlite'][n]:>15.2f}" if len(args.stores) == 2 else ""
        print(f"{n:>9} | {cells}{ratio}")
    stores = list(rates)
    for store in stores:
        out[f"{store}_appends_per_s"] = {str(n): round(r, 1) for n, r in rates[store].items()}
        base = rates[store][args.processes[0]]
        out[f"{store}_scaling"] = {str(n): round(r / base, 2) for n, r in rates[store].items()}
        out[f"{store}_flat_from_processes"] = flat = saturation(rates[store])
        print(f"{store}: appends/s stop growing from {flat} processes on" if flat else
              f"{store}: appends/s still grow at {args.processes[-1]} processes")
    if SEPARATE in rates:
        out["postgres_shared_to_db_per_process"] = shared = {
            str(n): round(rates["postgres"][n] / rates[SEPARATE][n], 2) for n in args.processes}
        print("one database of 16 chains / a database per process: "
              + "  ".join(f"{n}: {r:.2f}" for n, r in shared.items()))
    if DEAF in rates:
        out["postgres_feed_share"] = feed = {
            str(n): round(rates["postgres"][n] / rates[DEAF][n], 2) for n in args.processes}
        print("16 chains / the same without the change feed (a diagnostic: what hearing the others costs): "
              + "  ".join(f"{n}: {r:.2f}" for n, r in feed.items()))
    if ONE_CHAIN in rates:
        out["postgres_chains_to_one_chain"] = gain = {
            str(n): round(rates["postgres"][n] / rates[ONE_CHAIN][n], 2) for n in args.processes}
        print("16 chains / one chain, appends/s in one database: "
              + "  ".join(f"{n}: {r:.2f}" for n, r in gain.items()))
    if len(args.stores) == 2:
        out["postgres_to_sqlite"] = {str(n): round(rates["postgres"][n] / rates["sqlite"][n], 2)
                                     for n in args.processes}
    if figures["round_trips"]:
        out["postgres_round_trips_per_append"] = figures["round_trips"]
        print("round trips per append (waits for the server): "
              + "  ".join(f"{c} chain(s): {t:.2f}" for c, t in figures["round_trips"].items()))
    if figures["hosts"]:
        from postgres_hosts import print_hosts

        print_hosts(figures["hosts"])
        out["hosts"] = figures["hosts"]
    if BARE in figures["recall"] and "postgres" in figures["recall"]:
        recall = figures["recall"]
        out["recall_p50_ratios"] = {"postgres_to_sqlite": round(recall["postgres"]["p50_ms"] / recall["sqlite"][
            "p50_ms"], 2) if "sqlite" in recall else None, "postgres_to_bare_ranking": round(
            recall["postgres"]["p50_ms"] / recall[BARE]["p50_ms"], 2)}
        out["recall_cpu_ratios"] = cpu_ratios = {"postgres_to_bare_ranking_client": round(
            recall["postgres"]["client_cpu_ms"] / recall[BARE]["client_cpu_ms"], 2)}
        if "server_cpu_ms" in recall[BARE]:
            ours, theirs = (recall[side]["client_cpu_ms"] + recall[side]["server_cpu_ms"]
                            for side in ("postgres", BARE))
            cpu_ratios["postgres_to_bare_ranking_server"] = round(
                recall["postgres"]["server_cpu_ms"] / recall[BARE]["server_cpu_ms"], 2)
            cpu_ratios["postgres_to_bare_ranking_total"] = round(ours / theirs, 2)
        print("recall CPU, PostgreSQL / the bare ranking (client thread, server, both): "
              + "  ".join(f"{k.rsplit('_', 1)[1]} {v:.2f}" for k, v in cpu_ratios.items()))
    for store, lat in figures["recall"].items():
        print(f"recall {store:<8} p50 {lat['p50_ms']:.3f} ms   p95 {lat['p95_ms']:.3f} ms"
              f"   CPU per call: client {lat['client_cpu_ms']:.3f} ms"
              + (f", server {lat['server_cpu_ms']:.3f} ms" if "server_cpu_ms" in lat else ""))
        out[f"{store}_recall"] = lat
    for store, mixed_figures in figures["mixed"].items():
        print(f"mixed {store:<8} ({MIXED_PROCESSES} processes): {mixed_figures['appends_per_s']:,.0f} appends/s,"
              f" {mixed_figures['reviews_completed']} reviews, {mixed_figures['recalls']} recalls,"
              f" lost writes {mixed_figures['lost_writes']}, duplicate reviews {mixed_figures['duplicate_reviews']},"
              f" errors {mixed_figures['errors'] or 0}, verify {'ok' if mixed_figures['verify_ok'] else 'FAILED'}")
        out[f"{store}_mixed"] = mixed_figures
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Appends from many processes, recall and a mixed workload: "
                                                 "PostgreSQL beside SQLite.")
    parser.add_argument("--messages", type=int, default=2000, help="messages appended at each process count")
    parser.add_argument("--processes", default="1,2,4,8", help="process counts, comma-separated")
    parser.add_argument("--mixed-messages", type=int, default=1200, help="appends of the 4-process mixed workload")
    parser.add_argument("--queries", type=int, default=200, help="recall queries timed on each store")
    parser.add_argument("--stores", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--durability", choices=("normal", "full"), default="full",
                        help="the memory's durability (SQLite: full fsyncs each commit, as PostgreSQL does here)")
    parser.add_argument("--hosts", default="", help="host counts on one database, e.g. 2,4,8 (postgres_hosts.py)")
    parser.add_argument("--host-messages", type=int, default=600, help="appends of each --hosts run")
    parser.add_argument("--quick", action="store_true", help="small counts: 300 messages, 1,2 processes,"
                        " 60 queries, 120 mixed appends, 300 appends per --hosts run")
    parser.add_argument("--recall-only", action="store_true", help="appends at the last process count and"
                        " recall only (no round trips, hosts or mixed workload): the recall figures in a minute")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the homes here (default: a temp folder)")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.processes, args.queries = 300, "1,2", 60
        args.mixed_messages, args.host_messages = 120, 300
    args.hosts = sorted(int(h) for h in args.hosts.split(",") if h.strip())
    args.processes = sorted(int(p) for p in args.processes.split(","))
    if args.recall_only:
        args.processes, args.hosts = args.processes[-1:], []
    args.stores = [s.strip() for s in args.stores.split(",")]
    if not set(args.stores) <= {"sqlite", "postgres"}:
        parser.error("--stores takes sqlite, postgres or both")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if "postgres" in args.stores and (missing := missing_server()):
        print(f"postgres.py: {missing}", file=sys.stderr)
        return 2
    base = args.workdir or Path(tempfile.mkdtemp(prefix="fermix-bench-pg-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        if "postgres" in args.stores:
            with running_server(durable=True) as server:
                figures = run(args, server, base)
        else:
            figures = run(args, None, base)
    finally:
        if args.workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(print_human(args, figures), sort_keys=True))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
