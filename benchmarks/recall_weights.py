"""Choose the weights of the days a question names and of the second hop, on our own evaluation
set, with a held-out half (ADR-0075, ADR-0077).

History recall fuses, by reciprocal rank, the list its words (and meaning) found with the turns
of the days the question names (``application/recall.py``: ``DATE_WEIGHT``) and with the turns
naming what its best turns speak of (``HOP_WEIGHT``). This script builds ONE home holding every
conversation of ``benchmarks/recall_eval/`` as ``recall_quality.py`` does, then asks every
generated question by words (``mode="keyword"``, ``source="history"``, limit 10, ``as_of`` when
the question has one) once per pair of weights of :data:`DATE_WEIGHTS` by :data:`HOP_WEIGHTS`
(the product's own recall, its two constants set for the run). It chooses the pair on the
questions of the ODD conversations by R@5 over every category, among the settings that cost
single-hop questions at most a point of R@10 and the whole set at most a point of R@1 against no
second hop at all, ties broken by R@1 then R@10;
and reports on the EVEN conversations (held out) the chosen pair beside the product's constants,
no second hop (``HOP_WEIGHT = 0``) and no date list (``DATE_WEIGHT = 0``), per category.

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.

Run (from the repository root)::

    .venv/bin/python benchmarks/recall_weights.py
    .venv/bin/python benchmarks/recall_weights.py --quick      # 4 conversations
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # words only: the weights apply alike to hybrid

from recall_quality import DATA, Ours, load_set, progress

from fermix_memory.application import recall as recall_use_case

DATE_WEIGHTS = (0.0, 1.0, 1.5, 2.0)
HOP_WEIGHTS = (0.0, 0.5, 0.75, 1.0, 1.5)
KS = (1, 5, 10)
NOISE = 0.01  # one point: what single-hop R@10 and the whole set's R@1 may lose to the second hop


@contextmanager
def weights(date_weight: float, hop_weight: float) -> Iterator[None]:
    saved = recall_use_case.DATE_WEIGHT, recall_use_case.HOP_WEIGHT
    recall_use_case.DATE_WEIGHT, recall_use_case.HOP_WEIGHT = date_weight, hop_weight
    try:
        yield
    finally:
        recall_use_case.DATE_WEIGHT, recall_use_case.HOP_WEIGHT = saved


def scores(ours: Ours, questions: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """R@1/5/10 per category (and ``all``) of the questions asked by words."""
    hits: dict[str, dict[int, int]] = {}
    counts: dict[str, int] = {}
    for question in questions:
        ranked = ours.search(question, "keyword")
        for bucket in (question["category"], "all"):
            counts[bucket] = counts.get(bucket, 0) + 1
            bucket_hits = hits.setdefault(bucket, dict.fromkeys(KS, 0))
            for k in KS:
                bucket_hits[k] += any(answer in ranked[:k] for answer in question["answer_turn_ids"])
    return {bucket: {f"R@{k}": round(hits[bucket][k] / counts[bucket], 3) for k in KS} | {"n": counts[bucket]}
            for bucket in sorted(counts)}


Setting = tuple[float, float]  # date weight, hop weight


def admissible(figures: dict[str, dict[str, float]], without_hop: dict[str, dict[str, float]]) -> bool:
    """The second hop costs single-hop questions at most a point of R@10, and the whole set at most
    a point of R@1 (a hop that shuffles the first places is not worth its reach)."""
    return (figures["single-hop"]["R@10"] >= without_hop["single-hop"]["R@10"] - NOISE
            and figures["all"]["R@1"] >= without_hop["all"]["R@1"] - NOISE)


def choose(ours: Ours, tuning: Sequence[dict[str, Any]]) -> tuple[Setting, list[dict[str, Any]]]:
    grid: dict[Setting, dict[str, dict[str, float]]] = {}
    for date_weight in DATE_WEIGHTS:
        for hop_weight in HOP_WEIGHTS:
            with weights(date_weight, hop_weight):
                grid[date_weight, hop_weight] = scores(ours, tuning)
            progress(f"date {date_weight} hop {hop_weight}: {grid[date_weight, hop_weight]['all']}")

    def key(setting: Setting) -> tuple[float, float, float]:
        a = grid[setting]["all"]
        return a["R@5"], a["R@1"], a["R@10"]

    fair = [s for s in grid if admissible(grid[s], grid[s[0], 0.0])]
    best = max(fair, key=key)
    table = [{"date_weight": d, "hop_weight": h, **grid[d, h]} for d, h in grid]
    return best, table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 conversations only")
    args = parser.parse_args(argv)
    conversations, questions = load_set(DATA, args.quick)
    generated = [q for q in questions if q["category"] != "paraphrase"]
    odd = {c["id"] for i, c in enumerate(conversations) if i % 2 == 0}  # conv01, conv03, ...
    tuning = [q for q in generated if q["conversation"] in odd]
    held_out = [q for q in generated if q["conversation"] not in odd]
    with tempfile.TemporaryDirectory() as folder:
        progress(f"building one home of {len(conversations)} conversation(s)")
        ours = Ours(Path(folder) / "home", conversations)
        try:
            chosen, table = choose(ours, tuning)
            report: dict[str, Any] = {}
            product = (recall_use_case.DATE_WEIGHT, recall_use_case.HOP_WEIGHT)
            for name, setting in (("chosen", chosen), ("product", product), ("no_second_hop", (chosen[0], 0.0)),
                                  ("no_date_list", (0.0, chosen[1]))):
                with weights(*setting):
                    report[name] = {"date_weight": setting[0], "hop_weight": setting[1], **scores(ours, held_out)}
        finally:
            ours.close()
    print(json.dumps({"benchmark": "recall_weights", "quick": args.quick, "tuning_questions": len(tuning),
                      "held_out_questions": len(held_out),
                      "chosen": {"date_weight": chosen[0], "hop_weight": chosen[1]},
                      "grid_on_tuning_half": table, "held_out": report}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
