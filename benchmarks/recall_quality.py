"""Recall quality of ``memory_recall(source="history")`` on our own evaluation set, beside raw FTS5.

The set (``benchmarks/recall_eval/``, see its README) holds long multi-session chats between
named people and questions whose answers are specific turns. Every question is asked, in the
same run, of:

* **ours** — ``MemorySystem.recall(question, agent_id, owner_id, conversation, scope="current",
  source="history", limit=10)``, with ``as_of=`` the question's moment when it has one (relative
  date questions) and the installed ``recall`` takes that parameter (checked once; older versions
  are asked without it); each result carries the message id ``append_message`` returned, which
  maps back to a turn id;
* **raw FTS5** — an in-memory apsw FTS5 table (same tokenizer as the product: porter,
  unicode61, diacritics removed) holding ``"speaker: text"`` of the same turns, fed one turn
  per transaction in time order as ours is (a chat host stores messages as they arrive); the
  question's every word token is quoted and OR-ed (no stop words dropped) and ranked by
  ``bm25``, top 10. It returns turn ids only, ours whole messages with snippets;
* **raw PostgreSQL** (when PostgreSQL is measured) — the same turns in a table of their own,
  with a generated ``tsvector`` (``english``) and a GIN index, in a database of its own on the
  same server, fed the same way, asked the ranking query of PostgreSQL's manual by hand on one
  plain connection: ``SELECT turn FROM raw_turns, websearch_to_tsquery('english', <the
  question's words OR-ed>) query WHERE search @@ query AND conv = <the conversation> ORDER BY
  ts_rank(search, query) DESC LIMIT 10``. Turn ids only.

How a host would store these chats: the memory belongs to the FIRST participant of each
conversation (the account holder; the agent keeps that person's memory and reads along), so
every turn of a conversation is appended under ``agent_id="companion"``,
``owner_id="<conv id>-<first name>"`` (e.g. ``conv03-aisha``), conversation ``chat:<conv id>``,
``role="user"`` (every speaker is a person), ``sender=<speaker name>``, ``created_at`` = the
turn's time, in time order. Questions are asked as that owner in that conversation.

With ``--store sqlite,postgres`` ours runs on both stores in the same run, taking turns question
by question with raw FTS5 (the default when the ``[postgres]`` extra and PostgreSQL's binaries
are here; otherwise SQLite only): the PostgreSQL store is a throwaway server the script starts
(``tests/postgres_server.py``, fsync off: loading is not what is measured), one fresh database
per home, over its Unix socket.

Two modes, both printed:

(a) **one home**: all conversations in ONE home (and, for raw FTS5, one table: term statistics
    span every conversation, the question filtered to its conversation after ``MATCH``; raw
    PostgreSQL likewise one table);
(b) **alone**: each conversation in its own home (and its own FTS5 table, and raw PostgreSQL
    table in a database of its own).

Figures: R@1/5/10 per category (a hit when ANY answering turn is in the top k): the three core
categories (single-hop, multi-hop, temporal) and ``core`` (the three together: the set as it was
before it grew, comparable with older runs), ``date`` and its kinds ``date:absolute``,
``date:relative`` and ``date:day`` (for questions answered by a whole day's turns also the share
of the top 10 said that day, ``P@10_whole_day``), ``entity-hop`` (the answer names a person or
thing the question only describes; a link turn sessions before joins them), ``all`` (every
generated question), for the questions about the conversations of long turns (``long-turns``:
voice-transcript style turns of 25-40 words, where a ranking that assumes short turns pushes the
answer down), and, for multi-hop, "all answering turns in the top k"; the hand-written
``paraphrase`` questions (``recall_eval/paraphrases.jsonl``: the answer shares no content word
with the question) are a category of their own, outside "all" and outside the latency figures;
p50/p95 latency per question over every generated question (``latency_ms``; ``latency_ms_core``
over the core ones only; each question's time is the median of 3 runs, ours and raw taking turns
question by question); the p95 ratio ours / raw FTS5 (target <= 1.5) and, for ours on
PostgreSQL, also ours / raw PostgreSQL (``p95_ratio_postgres_to_raw_postgres``, target <= 1.5),
and, as a diagnostic, raw FTS5 loaded in one transaction (a one-segment index: what merging the
index buys). Progress goes to stderr; the LAST line of stdout is one JSON object with every
figure.

Run (from the repository root)::

    .venv/bin/python benchmarks/recall_quality.py --quick    # 4 conversations (one of long turns, one with
                                                             # entity chains), under a minute
    .venv/bin/python benchmarks/recall_quality.py            # the whole set
    .venv/bin/python benchmarks/recall_quality.py --store sqlite   # SQLite only
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
from append_and_recall import percentile, progress

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.fts_query import quote_term

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.postgres_server
from tests.postgres_server import PostgresServer, missing_server, running_server

DATA = Path(__file__).resolve().parent / "recall_eval"
AGENT = "companion"
KS = (1, 5, 10)
CORE = ("single-hop", "multi-hop", "temporal")  # the set's first three categories
DATE, ENTITY_HOP = "date", "entity-hop"
DATE_KINDS = ("absolute", "relative", "day")  # a date question's ``date_kind``: also a bucket "date:<kind>"
CATEGORIES = (*CORE, DATE, ENTITY_HOP)  # every generated question
PARAPHRASE = "paraphrase"  # recall_eval/paraphrases.jsonl: scored apart from "all"
# Every generated question also counts in "all", those of the three first categories in "core"
# (comparable with runs before the set grew), and those about a conversation of long turns
# (the set's ``"style": "long-turns"``, turns of 25-40 words) also in "long-turns".
LONG_TURNS = "long-turns"
BUCKETS = (*CORE, "core", DATE, *(f"date:{k}" for k in DATE_KINDS), ENTITY_HOP, PARAPHRASE, LONG_TURNS, "all")
REPEATS = 3  # each question's time is the median of this many runs
WARM_UP = 20  # questions asked once, untimed, before each home is measured
TOKENIZER = "porter unicode61 remove_diacritics 2"
_WORD = re.compile(r"\w+", re.UNICODE)


# --- the evaluation set ---------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_set(folder: Path, quick: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    conversations = read_jsonl(folder / "conversations.jsonl")
    questions = read_jsonl(folder / "questions.jsonl")
    if (folder / "paraphrases.jsonl").exists():
        questions += read_jsonl(folder / "paraphrases.jsonl")
    if quick:  # two conversations of short turns, one of long turns and one with entity chains
        short = [c for c in conversations if c.get("style") != LONG_TURNS]
        chains = {q["conversation"] for q in questions if q["category"] == ENTITY_HOP}
        conversations = (short[:2] + [c for c in conversations if c.get("style") == LONG_TURNS][:1]
                         + [c for c in short if c["id"] in chains][:1])
        kept = {c["id"] for c in conversations}
        questions = [q for q in questions if q["conversation"] in kept]
    long_turns = {c["id"] for c in conversations if c.get("style") == LONG_TURNS}
    preceding = {turn["id"]: previous["id"] for c in conversations for session in c["sessions"]
                 for previous, turn in zip(session["turns"], session["turns"][1:], strict=False)}
    for q in questions:  # the turn each answering turn replies to, for the diagnostic figure
        q["preceding_turn_ids"] = [preceding[a] for a in q["answer_turn_ids"] if a in preceding]
        q["buckets"] = buckets_of(q, q["conversation"] in long_turns)
    return conversations, questions


def buckets_of(question: dict[str, Any], long_turns: bool) -> tuple[str, ...]:
    """The buckets a question counts in: its category (a date question also in its kind's), then
    "core" for the first three categories, "long-turns" and "all" (paraphrases: their own only)."""
    category = question["category"]
    if category not in CATEGORIES:
        return (category,)
    return (category, *([f"date:{question['date_kind']}"] if category == DATE else ()),
            *(["core"] if category in CORE else ()), *([LONG_TURNS] if long_turns else ()), "all")


def owner_of(conversation: dict[str, Any]) -> str:
    return f"{conversation['id']}-{conversation['participants'][0]['name'].lower()}"


def chat_of(conversation: dict[str, Any]) -> str:
    return f"chat:{conversation['id']}"


def turns_of(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    return [turn for session in conversation["sessions"] for turn in session["turns"]]


# --- the two systems --------------------------------------------------------------------------------


class Ours:
    """The product, through its public API, on a home of its own (and, on PostgreSQL, a database
    of its own at ``url``); with ``embedder``, recall by meaning too (ADR-0043): every turn's
    vector is stored before the questions (``embedding`` says how long that took)."""

    def __init__(self, home: Path, conversations: Sequence[dict[str, Any]], url: str | None = None,
                 embedder: Any = None) -> None:
        self.memory = MemorySystem.open(home, config=None if url is None else
                                        {"fermix_core": {"storage": {"url": url}}}, embedder=embedder)
        started = time.perf_counter()
        self.turn_of: dict[int, str] = {}
        self.where: dict[str, tuple[str, str]] = {}
        rows = [(turn, c) for c in conversations for turn in turns_of(c)]
        rows.sort(key=lambda row: row[0]["created_at"])  # a host appends as messages arrive
        for turn, conversation in rows:
            message_id = self.memory.append_message(
                agent_id=AGENT, owner_id=owner_of(conversation), conversation=chat_of(conversation), role="user",
                sender=turn["speaker"], content=turn["text"], created_at=turn["created_at"])
            self.turn_of[message_id] = turn["id"]
        # The appends' background work (search index upkeep, ADR-0020) settles, as it does in the
        # seconds between a chat's turns; these appends came back to back.
        appended = time.perf_counter()
        self.memory.wait_for_background()
        self.memory.fill_vectors()  # what the background has not embedded yet
        done = time.perf_counter()
        self.embedding = {"texts": len(rows), "append_s": appended - started, "until_embedded_s": done - started}
        for conversation in conversations:
            self.where[conversation["id"]] = (owner_of(conversation), chat_of(conversation))

    def search(self, question: dict[str, Any], mode: str = "keyword") -> list[str]:
        owner, chat = self.where[question["conversation"]]
        when = {"as_of": question["as_of"]} if "as_of" in question and recall_takes_as_of() else {}
        result = self.memory.recall(question["question"], agent_id=AGENT, owner_id=owner, conversation=chat,
                                    scope="current", source="history", limit=10, mode=mode,  # type: ignore[arg-type]
                                    **when)
        return [self.turn_of.get(hit.message.id, "?") for hit in result.messages]

    def searcher(self, mode: str) -> Callable[[dict[str, Any]], list[str]]:
        return lambda question: self.search(question, mode)

    def close(self) -> None:
        self.memory.close()


@functools.cache
def recall_takes_as_of() -> bool:
    """Whether the installed ``MemorySystem.recall`` takes the moment a question is asked at
    (older versions do not: their relative date questions are asked without it)."""
    return "as_of" in inspect.signature(MemorySystem.recall).parameters


def or_query(text: str) -> str:
    """Every word token of ``text``, quoted and OR-ed (duplicates once)."""
    terms = dict.fromkeys(match.group(0).lower() for match in _WORD.finditer(text))
    return " OR ".join(quote_term(term) for term in terms)


class RawFts:
    """Plain FTS5 over ``"speaker: text"``: one in-memory table, bm25, no scoping beyond a filter.

    Fed like ours, one turn per transaction in time order (as a host stores messages as they
    arrive), so its index has the segments such a table has; ``bulk=True`` loads every turn in
    one transaction instead (one segment: a diagnostic of what merging buys)."""

    def __init__(self, conversations: Sequence[dict[str, Any]], *, bulk: bool = False) -> None:
        self.conn = apsw.Connection(":memory:")
        self.conn.execute(f"CREATE VIRTUAL TABLE turns USING fts5(body, conv UNINDEXED, turn UNINDEXED,"
                          f" tokenize='{TOKENIZER}')")
        rows = sorted(((turn["created_at"], f"{turn['speaker']}: {turn['text']}", c["id"], turn["id"])
                       for c in conversations for turn in turns_of(c)), key=lambda row: row[0])
        insert = "INSERT INTO turns(body, conv, turn) VALUES (?, ?, ?)"
        if bulk:
            with self.conn:
                self.conn.executemany(insert, [row[1:] for row in rows])
        else:
            for row in rows:
                with self.conn:
                    self.conn.execute(insert, row[1:])

    def search(self, question: dict[str, Any]) -> list[str]:
        rows = self.conn.execute("SELECT turn FROM turns WHERE turns MATCH ? AND conv = ? ORDER BY bm25(turns)"
                                 " LIMIT 10", (or_query(question["question"]), question["conversation"]))
        return [row[0] for row in rows]

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    """The hand-written PostgreSQL counterpart of :class:`RawFts`: a table of ``"speaker: text"``
    with a generated ``tsvector`` (``english``, as ours) and a GIN index, in a database of its
    own on the same server, fed one turn per transaction in time order; asked the ranking query
    of PostgreSQL's manual (the query a function in ``FROM``, so computed once) — the question's
    word tokens OR-ed by ``websearch_to_tsquery``, the conversation filtered beside the match,
    ``ts_rank``, top 10 — in one statement on one plain connection. Turn ids only."""

    SEARCH = ("SELECT turn FROM raw_turns, websearch_to_tsquery('english', %s) query"
              " WHERE search @@ query AND conv = %s ORDER BY ts_rank(search, query) DESC LIMIT 10")

    def __init__(self, url: str, conversations: Sequence[dict[str, Any]]) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("CREATE TABLE raw_turns(turn TEXT NOT NULL, conv TEXT NOT NULL, body TEXT NOT NULL,"
                          " search tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, body)) STORED)")
        self.conn.execute("CREATE INDEX raw_turns_search ON raw_turns USING gin(search)")
        rows = sorted(((turn["created_at"], turn["id"], c["id"], f"{turn['speaker']}: {turn['text']}")
                       for c in conversations for turn in turns_of(c)), key=lambda row: row[0])
        for row in rows:  # autocommit: one transaction per turn
            self.conn.execute("INSERT INTO raw_turns(turn, conv, body) VALUES (%s, %s, %s)", row[1:])

    def search(self, question: dict[str, Any]) -> list[str]:
        words = " or ".join(dict.fromkeys(match.group(0).lower() for match in _WORD.finditer(question["question"])))
        rows = self.conn.execute(self.SEARCH, (words, question["conversation"])).fetchall()
        return [row[0] for row in rows]

    def close(self) -> None:
        self.conn.close()


# --- scoring --------------------------------------------------------------------------------------


@dataclass
class Score:
    """Hits of one system over some questions."""

    n: int = 0
    any_hits: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    all_hits: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))

    near_hits: int = 0  # diagnostic: an answering turn, or the turn just before it, in the top 10
    # Questions answered by a whole day's turns: the share of the top 10 said on that day.
    day_questions: int = 0
    day_precision: float = 0.0

    def add(self, ranked: Sequence[str], question: dict[str, Any]) -> None:
        answers = question["answer_turn_ids"]
        self.n += 1
        for k in KS:
            top = set(ranked[:k])
            self.any_hits[k] += any(a in top for a in answers)
            self.all_hits[k] += all(a in top for a in answers)
        self.near_hits += any(a in ranked for a in [*answers, *question["preceding_turn_ids"]])
        if question.get("whole_day"):
            self.day_questions += 1
            self.day_precision += len(set(ranked[:10]) & set(answers)) / 10

    def figures(self, with_all: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n}
        for k in KS:
            out[f"R@{k}"] = round(self.any_hits[k] / self.n, 3) if self.n else None
            if with_all:
                out[f"all@{k}"] = round(self.all_hits[k] / self.n, 3) if self.n else None
        out["R@10_or_preceding"] = round(self.near_hits / self.n, 3) if self.n else None
        if self.day_questions:
            out["whole_day_n"] = self.day_questions
            out["P@10_whole_day"] = round(self.day_precision / self.day_questions, 3)
        return out


@dataclass
class SystemRun:
    scores: dict[str, Score] = field(default_factory=lambda: {c: Score() for c in BUCKETS})
    latencies_ms: list[float] = field(default_factory=list)
    core_latencies_ms: list[float] = field(default_factory=list)  # the three first categories only

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {c: s.figures(with_all=c == "multi-hop") for c, s in self.scores.items()}
        for key, times in (("latency_ms", self.latencies_ms), ("latency_ms_core", self.core_latencies_ms)):
            out[key] = {"p50": round(percentile(times, 50), 3), "p95": round(percentile(times, 95), 3)}
        return out


def timed(search: Callable[[dict[str, Any]], list[str]], question: dict[str, Any]) -> tuple[list[str], float]:
    """The answer and the median time (ms) of :data:`REPEATS` runs of one question."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        ranked = search(question)
        times.append((time.perf_counter() - started) * 1000)
    return ranked, statistics.median(times)


def ask(search: Callable[[dict[str, Any]], list[str]], question: dict[str, Any], run: SystemRun) -> list[str]:
    ranked, ms = timed(search, question)
    if question["category"] in CATEGORIES:
        run.latencies_ms.append(ms)
    if question["category"] in CORE:
        run.core_latencies_ms.append(ms)
    for bucket in question["buckets"]:
        run.scores[bucket].add(ranked, question)
    return ranked


def ours_name(store: str) -> str:
    """The figures' key of ours on ``store``: ``ours`` (SQLite, as before) or ``ours_postgres``."""
    return "ours" if store == "sqlite" else f"ours_{store}"


def measure(groups: Sequence[Sequence[dict[str, Any]]], questions: Sequence[dict[str, Any]],
            workdir: Path, label: str, dump: list[dict[str, Any]], stores: Sequence[str],
            server: PostgresServer | None, embedder: Any = None) -> dict[str, Any]:
    """Each group of conversations goes into one home per store (ours: on PostgreSQL, a fresh
    database too) and one FTS5 table (raw); every question's top 10 of each goes to ``dump``.
    With ``embedder``, ours on SQLite is asked in each recall mode (keyword is ``ours``)."""
    names = system_names(stores, embedder is not None)
    runs = {name: SystemRun() for name in names}
    bulk_ms: list[float] = []
    embedding = {"texts": 0, "append_s": 0.0, "until_embedded_s": 0.0}
    for index, group in enumerate(groups):
        ids = {c["id"] for c in group}
        asked = [q for q in questions if q["conversation"] in ids]
        progress(f"[{label}] home {index + 1}/{len(groups)}: {len(group)} conversation(s), {len(asked)} questions")
        ours = {ours_name(store): Ours(workdir / f"{label}-{store}-{index}", group,
                                       server.fresh_database() if store == "postgres" and server else None,
                                       embedder if store == "sqlite" else None)
                for store in stores}
        if embedder is not None:
            for key in embedding:
                embedding[key] += ours["ours"].embedding[key]
        raw, bulk = RawFts(group), RawFts(group, bulk=True)
        raw_pg = RawPostgres(server.fresh_database(), group) if "postgres" in stores and server else None
        searches: dict[str, Callable[[dict[str, Any]], list[str]]] = {
            **{name: system.search for name, system in ours.items()},
            **({f"ours_{mode}": ours["ours"].searcher(mode) for mode in MODES} if embedder is not None else {}),
            "raw_fts5": raw.search,
            **({"raw_postgres": raw_pg.search} if raw_pg is not None else {})}
        try:
            for question in asked[:WARM_UP]:  # statement caches and pages, for all alike
                for search in (*searches.values(), bulk.search):
                    search(question)
            # Take turns question by question so a noisy moment hits all alike.
            for question in asked:
                dump.append({"mode": label, "id": question["id"], "category": question["category"],
                             "answer_turn_ids": question["answer_turn_ids"],
                             **{name: ask(search, question, runs[name]) for name, search in searches.items()}})
                bulk_ms.append(timed(bulk.search, question)[1])
        finally:
            for system in ours.values():
                system.close()
            raw.close()
            bulk.close()
            if raw_pg is not None:
                raw_pg.close()
    figures: dict[str, Any] = {name: run.figures() for name, run in runs.items()}
    for store in stores:
        figures[f"p95_ratio{ours_name(store)[4:]}"] = round(
            figures[ours_name(store)]["latency_ms"]["p95"] / figures["raw_fts5"]["latency_ms"]["p95"], 3)
    if "raw_postgres" in figures:  # ours on PostgreSQL beside the same query written by hand
        figures["p95_ratio_postgres_to_raw_postgres"] = round(
            figures["ours_postgres"]["latency_ms"]["p95"] / figures["raw_postgres"]["latency_ms"]["p95"], 3)
    if embedder is not None:
        for mode in MODES:
            figures[f"p95_ratio_{mode}_to_keyword"] = round(
                figures[f"ours_{mode}"]["latency_ms"]["p95"] / figures["ours"]["latency_ms"]["p95"], 3)
        figures["embedding"] = {**{k: round(v, 3) for k, v in embedding.items()},
                                "texts_per_s": round(embedding["texts"] / embedding["until_embedded_s"], 1)}
    figures["raw_fts5_one_segment_latency_ms"] = {"p50": round(percentile(bulk_ms, 50), 3),
                                                  "p95": round(percentile(bulk_ms, 95), 3)}
    return figures


# --- report ---------------------------------------------------------------------------------------


SHORT = {"ours": "ours", "ours_postgres": "ours pg", "raw_fts5": "fts5", "raw_postgres": "pg raw",
         "ours_semantic": "semantic", "ours_hybrid": "hybrid"}
MODES = ("semantic", "hybrid")  # besides keyword (``ours``), with an embedder


def system_names(stores: Sequence[str], semantic: bool = False) -> list[str]:
    """Ours on each store (and, with an embedder, ours on SQLite by meaning and hybrid), raw
    FTS5, and raw PostgreSQL when PostgreSQL is measured."""
    return [*(ours_name(store) for store in stores), *([f"ours_{m}" for m in MODES] if semantic else []),
            "raw_fts5", *(["raw_postgres"] if "postgres" in stores else [])]


def print_table(title: str, figures: dict[str, Any], stores: Sequence[str]) -> None:
    names = system_names(stores, "embedding" in figures)
    print(f"\n{title}")
    print(f"{'category':<15}{'n':>5} | " + " | ".join(f"{SHORT[name] + ' R@1':>11}{'R@5':>7}{'R@10':>7}"
                                                      for name in names))
    for category in BUCKETS:
        if not figures["raw_fts5"][category]["n"]:
            continue
        cells = " | ".join("".join(f"{figures[name][category][f'R@{k}']:>{11 if k == 1 else 7}.1%}" for k in KS)
                           for name in names)
        print(f"{category:<15}{figures['raw_fts5'][category]['n']:>5} | {cells}")
    cells = " | ".join("".join(f"{figures[name]['multi-hop'][f'all@{k}']:>{11 if k == 1 else 7}.1%}" for k in KS)
                       for name in names)
    n = figures["raw_fts5"]["multi-hop"]["n"]
    print(f"{'multi: all':<15}{n:>5} | {cells}   (every answering turn in the top k)")
    for category in (DATE, *(f"date:{k}" for k in DATE_KINDS)):
        if "P@10_whole_day" in figures["raw_fts5"][category]:
            shares = "  ".join(f"{SHORT[name]} {figures[name][category]['P@10_whole_day']:.1%}" for name in names)
            print(f"{category}: share of the top 10 said on the day asked about, over the"
                  f" {figures['raw_fts5'][category]['whole_day_n']} whole-day questions: {shares}")
    near = "  ".join(f"{c} " + "/".join(f"{figures[name][c]['R@10_or_preceding']:.1%}" for name in names)
                     for c in BUCKETS if figures["raw_fts5"][c]["n"])
    print(f"diagnostic, answering turn OR the turn before it in the top 10 ({'/'.join(SHORT[n] for n in names)}):"
          f" {near}")
    for name in names:
        lat = figures[name]["latency_ms"]
        core = figures[name]["latency_ms_core"]
        print(f"latency {name:<13} p50 {lat['p50']:.3f} ms   p95 {lat['p95']:.3f} ms"
              f"   (core: p50 {core['p50']:.3f} ms   p95 {core['p95']:.3f} ms)")
    for store in stores:
        print(f"p95 ratio {SHORT[ours_name(store)]} / raw FTS5: {figures[f'p95_ratio{ours_name(store)[4:]}']:.2f}"
              " (target <= 1.5)")
    if "p95_ratio_postgres_to_raw_postgres" in figures:
        print(f"p95 ratio ours pg / raw PostgreSQL: {figures['p95_ratio_postgres_to_raw_postgres']:.2f}"
              " (target <= 1.5)")
    for mode in MODES if "embedding" in figures else ():
        print(f"p95 ratio {mode} / keyword: {figures[f'p95_ratio_{mode}_to_keyword']:.2f}")
    if "embedding" in figures:
        e = figures["embedding"]
        print(f"import with embedding: {e['texts']} turns appended in {e['append_s']:.1f} s, every vector stored"
              f" after {e['until_embedded_s']:.1f} s: {e['texts_per_s']:.0f} turns/s")
    lat = figures["raw_fts5_one_segment_latency_ms"]
    print(f"diagnostic, raw FTS5 loaded in one transaction (one segment): p50 {lat['p50']:.3f} ms"
          f"   p95 {lat['p95']:.3f} ms")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Recall quality of history search vs raw FTS5 on our own set.")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 4 conversations (2 of short turns, 1 of long turns, 1 with entity chains)")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with conversations.jsonl, questions.jsonl")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the homes here (default: a temp folder)")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every question's top 10 (ours and raw FTS5, both modes) here as JSON Lines")
    parser.add_argument("--keyword-only", action="store_true",
                        help="do not measure recall by meaning (default: measured when the [semantic] extra is here)")
    parser.add_argument("--one-home-only", action="store_true",
                        help="measure mode (a) only, every conversation in one home (half the time)")
    parser.add_argument("--store", default=None,
                        help="sqlite, postgres or sqlite,postgres (default: both when PostgreSQL and the"
                             " [postgres] extra are here, else sqlite)")
    args = parser.parse_args(argv)
    missing = missing_server()
    if args.store is None:
        args.store = "sqlite" if missing else "sqlite,postgres"
        if missing:
            progress(f"SQLite only: {missing}")
    args.stores = [s.strip() for s in args.store.split(",")]
    if not args.stores or not set(args.stores) <= {"sqlite", "postgres"}:
        parser.error("--store takes sqlite, postgres or sqlite,postgres")
    if "postgres" in args.stores and missing:
        parser.error(f"--store postgres: {missing}")
    return args


def embedder_or_none(wanted: bool) -> Any:
    """The [semantic] extra's embedder, or None (not wanted, or the extra is not installed)."""
    if not wanted:
        return None
    from fermix_memory import SemanticRecallUnavailable, load_embedder

    try:
        return load_embedder()
    except SemanticRecallUnavailable as exc:
        progress(f"keyword only: {exc}")
        return None


@contextmanager
def server_for(stores: Sequence[str]) -> Iterator[PostgresServer | None]:
    """A throwaway PostgreSQL server when ``stores`` names it, else None."""
    if "postgres" not in stores:
        yield None
        return
    with running_server() as server:
        yield server


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    conversations, questions = load_set(args.data, args.quick)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fermix-recall-quality-"))
    workdir.mkdir(parents=True, exist_ok=True)
    dump: list[dict[str, Any]] = []
    try:
        with server_for(args.stores) as server:
            embedder = embedder_or_none(not args.keyword_only)
            one_home = measure([conversations], questions, workdir, "one-home", dump, args.stores, server, embedder)
            alone = None if args.one_home_only else measure(
                [[c] for c in conversations], questions, workdir, "alone", dump, args.stores, server, embedder)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.dump is not None:
        args.dump.write_text("".join(json.dumps(row) + "\n" for row in dump), encoding="utf-8")
    turns = sum(len(turns_of(c)) for c in conversations)
    paraphrases = sum(q["category"] == PARAPHRASE for q in questions)
    print(f"recall quality: {len(conversations)} conversations, {turns} turns,"
          f" {len(questions) - paraphrases} questions + {paraphrases} paraphrases"
          f"{' (quick)' if args.quick else ''}")
    print_table("(a) all conversations in ONE home", one_home, args.stores)
    if alone is not None:
        print_table("(b) each conversation alone in its own home", alone, args.stores)
    report = {"benchmark": "recall_quality", "quick": args.quick, "stores": args.stores,
              "conversations": len(conversations), "as_of_passed": recall_takes_as_of(),
              "by_category": {c: sum(q["category"] == c for q in questions) for c in (*CATEGORIES, PARAPHRASE)},
              "turns": turns, "questions": len(questions) - paraphrases, "paraphrases": paraphrases, "limit": 10,
              "one_home": one_home, "alone": alone}
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
