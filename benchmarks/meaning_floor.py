"""The relevance floor of search by meaning, measured on the [semantic] extra's model (ADR-0054).

``recall_eval/meaning_floor.json`` holds hand-written facts (memory rows), turns and questions,
each question naming what answers it. Every question is embedded against every row and turn as
the product embeds them; for each candidate floor (a cosine similarity) the script reports:

* **kept**: the share of related pairs at or above the floor (what the floor must not lose);
* **dropped**: the share of unrelated pairs below it (what a floor is for);
* **clean**: the questions whose hits above the floor are all related (none for the three
  questions nothing answers).

It also prints the related pairs of lowest similarity and the unrelated ones of highest, the
two tails a floor sits between. Progress goes to stderr; the LAST line of stdout is one JSON
object with every figure.

Run (from the repository root, with the ``[semantic]`` extra)::

    .venv/bin/python benchmarks/meaning_floor.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fermix_memory.adapters.embedding import load_embedder
from fermix_memory.application.embedder import similarity
from fermix_memory.application.settings import MemorySettings

CASES = Path(__file__).with_name("recall_eval") / "meaning_floor.json"
FLOORS = [round(0.05 * i, 2) for i in range(0, 11)]


def texts(cases: dict[str, Any]) -> dict[str, str]:
    """Each row and turn by its name, as the product embeds it."""
    rows = {key: f"{key.replace('_', ' ')}: {value}" for key, value in cases["rows"].items()}
    return rows | dict(cases["turns"])


def pairs(cases: dict[str, Any]) -> list[tuple[str, str, float, bool]]:
    """(question, name, similarity, related) for every question and every row and turn."""
    embedder = load_embedder()
    named = texts(cases)
    names = list(named)
    vectors = dict(zip(names, embedder.embed([named[n] for n in names]), strict=True))
    questions = cases["questions"]
    asked = embedder.embed([q["q"] for q in questions])
    return [(q["q"], name, similarity(v, vectors[name]), name in q["relevant"])
            for q, v in zip(questions, asked, strict=True) for name in names]


def figures(found: list[tuple[str, str, float, bool]]) -> dict[str, Any]:
    related = [s for _, _, s, r in found if r]
    unrelated = [s for _, _, s, r in found if not r]
    questions = sorted({q for q, *_ in found})
    by_floor = []
    for floor in FLOORS:
        clean = sum(all(r for q2, _, s, r in found if q2 == q and s >= floor) for q in questions)
        by_floor.append({"floor": floor, "kept": round(sum(s >= floor for s in related) / len(related), 3),
                         "dropped": round(sum(s < floor for s in unrelated) / len(unrelated), 3),
                         "clean": f"{clean}/{len(questions)}"})
    low = sorted((s, q, n) for q, n, s, r in found if r)[:8]
    high = sorted(((s, q, n) for q, n, s, r in found if not r), reverse=True)[:8]
    return {"related_pairs": len(related), "unrelated_pairs": len(unrelated), "by_floor": by_floor,
            "lowest_related": [[round(s, 3), q, n] for s, q, n in low],
            "highest_unrelated": [[round(s, 3), q, n] for s, q, n in high],
            "default_floor": MemorySettings().recall_min_similarity}


def main() -> None:
    cases = json.loads(CASES.read_text(encoding="utf-8"))
    print(f"embedding {len(cases['questions'])} questions against {len(texts(cases))} rows and turns",
          file=sys.stderr)
    result = figures(pairs(cases))
    for row in result["by_floor"]:
        print(f"floor {row['floor']:.2f}: kept {row['kept']:.3f}  dropped {row['dropped']:.3f}  clean {row['clean']}")
    for title in ("lowest_related", "highest_unrelated"):
        print(title.replace("_", " ") + ":")
        for s, q, n in result[title]:
            print(f"  {s:.3f}  {q!r} ~ {n}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
