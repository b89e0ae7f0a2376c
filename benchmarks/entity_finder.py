"""How well and how fast ``entities_in`` finds the names of the recall evaluation's turns.

Ground truth (``benchmarks/recall_eval/conversations.jsonl``): every participant's name and every
name on the participants' sheets (partners, children, pets, companies, cities, bands, books,
shows, races, cars...). A sheet value's name is its span from its first capitalised word to its
last ("a secondhand Nissan Leaf" → "nissan leaf"); a race keeps its trailing words ("Berlin
marathon"); a leading article is dropped on both sides ("The Lanterns" → "lanterns"). A name
*occurs* in a turn when its words occur there in a row, case-insensitively. Per turn, a found
name that equals an occurring name is a hit; the others are extra (names not on any sheet, or
not a name).

Figures, for the tuning conversations (conv01-conv08) and the held-out ones (conv09-conv15)
separately: precision and recall against the sheets, recall of the occurrences written with a
capital (a sheet's "Olive" in "olive oil" is no name there), extra spans per turn, the most
frequent extra spans, and µs per turn (p50 / p95 over every turn, a few rounds, best round per
turn), with the time of a plain ``str.split`` of the same turns beside it as a yardstick.

Run from the repository root::

    .venv/bin/python benchmarks/entity_finder.py [--quick]

The last line of stdout is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fermix_memory.domain.entities import entities_in

DATA = Path(__file__).resolve().parent / "recall_eval" / "conversations.jsonl"
TUNING = {f"conv{n:02d}" for n in range(1, 9)}
_SKIP_KEYS = {"events", "result", "verdict", "pg", "rs", "kg", "rel", "age", "time"}
_ARTICLES = ("the ", "a ", "an ")
_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")


def _norm(name: str) -> str:
    low = name.lower()
    for article in _ARTICLES:
        if low.startswith(article):
            return low[len(article):]
    return low


def _sheet_values(sheet: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for key, value in sheet.items():
        if key in _SKIP_KEYS:
            continue
        if isinstance(value, dict):
            yield from _sheet_values(value)
        elif isinstance(value, str):
            yield key, value


def gold_names(conversation: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for person in conversation["participants"]:
        names.add(person["name"].lower())
        for key, value in _sheet_values(person["sheet"]):
            words = value.split()
            caps = [i for i, w in enumerate(words) if w[0].isupper()]
            if not caps:
                continue
            last = len(words) if key == "race" else caps[-1] + 1
            names.add(_norm(" ".join(words[caps[0]:last])))
    return names


def _words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text):
        w = w.replace("\u2019", "'")
        out.append(w[:-2] if w.endswith("'s") else w)
    return out


def _occurs(name: str, words: list[str], *, capitalised: bool) -> bool:
    parts = name.split()
    n = len(parts)
    for i in range(len(words) - n + 1):
        window = words[i:i + n]
        if [w.lower() for w in window] == parts and (not capitalised or window[0][0].isupper()):
            return True
    return False


def turns_of(conversation: dict[str, Any]) -> list[str]:
    return [t["text"] for s in conversation["sessions"] for t in s["turns"]]


def quality(conversations: list[dict[str, Any]]) -> dict[str, Any]:
    found = hits = gold = gold_caps = hits_caps = 0
    extra: Counter[str] = Counter()
    turns = 0
    for conversation in conversations:
        names = gold_names(conversation)
        for text in turns_of(conversation):
            turns += 1
            words = _words(text)
            occurring = {n for n in names if _occurs(n, words, capitalised=False)}
            written = {n for n in occurring if _occurs(n, words, capitalised=True)}
            got = set(entities_in(text))
            found += len(got)
            hits += len(got & occurring)
            gold += len(occurring)
            gold_caps += len(written)
            hits_caps += len(got & written)
            extra.update(got - occurring)
    return {
        "turns": turns,
        "precision": round(hits / max(found, 1), 3),
        "recall": round(hits / max(gold, 1), 3),
        "recall_capitalised": round(hits_caps / max(gold_caps, 1), 3),
        "extra_per_turn": round(sum(extra.values()) / max(turns, 1), 3),
        "names_per_turn": round(found / max(turns, 1), 3),
        "top_extra": [f"{name} x{n}" for name, n in extra.most_common(25)],
    }


def _best_us(texts: list[str], fn: Any, rounds: int) -> list[float]:
    best = [float("inf")] * len(texts)
    for _ in range(rounds):
        for i, text in enumerate(texts):
            t0 = time.perf_counter_ns()
            for _ in range(10):
                fn(text)
            best[i] = min(best[i], (time.perf_counter_ns() - t0) / 10_000)
    return best


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))], 2)


def speed(conversations: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    texts = [text for c in conversations for text in turns_of(c)]
    ours = _best_us(texts, entities_in, rounds)
    split = _best_us(texts, str.split, rounds)
    short = [us for us, text in zip(ours, texts, strict=True) if len(text.split()) <= 12]
    long_text = "Kwame met Chloe at Kestrel Health in São Paulo. " * 2200  # ~100k characters
    t0 = time.perf_counter()
    entities_in(long_text)
    return {
        "us_p50": _pct(ours, 50), "us_p95": _pct(ours, 95),
        "us_p50_turns_up_to_12_words": _pct(short, 50),
        "split_us_p50": _pct(split, 50), "ours_over_split_p50": round(_pct(ours, 50) / max(_pct(split, 50), 1e-9), 1),
        "ms_100k_chars": round((time.perf_counter() - t0) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing rounds")
    args = parser.parse_args()
    conversations = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    tuning = [c for c in conversations if c["id"] in TUNING]
    held_out = [c for c in conversations if c["id"] not in TUNING]
    out: dict[str, Any] = {"tuning_conv01_08": quality(tuning), "held_out_conv09_15": quality(held_out)}
    for part, figures in out.items():
        print(part, json.dumps(figures, ensure_ascii=False), file=sys.stderr)
    out["speed"] = speed(conversations, 2 if args.quick else 5)
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
