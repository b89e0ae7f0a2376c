"""Search by meaning inside SQLite: our scan of stored vectors against sqlite-vec, side by side
(ADR-0043: "plain BLOBs and a scan where that is faster at our sizes: measure both").

For each scope size (the vectors of the conversation searched; another owner's conversation of
the same size sits beside it, so scoping has work to do) one real home is built through
``MemorySystem.import_history`` and its vectors stored by the product's own upkeep, with a fast
deterministic stand-in for the model (384 dimensions, unit length, as all-MiniLM-L6-v2's): the
figures are about searching vectors, not about making them. Then, query by query, taking turns:

* **ours**: ``MemorySystem.recall(query, mode="semantic", source="history")`` in the
  conversation, limit 10, by one open memory: the scope's ids and vectors read from
  ``message_vectors`` joined to ``messages`` at its first search and kept (a later search reads
  only what is newer, unless the schema's change count moved), a dot product, the ten best rows
  read whole and checked as keyword recall checks them; and, apart, the first search of a memory
  just opened (``ours_first_search_p50_ms``), which reads every vector of the scope;
* **sqlite-vec**: the same vectors in a ``vec0`` table with the conversation as its partition key
  (``distance_metric=cosine``), ``MATCH ... AND k = 10 AND conversation = ?``, then the same ten
  rows read from the home's ``messages`` (attached, read-only) on the same connection.

Both return the same ten messages (checked on every query). sqlite-vec is not a dependency of
the product: install it to run this script (``pip install sqlite-vec==0.1.9``); without it the
script says so and exits 2. Progress goes to stderr; the LAST line of stdout is one JSON object.

Run (from the repository root)::

    .venv/bin/python benchmarks/vector_search.py --sizes 1000,10000,50000 --queries 60
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from fermix_memory import MemorySystem

AGENT = "ada"
COLD = 5
DIMENSION = 384
WORDS = ["berlin", "tea", "bouldering", "report", "friday", "river", "pasta", "flat", "guitar", "sister", "train",
         "winter", "garden", "coffee", "meeting", "novel", "piano", "marathon", "dentist", "budget", "holiday",
         "kitchen", "laptop"]


class RandomEmbedder:
    """A stand-in for the model: each text's vector is drawn from a generator seeded by the text."""

    model, version, dimension = "bench-random", "1", DIMENSION

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            vector = np.random.default_rng(seed).standard_normal(DIMENSION).astype("<f4")
            out.append((vector / np.linalg.norm(vector)).astype("<f4").tobytes())
        return out


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def lines_for(size: int) -> list[str]:
    """``size`` messages in alice's conversation and ``size`` in bob's, interleaved."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    lines = []
    for n in range(2 * size):
        owner = "alice" if n % 2 == 0 else "bob"
        words = " ".join(WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(8))
        lines.append(json.dumps({
            "agent_id": AGENT, "owner_id": owner, "channel": "telegram", "chat_id": owner, "role": "user",
            "sender": owner, "content": f"message {n}: {words}", "trust": "operator",
            "created_at": (start + timedelta(seconds=n)).isoformat()}))
    return lines


def build(home: Path, size: int) -> float:
    """The home with its vectors stored; seconds it took to store them."""
    with MemorySystem.open(home, embedder=RandomEmbedder(),
                           config={"fermix_core": {"memory": {"recall_by_meaning": False}}}) as memory:
        lines = lines_for(size)
        for i in range(0, len(lines), 5000):
            memory.import_history(lines[i:i + 5000])
        started = time.perf_counter()
        memory.fill_vectors()
        return time.perf_counter() - started


def sqlite_vec_table(home: Path, folder: Path) -> tuple[apsw.Connection, float, int]:
    """A connection with the vec0 table filled from the home's vectors; seconds, bytes."""
    import sqlite_vec

    conn = apsw.Connection(str(folder / "vec.db"),
                           flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | apsw.SQLITE_OPEN_URI)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(f"ATTACH DATABASE 'file:{home / 'memory.db'}?mode=ro' AS home")
    started = time.perf_counter()
    conn.execute(f"CREATE VIRTUAL TABLE vec USING vec0(message_id INTEGER PRIMARY KEY,"
                 f" conversation TEXT PARTITION KEY, embedding float[{DIMENSION}] distance_metric=cosine)")
    with conn:
        conn.execute("INSERT INTO vec(message_id, conversation, embedding) SELECT m.id, m.chat_id, v.vector"
                     " FROM home.message_vectors v JOIN home.messages m ON m.id = v.message_id")
    seconds = time.perf_counter() - started
    size = conn.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").fetchall()[0][0]
    return conn, seconds, int(size)


def search_vec(conn: apsw.Connection, vector: bytes, conversation: str) -> list[int]:
    best = conn.execute("SELECT message_id FROM vec WHERE embedding MATCH ? AND k = 10 AND conversation = ?"
                        " ORDER BY distance", (vector, conversation)).fetchall()
    ids = [int(r[0]) for r in best]
    marks = ", ".join("?" * len(ids))
    rows = {int(r[0]): r for r in conn.execute(
        f"SELECT id, agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind, content, metadata_json,"
        f" created_at, trust FROM home.messages WHERE id IN ({marks})", ids).fetchall()}
    return [i for i in ids if i in rows]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def measure(size: int, queries: int) -> dict[str, Any]:
    embedder = RandomEmbedder()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        home = folder / "home"
        progress(f"size {size:,}: building the home ({2 * size:,} messages)")
        ours_store_s = build(home, size)
        conn, vec_store_s, vec_bytes = sqlite_vec_table(home, folder)
        ours_ms: list[float] = []
        vec_ms: list[float] = []
        cold_ms: list[float] = []
        for q in range(COLD):  # the first search of a memory just opened: every vector read from the file
            with MemorySystem.open(home, embedder=embedder, readonly=True) as memory:
                started = time.perf_counter()
                memory.recall(f"cold {q}", agent_id=AGENT, owner_id="alice", conversation="telegram:alice",
                              source="history", mode="semantic", limit=10)
                cold_ms.append((time.perf_counter() - started) * 1000)
        with MemorySystem.open(home, embedder=embedder, readonly=True) as memory:
            for q in range(queries):
                query = f"question {q}: {WORDS[q % len(WORDS)]} {WORDS[(q * 5) % len(WORDS)]}"
                vector = embedder.embed([query])[0]
                for turn in ((0, 1) if q % 2 == 0 else (1, 0)):
                    started = time.perf_counter()
                    if turn == 0:
                        hits = memory.recall(query, agent_id=AGENT, owner_id="alice",
                                             conversation="telegram:alice", source="history", mode="semantic",
                                             limit=10)
                        ours_ms.append((time.perf_counter() - started) * 1000)
                        ours_ids = [h.message.id for h in hits.messages]
                    else:
                        vec_ids = search_vec(conn, vector, "alice")
                        vec_ms.append((time.perf_counter() - started) * 1000)
                if ours_ids != vec_ids:
                    raise SystemExit(f"size {size}, query {q}: the two searches disagree: {ours_ids} {vec_ids}")
        conn.close()
        ours_bytes = (home / "memory.db").stat().st_size
    figures = {
        "scope_vectors": size,
        "ours_p50_ms": round(statistics.median(ours_ms), 3), "ours_p95_ms": round(percentile(ours_ms, 95), 3),
        "ours_first_search_p50_ms": round(statistics.median(cold_ms), 3),
        "sqlite_vec_p50_ms": round(statistics.median(vec_ms), 3),
        "sqlite_vec_p95_ms": round(percentile(vec_ms, 95), 3),
        "ours_store_vectors_s": round(ours_store_s, 2), "sqlite_vec_fill_s": round(vec_store_s, 2),
        "sqlite_vec_table_bytes": vec_bytes, "home_bytes": ours_bytes,
    }
    figures["p95_ratio_sqlite_vec_to_ours"] = round(figures["sqlite_vec_p95_ms"] / figures["ours_p95_ms"], 2)
    progress(json.dumps(figures))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000", help="vectors in the searched conversation")
    parser.add_argument("--queries", type=int, default=60, help="queries per size (each asked of both)")
    args = parser.parse_args(argv)
    try:
        import sqlite_vec  # noqa: F401
    except ImportError:
        print("sqlite-vec is not installed: pip install sqlite-vec==0.1.9", file=sys.stderr)
        return 2
    results = [measure(int(size), args.queries) for size in args.sizes.split(",")]
    print(json.dumps({"sizes": results}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
