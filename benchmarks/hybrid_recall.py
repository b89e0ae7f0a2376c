"""Hybrid recall against keyword recall, side by side, with the real model (ADR-0061).

One home is built through the public API (``--messages`` history messages in one conversation,
``--rows`` memory rows) and every text gets its vector from the ``[semantic]`` extra's model
(all-MiniLM-L6-v2, int8, ONNX Runtime). Then, query by query, by one open memory, each asked
``source="all"``, limit 10:

* **keyword**: ``recall(query, mode="keyword")``;
* **hybrid, distinct queries**: ``recall(query, mode="hybrid")`` with a query never asked
  before (its embedding must be computed: a cold cache);
* **hybrid, repeated queries**: the same query asked again right after (a warm cache: a memory
  that keeps its queries' vectors answers it without the model);
* **hybrid, distinct queries, one after the other**: a new query whose vector is computed before
  the words are searched, as recall did before ADR-0071 (now the model runs on a thread of its
  own while the words are searched). The query is the distinct one with a space added: the same
  tokens and the same words, another text for the cache.

* **hybrid, distinct queries, a thread per query**: the same new query (two spaces added) as
  recall did before its pass went to a thread kept waiting (ADR-0086): a thread started for it,
  which tokenises it and then runs the pass, taking Python's lock in turn with the search by words;
* **hybrid, distinct queries, the query on one thread**: the same new query to a memory whose
  model embeds queries by the stored texts' one-thread session (``query_threads=1``), as shipped
  before ADR-0096 (the shipped one, on two cores or more, embeds them in a session of their own,
  two threads sleeping between passes);
* **rows by meaning**: ``source="memories"`` by meaning alone, a query whose vector is kept, with
  the rows' vectors kept between searches (as shipped) and read every time (as before).

These take turns on every query, so a noisy machine weighs on each alike; the ratios are
of p50s measured in the same run, of wall-clock time and of the CPU time the process spent (all
its threads: what a loaded machine inflates least). Then one query embedded alone (batch 1) by a
model loaded with 1, 2 (spinning or asleep between passes) and the runtime's default intra-op
threads, taking turns: p50 / p95 wall-clock ms and the p50 CPU ms it cost (all threads; what it
takes from a host's other work). Last, a query's dot
product with 2,000 and 20,000 stored vectors, as one BLAS call and in the row blocks search uses
(ADR-0086). What each runtime option does to the model's pass: ``benchmarks/model_pass.py``.

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.

Run (from the repository root; needs the ``[semantic]`` extra)::

    .venv/bin/python benchmarks/hybrid_recall.py --quick
    .venv/bin/python benchmarks/hybrid_recall.py --messages 5000 --queries 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # the model given here, none chosen

from fermix_memory import MemorySystem
from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder
from fermix_memory.adapters.sql.vector_cache import ScopeVectorCache
from fermix_memory.application.semantic import SemanticSearch

AGENT, OWNER, CONV = "ada", "alice", "telegram:alice"
PEOPLE = ["my sister", "the landlord", "my manager", "an old friend", "the dentist", "my coach", "the neighbour"]
THINGS = ["the flat in Berlin", "green tea", "bouldering on Fridays", "the quarterly report", "a pasta recipe",
          "the river walk", "a used guitar", "the winter holiday", "the garden plot", "a marathon plan",
          "the kitchen repairs", "a new laptop", "piano lessons", "the train to Munich", "the book club novel"]
VERBS = ["talked about", "asked me about", "complained about", "recommended", "forgot about", "planned",
         "argued over", "paid for"]
# Memories whose model runs a query's pass otherwise than the shipped one (on two cores or more, a
# session of its own, two threads that sleep between passes: ADR-0096), asked the same new queries
# in turn with it: by the stored texts' one-thread session, as shipped before. (Two spinning threads
# are measured alone, in ``embed_by_threads``: here they would spin on into whichever turn came next.)
QUERY_THREADS: dict[str, dict[str, Any]] = {"query_on_1_thread": {"query_threads": 1}}
QUESTION = ["what did {p} say about {t}?", "when did I last mention {t}?", "who {v} {t}?",
            "do I still care about {t} and {t2}?", "anything about {t} from {p}?"]


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def sentence(n: int) -> str:
    p, t, v = PEOPLE[n % len(PEOPLE)], THINGS[(n * 7) % len(THINGS)], VERBS[(n * 3) % len(VERBS)]
    return f"Yesterday {p} {v} {t}, and we spent a while on it (note {n})."


def question(n: int) -> str:
    """The ``n``-th query: every one distinct (its number is part of it)."""
    shape = QUESTION[n % len(QUESTION)]
    text = shape.format(p=PEOPLE[(n // 5) % len(PEOPLE)], t=THINGS[(n * 11) % len(THINGS)],
                        t2=THINGS[(n * 13 + 1) % len(THINGS)], v=VERBS[(n * 5) % len(VERBS)])
    return f"{text} ({n})"


def build(home: Path, messages: int, rows: int) -> float:
    """The home with every vector stored (by the model on the runtime's default threads: filling is
    not what is measured); seconds the vectors took."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    lines = [json.dumps({"agent_id": AGENT, "owner_id": OWNER, "channel": "telegram", "chat_id": OWNER,
                         "role": "user" if n % 2 == 0 else "assistant", "sender": OWNER if n % 2 == 0 else AGENT,
                         "content": sentence(n), "trust": "operator",
                         "created_at": (start + timedelta(seconds=n)).isoformat()}) for n in range(messages)]
    with MemorySystem.open(home, embedder=MiniLmOnnxEmbedder(threads=0)) as memory:
        for i in range(0, len(lines), 5000):
            memory.import_history(lines[i:i + 5000])
        for i in range(0, rows, 50):
            facts = [{"op": "add", "category": "preference", "key": f"fact_{n}", "value": sentence(n * 17)}
                     for n in range(i, min(rows, i + 50))]
            memory.write_memory(facts, agent_id=AGENT, owner_id=OWNER, trust="operator")
        started = time.perf_counter()
        memory.fill_vectors()
        if memory.vectors_waiting():
            raise SystemExit(f"{memory.vectors_waiting()} texts still wait for their vector")
        return time.perf_counter() - started


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


@contextmanager
def _query_vector_as(soon: Callable[[SemanticSearch, str], Callable[[], bytes | None]]) -> Iterator[None]:
    """Recall with ``soon`` in place of how the shipped code starts a new query's vector."""
    shipped = SemanticSearch.embed_query_soon
    SemanticSearch.embed_query_soon = soon  # type: ignore[method-assign]
    try:
        yield
    finally:
        SemanticSearch.embed_query_soon = shipped  # type: ignore[method-assign]


def one_after_the_other() -> AbstractContextManager[None]:
    """Recall as before ADR-0071: a new query's vector computed before the words are searched."""

    def sequential(self: SemanticSearch, query: str) -> Callable[[], bytes | None]:
        vector = self.embed_query(query)
        return lambda: vector

    return _query_vector_as(sequential)


def thread_per_query() -> AbstractContextManager[None]:
    """Recall as before the query's pass went to a waiting thread (ADR-0086): a thread started per
    new query, which tokenises the query and then runs the pass, taking Python's lock in turn with
    the caller's search by words."""

    def former(self: SemanticSearch, query: str) -> Callable[[], bytes | None]:
        if not query.strip():
            return lambda: None
        kept = self.queries.get(self.label, query)
        if kept is not None:
            return lambda: kept
        got: list[bytes | None] = []
        failed: list[BaseException] = []

        def run() -> None:
            try:
                got.append(self.embed_query(query))
            except BaseException as exc:
                failed.append(exc)
        thread = threading.Thread(target=run, name="fermix-query-vector")
        thread.start()

        def result() -> bytes | None:
            thread.join()
            if failed:
                raise failed[0]
            return got[0]
        return result

    return _query_vector_as(former)


@contextmanager
def nothing_kept() -> Iterator[None]:
    """Searches by meaning that read their scope's vectors every time, as the rows' always were
    before ADR-0086 kept them."""
    get = ScopeVectorCache.get
    ScopeVectorCache.get = lambda self, key, changes: None  # type: ignore[method-assign,assignment,misc]
    try:
        yield
    finally:
        ScopeVectorCache.get = get  # type: ignore[method-assign]


def loaded(model: MiniLmOnnxEmbedder) -> MiniLmOnnxEmbedder:
    """``model`` with its queries' session built (the first query would start it beside itself)."""
    model.load_query_session()
    return model


def recalls(home: Path, queries: int) -> dict[str, Any]:
    """Keyword, hybrid-cold (overlapped and one after the other) and hybrid-warm recall of the same
    queries, taking turns: wall-clock and CPU (this process's, every thread) ms of each."""
    wall: dict[str, list[float]] = {"keyword": [], "hybrid_distinct": [], "hybrid_repeated": [],
                                    "hybrid_distinct_sequential": [], "hybrid_distinct_thread_per_query": []}
    cpu: dict[str, list[float]] = {name: [] for name in wall}
    wall.update({name: [] for name in (*(f"hybrid_distinct_{name}" for name in QUERY_THREADS),
                                       "rows_by_meaning_kept", "rows_by_meaning_read")})
    cpu.update({name: [] for name in wall if name not in cpu})
    with ExitStack() as stack:
        memory = stack.enter_context(MemorySystem.open(home, embedder=loaded(MiniLmOnnxEmbedder()), readonly=True))
        others = {name: stack.enter_context(MemorySystem.open(home, embedder=loaded(MiniLmOnnxEmbedder(**options)),
                                                              readonly=True))
                  for name, options in QUERY_THREADS.items()}

        def ask(text: str, mode: str, name: str | None = None, by: MemorySystem | None = None,
                source: str = "all") -> Any:
            cpu_start, started = time.process_time(), time.perf_counter()
            found = (by or memory).recall(text, agent_id=AGENT, owner_id=OWNER, conversation=CONV, source=source,
                                          mode=mode, limit=10)  # type: ignore[arg-type]
            if name is not None:
                wall[name].append((time.perf_counter() - started) * 1000)
                cpu[name].append((time.process_time() - cpu_start) * 1000)
            return found

        for n in range(5):  # the model loaded, the scope's vectors read, the caches warm
            near = ask(f"warm-up {n}: {question(n)}", "semantic").ranked
            if not near or any(hit.similarity is None for hit in near):
                raise SystemExit("a search by meaning found nothing: the vectors are missing")
            ask(f"warm-up {n}", "hybrid")
            ask(f"warm-up {n}", "keyword")
            for other in others.values():
                ask(f"warm-up {n}: {question(n)}", "hybrid", by=other)
        for n in range(queries):
            text = question(n)
            if n % 2:
                ask(text, "keyword", "keyword")
            turns = ["overlapped", "sequential", "thread_per_query", *others]
            for turn in turns[n % len(turns):] + turns[:n % len(turns)]:
                if turn in others:  # the same new query, to a memory whose model runs otherwise
                    ask(text, "hybrid", f"hybrid_distinct_{turn}", by=others[turn])
                elif turn == "overlapped":
                    ask(text, "hybrid", "hybrid_distinct")
                    ask(text, "hybrid", "hybrid_repeated")
                elif turn == "thread_per_query":  # the query with two spaces: another text, the same words
                    with thread_per_query():
                        ask(text + "  ", "hybrid", "hybrid_distinct_thread_per_query")
                else:
                    with one_after_the_other():
                        ask(text + " ", "hybrid", "hybrid_distinct_sequential")
            if not n % 2:
                ask(text, "keyword", "keyword")
            for kept in (True, False) if n % 2 else (False, True):  # the rows by meaning alone, vector kept
                with nullcontext() if kept else nothing_kept():
                    ask(text, "semantic", f"rows_by_meaning_{'kept' if kept else 'read'}", source="memories")
    figures: dict[str, Any] = {}
    for name in wall:
        figures[f"{name}_p50_ms"] = round(statistics.median(wall[name]), 3)
        figures[f"{name}_p95_ms"] = round(percentile(wall[name], 95), 3)
        figures[f"{name}_cpu_p50_ms"] = round(statistics.median(cpu[name]), 3)
    figures["ratio_rows_by_meaning_kept_to_read_cpu_p50"] = round(
        figures["rows_by_meaning_kept_cpu_p50_ms"] / figures["rows_by_meaning_read_cpu_p50_ms"], 2)
    for name in ("hybrid_distinct", "hybrid_repeated", "hybrid_distinct_sequential",
                 "hybrid_distinct_thread_per_query", *(f"hybrid_distinct_{name}" for name in QUERY_THREADS)):
        figures[f"ratio_{name}_to_keyword_p50"] = round(figures[f"{name}_p50_ms"] / figures["keyword_p50_ms"], 2)
        figures[f"ratio_{name}_to_keyword_cpu_p50"] = round(
            figures[f"{name}_cpu_p50_ms"] / figures["keyword_cpu_p50_ms"], 2)
    for name in QUERY_THREADS:  # the shipped way against each other, same queries, same run
        for kind in ("", "cpu_"):
            figures[f"ratio_hybrid_distinct_to_{name}_{kind}p50"] = round(
                figures[f"hybrid_distinct_{kind}p50_ms"] / figures[f"hybrid_distinct_{name}_{kind}p50_ms"], 2)
    return figures


def embed_by_threads(queries: int, rounds: int) -> dict[str, Any]:
    """One query embedded alone by models on 1, 2 (spinning or not) and the default threads, and by
    the shipped queries' session (``embed_query``), taking turns."""
    models = {"1": MiniLmOnnxEmbedder(threads=1), "2": MiniLmOnnxEmbedder(threads=2),
              "2_no_spin": MiniLmOnnxEmbedder(threads=2, spinning=False), "default": MiniLmOnnxEmbedder(threads=0),
              "shipped_query": loaded(MiniLmOnnxEmbedder())}
    wall: dict[str, list[float]] = {name: [] for name in models}
    cpu: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():
        model.embed(["warm up the session"])
        model.embed_query("warm up the session")
    for r in range(rounds):
        order = list(models)[r % len(models):] + list(models)[:r % len(models)]
        for name in order:
            for n in range(queries):
                text = question(10_000 + r * queries + n)
                cpu_start, started = time.process_time(), time.perf_counter()
                if name == "shipped_query":
                    models[name].embed_query(text)
                else:
                    models[name].embed([text])
                wall[name].append((time.perf_counter() - started) * 1000)
                cpu[name].append((time.process_time() - cpu_start) * 1000)
    return {name: {"p50_ms": round(statistics.median(wall[name]), 3), "p95_ms": round(percentile(wall[name], 95), 3),
                   "cpu_p50_ms": round(statistics.median(cpu[name]), 3)} for name in models}


def scope_products(rounds: int) -> dict[str, Any]:
    """The dot product of a query with a scope's vectors, as one BLAS call (``matrix @ query``,
    which numpy's BLAS library splits across threads) and as search does it (products of at most
    ``_ROWS_AT_ONCE`` rows, one thread): p50 / p95 wall and p50 CPU ms, taking turns (ADR-0086)."""
    import numpy as np

    from fermix_memory.adapters.sql import vectors

    rng = np.random.default_rng(7)
    figures: dict[str, Any] = {}
    for rows in (2000, 20000):
        matrix = rng.standard_normal((rows, 384)).astype("<f4")
        query = rng.standard_normal(384).astype("<f4")
        ways: dict[str, Callable[[], object]] = {
            "one_blas_call": lambda m=matrix, q=query: m @ q,
            "by_rows": lambda m=matrix, q=query: vectors._similarities(np, m, q)}
        wall: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, way in ways.items():
                cpu_start, started = time.process_time(), time.perf_counter()
                way()
                wall[name].append((time.perf_counter() - started) * 1000)
                cpu[name].append((time.process_time() - cpu_start) * 1000)
        figures[str(rows)] = {name: {"p50_ms": round(statistics.median(wall[name]), 3),
                                     "p95_ms": round(percentile(wall[name], 95), 3),
                                     "cpu_p50_ms": round(statistics.median(cpu[name]), 3)} for name in ways}
    return figures


def table(title: str, figures: dict[str, dict[str, Any]]) -> str:
    """``figures`` (a row per name, a column per figure) as aligned text, for stderr."""
    columns = list(next(iter(figures.values())))
    lines = [title, f"{'':28}" + "".join(f"{c:>14}" for c in columns)]
    lines += [f"{name:28}" + "".join(f"{row[c]!s:>14}" for c in columns) for name, row in figures.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="history messages in the conversation")
    parser.add_argument("--rows", type=int, default=200, help="memory rows of the owner")
    parser.add_argument("--queries", type=int, default=120, help="distinct queries, each asked four ways")
    parser.add_argument("--embeds", type=int, default=40, help="single-query embeds per thread count per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the thread comparison")
    parser.add_argument("--quick", action="store_true", help="a small home and fewer queries (under a minute)")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.rows, args.queries, args.embeds, args.rounds = 240, 40, 40, 20, 2
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        progress(f"building the home: {args.messages:,} messages, {args.rows} rows, vectors by the model")
        fill_s = build(home, args.messages, args.rows)
        progress(f"vectors stored in {fill_s:.1f} s; recalling {args.queries} queries four ways")
        recall_figures = recalls(home, args.queries)
        progress(json.dumps(recall_figures))
    progress("one query embedded alone, by intra-op threads")
    threads = embed_by_threads(args.embeds, args.rounds)
    progress(table("one query embedded alone, by intra-op threads", threads))
    products = scope_products(args.embeds * args.rounds * 2)
    for rows, figures in products.items():
        progress(table(f"a query's dot product with {rows} stored vectors", figures))
    print(json.dumps({"messages": args.messages, "rows": args.rows, "queries": args.queries,
                      "fill_vectors_s": round(fill_s, 2), "recall": recall_figures,
                      "embed_batch1_by_threads": threads, "scope_product_by_vectors": products}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
