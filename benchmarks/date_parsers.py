"""Our date phrases (domain/time_expressions.py) against ``dateparser`` and ``parsedatetime`` (ADR-0075).

For each parser that imports, on one set of texts:

- accuracy on phrases written for this benchmark: questions with the windows of days they ask
  about (anchor Thursday 16 May 2024), chat turns with the days they speak of, and texts with
  no date at all; plus the evaluation's own texts (benchmarks/recall_eval): every date question
  read at its moment, the turn answering every temporal question read at its own time, and the
  single-hop questions, which name no day ("What does Kwame play on Tuesday nights?");
- a case counts when every day window expected holds something the parser found and everything
  it found lies in an expected window (ours returns windows, theirs dates: a date inside the
  window counts; a window must lie inside it); a text without a date counts when nothing is found;
- microseconds per text (p50 and mean) over the evaluation's turns as they come (most without
  a date) and over those with one; ``reference_us`` times a fixed piece of pure Python
  (``sum(i * i for i in range(1000))``) to compare runs on machines of other speeds;
- import time (fresh interpreter, best of 3; ours after ``attrs``, which the package imports
  anyway) and install size (the distribution and everything
  it requires, from the environment's metadata).

Ours is loaded by file path with only ``attrs`` besides, so the benchmark runs in a throwaway
environment that holds the other two (not the project's)::

    python3 -m venv /tmp/dpvenv && /tmp/dpvenv/bin/pip install -q parsedatetime dateparser attrs
    /tmp/dpvenv/bin/python benchmarks/date_parsers.py --quick

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata as md
import json
import random
import re
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "benchmarks" / "recall_eval"
ANCHOR = datetime(2024, 5, 16, 12, 0, tzinfo=UTC)  # a Thursday
Window = tuple[date, date]


def load_ours() -> Any:
    """domain/time_expressions.py as a module, without the package's ``__init__`` files."""
    for name, path in (("fermix_memory", ROOT), ("fermix_memory.domain", ROOT / "domain")):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package
    return importlib.import_module("fermix_memory.domain.time_expressions")


def w(first: str, last: str | None = None) -> Window:
    return date.fromisoformat(first), date.fromisoformat(last or first)


# (text, expected windows) read as a question at ANCHOR
QUESTIONS: list[tuple[str, list[Window]]] = [
    ("What did we talk about on 3 May?", [w("2024-05-03")]),
    ("What happened on May 3rd?", [w("2024-05-03")]),
    ("What was said on the 3rd of May 2023?", [w("2023-05-03")]),
    ("Anything from 2024-02-26?", [w("2024-02-26")]),
    ("What did Kwame say on 26/02/2024?", [w("2024-02-26")]),
    ("What did I do in January 2022?", [w("2022-01-01", "2022-01-31")]),
    ("What did we plan in March?", [w("2024-03-01", "2024-03-31")]),
    ("Where did we travel in 2023?", [w("2023-01-01", "2023-12-31")]),
    ("What did we do on Monday?", [w("2024-05-13")]),
    ("What happened yesterday?", [w("2024-05-15")]),
    ("What did I say today?", [w("2024-05-16")]),
    ("What did we discuss the day before yesterday?", [w("2024-05-14")]),
    ("Where were we last Friday?", [w("2024-05-10")]),
    ("What did we do last weekend?", [w("2024-05-11", "2024-05-12")]),
    ("What happened last week?", [w("2024-05-06", "2024-05-12")]),
    ("What did we talk about this week?", [w("2024-05-13", "2024-05-19")]),
    ("What happened last month?", [w("2024-04-01", "2024-04-30")]),
    ("What did Mei say two weeks ago?", [w("2024-04-29", "2024-05-05")]),
    ("What did we discuss a week ago?", [w("2024-05-06", "2024-05-12")]),
    ("What came up three days ago?", [w("2024-05-13")]),
    ("What was said a couple of days ago?", [w("2024-05-13", "2024-05-14")]),
    ("What did Sam do last year?", [w("2023-01-01", "2023-12-31")]),
    ("What happened during the week of 15 January?", [w("2024-01-15", "2024-01-21")]),
    ("What was Kwame doing on Saturday 11 May 2024?", [w("2024-05-11")]),
    ("What are we doing next Monday?", [w("2024-05-20")]),
    ("What happened in mid-April?", [w("2024-04-11", "2024-04-20")]),
]
# (text, expected days) said at ANCHOR
TURNS: list[tuple[str, list[str]]] = [
    ("Ran my first 10k on Monday! My legs are jelly.", ["2024-05-13"]),
    ("We got engaged on Thursday!!", ["2024-05-09"]),
    ("We went camping by the lake last Friday, froze all night.", ["2024-05-10"]),
    ("Dropped my phone in the canal the day before yesterday.", ["2024-05-14"]),
    ("Saw them live two days ago, best gig of my life.", ["2024-05-14"]),
    ("Had eight people over for dinner this morning.", ["2024-05-16"]),
    ("Got a proper short haircut three days ago.", ["2024-05-13"]),
    ("Passed! Driving test last week, one minor fault.", [f"2024-05-{n:02d}" for n in range(6, 13)]),
    ("See you on Monday!", ["2024-05-20"]),
    ("My cousin got married on Sunday! Gorgeous day.", ["2024-05-12"]),
    ("We moved into the new flat on Saturday. Boxes everywhere.", ["2024-05-11"]),
    ("My parents came to stay yesterday.", ["2024-05-15"]),
    ("The exam is on 3 June, wish me luck.", ["2024-06-03"]),
    ("I'll call you tomorrow.", ["2024-05-17"]),
    ("We were away last weekend.", ["2024-05-11", "2024-05-12"]),
]
NO_DATES = [
    "What does Kwame play on Tuesday nights?", "Where do we go every Monday?",
    "I may go to the market later.", "We march on regardless.", "That was the 3rd time this happened.",
    "Nothing much, just tired.", "My daughter laughed at the dog.", "It costs 12.50, can you believe it?",
    "Ran 10k and felt great.", "What is Kwame afraid of?",
]


def evaluation_cases() -> tuple[list[tuple[str, datetime, list[Window]]], list[tuple[str, datetime, list[Window]]],
                                 list[tuple[str, datetime]], list[tuple[str, datetime]]]:
    """(date questions, temporal answer turns, no-date questions, every turn) of the evaluation."""
    turns: dict[str, dict[str, str]] = {}
    newest: dict[str, datetime] = {}
    for line in (EVAL / "conversations.jsonl").read_text(encoding="utf-8").splitlines():
        conversation = json.loads(line)
        for session in conversation["sessions"]:
            for turn in session["turns"]:
                turns[turn["id"]] = turn
                at = datetime.fromisoformat(turn["created_at"])
                newest[conversation["id"]] = max(newest.get(conversation["id"], at), at)
    questions = [json.loads(line) for line in (EVAL / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    dated, temporal, plain = [], [], []
    for q in questions:
        if q["category"] == "date":
            anchor = datetime.fromisoformat(q["as_of"]) if q.get("as_of") else newest[q["conversation"]]
            dated.append((q["question"], anchor, [answer_window(q["question"], q["answer_date"])]))
        elif q["category"] == "temporal":
            turn = turns[q["answer_turn_ids"][0]]
            temporal.append((turn["text"], datetime.fromisoformat(turn["created_at"]),
                             [answer_window(turn["text"], q["answer_date"])]))
        elif q["category"] == "single-hop":
            plain.append((q["question"], newest[q["conversation"]]))
    every = [(t["text"], datetime.fromisoformat(t["created_at"])) for t in turns.values()]
    return dated, temporal, plain, every


def answer_window(text: str, answer_date: str) -> Window:
    """The answer's day; for "last week" / "the week of" the week its Monday begins, for "last
    weekend" its weekend."""
    day = date.fromisoformat(answer_date)
    if re.search(r"\bweek\b", text, re.IGNORECASE):
        return day, day + timedelta(days=6)
    if re.search(r"\bweekend\b", text, re.IGNORECASE) and day.weekday() >= 5:
        saturday = day - timedelta(days=day.weekday() - 5)
        return saturday, saturday + timedelta(days=1)
    return day, day


# --- the parsers: text, anchor, question? -> windows found ---------------------------------------

def ours() -> Callable[[str, datetime, bool], list[Window]]:
    te = load_ours()

    def parse(text: str, anchor: datetime, question: bool) -> list[Window]:
        if question:
            return [(x.first, x.last) for x in te.read_dates(text, anchor).windows]
        return [(day, day) for day in te.mentioned_days(text, anchor)]
    return parse


def dateparser_search() -> Callable[[str, datetime, bool], list[Window]]:
    import dateparser.search

    def parse(text: str, anchor: datetime, question: bool) -> list[Window]:
        settings = {"RELATIVE_BASE": anchor.replace(tzinfo=None), "PREFER_DATES_FROM": "past"}
        found = dateparser.search.search_dates(text, languages=["en"], settings=settings) or []
        return [(at.date(), at.date()) for _, at in found]
    return parse


def parsedatetime_nlp() -> Callable[[str, datetime, bool], list[Window]]:
    import parsedatetime

    calendar = parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)

    def parse(text: str, anchor: datetime, question: bool) -> list[Window]:
        found = calendar.nlp(text, sourceTime=anchor.replace(tzinfo=None)) or ()
        return [(item[0].date(), item[0].date()) for item in found]
    return parse


PARSERS = {"ours": ours, "dateparser": dateparser_search, "parsedatetime": parsedatetime_nlp}
MODULES = {"ours": None, "dateparser": "dateparser", "parsedatetime": "parsedatetime"}


def correct(found: list[Window], expected: list[Window]) -> bool:
    if not expected:
        return not found
    inside = all(any(e[0] <= f[0] and f[1] <= e[1] for e in expected) for f in found)
    return inside and all(any(e[0] <= f[0] and f[1] <= e[1] for f in found) for e in expected)


def turn_windows(days: list[str]) -> list[Window]:
    """Expected days as windows: a run of consecutive days is one window."""
    return [(date.fromisoformat(days[0]), date.fromisoformat(days[-1]))] if days else []


def accuracy(parse: Callable[[str, datetime, bool], list[Window]],
             cases: Iterable[tuple[str, datetime, bool, list[Window]]]) -> tuple[float, int]:
    hits = total = 0
    for text, anchor, question, expected in cases:
        total += 1
        with contextlib.suppress(Exception):  # a parser that raises on a text gets it wrong
            hits += correct(parse(text, anchor, question), expected)
    return round(hits / max(total, 1), 3), total


def timings(parse: Callable[[str, datetime, bool], list[Window]], texts: list[tuple[str, datetime]],
            repeat: int) -> dict[str, float]:
    per_text = []
    for text, anchor in texts:
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            parse(text, anchor, False)
            best = min(best, time.perf_counter() - started)
        per_text.append(best * 1e6)
    return {"p50_us": round(statistics.median(per_text), 2), "mean_us": round(statistics.fmean(per_text), 2)}


def import_seconds(name: str) -> float:
    """Best of three fresh interpreters."""
    if name == "ours":
        # attrs, which the package imports anyway, before the clock starts
        code = (f"import sys, time, types, importlib, attrs; t = time.perf_counter(); root = {str(ROOT)!r}\n"
                "for name, path in (('fermix_memory', root), ('fermix_memory.domain', root + '/domain')):\n"
                "    sys.modules[name] = types.ModuleType(name); sys.modules[name].__path__ = [path]\n"
                "importlib.import_module('fermix_memory.domain.time_expressions'); print(time.perf_counter() - t)")
    else:
        code = f"import time; t = time.perf_counter(); import {MODULES[name]}; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
            for _ in range(3)]
    return round(min(runs) * 1000, 1)


def reference_us() -> float:
    """A fixed piece of pure Python (p50 of 200), to scale the figures by the machine's speed."""
    runs = []
    for _ in range(200):
        started = time.perf_counter()
        sum(i * i for i in range(1000))
        runs.append((time.perf_counter() - started) * 1e6)
    return round(statistics.median(runs), 2)


def install_mb(name: str) -> float:
    """The distribution and what it requires (recursively), from the environment's records."""
    if name == "ours":
        return round(sum((ROOT / "domain" / f).stat().st_size for f in ("time_expressions.py", "time_calendar.py"))
                     / 1e6, 3)
    seen: set[str] = set()
    todo, total = [name], 0
    while todo:
        current = todo.pop()
        key = re.sub(r"[-_.]+", "-", current).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(current)
        except md.PackageNotFoundError:
            continue
        total += sum((f.size or 0) for f in dist.files or ())
        for requirement in dist.requires or ():
            if "extra ==" not in requirement:
                todo.append(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0])
    return round(total / 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer texts timed (under a minute)")
    args = parser.parse_args()
    dated, temporal, plain, every = evaluation_cases()
    rng = random.Random(37)
    sample = rng.sample(every, 300 if args.quick else 1500)
    written = ([(t, ANCHOR, True, e) for t, e in QUESTIONS] + [(t, ANCHOR, False, turn_windows(d)) for t, d in TURNS]
               + [(t, ANCHOR, True, []) for t in NO_DATES])
    evaluation = ([(t, a, True, e) for t, a, e in dated] + [(t, a, False, e) for t, a, e in temporal]
                  + [(t, a, True, []) for t, a in plain])
    ours_parse = PARSERS["ours"]()
    with_dates = [(t, a) for t, a in every if ours_parse(t, a, False)]
    with_dates = rng.sample(with_dates, min(len(with_dates), 100 if args.quick else 400))
    results: dict[str, Any] = {}
    for name, make in PARSERS.items():
        try:
            parse = make()
        except ImportError:
            print(f"{name}: not importable, left out", file=sys.stderr)
            continue
        print(f"{name}: accuracy", file=sys.stderr)
        figures: dict[str, Any] = {"written": accuracy(parse, written), "evaluation": accuracy(parse, evaluation)}
        for label, cases in (("questions", [c for c in written if c[2] and c[3]]),
                             ("turns", [c for c in written if not c[2]]),
                             ("no_dates", [c for c in written if c[2] and not c[3]]),
                             ("eval_date_questions", [c for c in evaluation if c[2] and c[3]]),
                             ("eval_temporal_turns", [c for c in evaluation if not c[2]]),
                             ("eval_no_date_questions", [c for c in evaluation if c[2] and not c[3]])):
            figures[label] = accuracy(parse, cases)[0]
        print(f"{name}: timing", file=sys.stderr)
        repeat = 3 if name == "ours" else 1
        figures["all_turns"] = timings(parse, sample, repeat)
        figures["turns_with_dates"] = timings(parse, with_dates, repeat)
        figures["import_ms"] = import_seconds(name)
        figures["install_mb"] = install_mb(name)
        results[name] = figures
        print(f"{name}: {figures}", file=sys.stderr)
    if "ours" in results:
        base = results["ours"]["all_turns"]["p50_us"]
        for figures in results.values():
            figures["p50_vs_ours"] = round(figures["all_turns"]["p50_us"] / base, 1)
    print(json.dumps({"benchmark": "date_parsers", "quick": args.quick, "python": sys.version.split()[0],
                      "reference_us": reference_us(),
                      "texts_timed": len(sample), "with_dates_timed": len(with_dates), "parsers": results}))


if __name__ == "__main__":
    main()
