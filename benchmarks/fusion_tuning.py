"""Choose history recall's fusion on our own evaluation set, with a held-out half (ADR-0076).

Hybrid recall (``mode="hybrid"``) fuses the keyword list and the list by meaning of history
hits by reciprocal rank: ``1 / (k + rank)`` from the keyword list, ``w / (k + rank)`` from the
vector list (``application/fusion.py``: ``FUSION_K``, ``SEMANTIC_WEIGHT``). This script:

1. builds ONE home holding every conversation of ``benchmarks/recall_eval/`` as
   ``benchmarks/recall_quality.py`` does (same owner, conversation and sender per turn, appended
   in time order) with the ``[semantic]`` extra's embedder, and asks every question of
   ``questions.jsonl`` and ``paraphrases.jsonl`` (whatever they hold, categories read from the
   data) TWICE: ``mode="keyword"`` and ``mode="semantic"``, ``source="history"``, ``limit=25``.
   The lists go to a cache file (``--cache``): a rerun only asks the questions the cache lacks,
   and reuses the home beside it while ``conversations.jsonl`` is unchanged;
2. fuses the two lists offline with the product's own ``fuse_kind`` (the product fuses lists as
   deep as the ``limit`` asked, 10 here: ``--depth``) for every constant k in
   :data:`KS_GRID` and vector weight w in :data:`WEIGHTS`;
3. chooses (k, w) on the questions of the ODD conversations (conv01, conv03, …) by R@5 over
   every category but paraphrases, ties broken by R@1 then R@10, then by the smaller move from
   k=60, w=1, and reports on the EVEN conversations (held out), per category (and
   ``long-turns``, ``all``), R@1/5/10 (a hit when ANY answering turn is in the top 10) of:
   ``chosen``; ``current`` (k=60, w=1, the textbook constants); ``before`` (k=60, w=1 and a
   reply ranked on its own score, the fusion before ADR-0076); ``product`` (the constants
   ``application/fusion.py`` holds now); ``keyword`` and ``semantic`` alone.

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.

Run (from the repository root)::

    .venv/bin/python benchmarks/fusion_tuning.py --cache /tmp/fusion_lists.json
    .venv/bin/python benchmarks/fusion_tuning.py --cache /tmp/fusion_lists.json --quick   # 3 conversations
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from append_and_recall import progress
from recall_quality import DATA, LONG_TURNS, Ours, load_set

from fermix_memory import MemorySystem
from fermix_memory.application.commands import Recall
from fermix_memory.application.fusion import FUSION_K, SEMANTIC_WEIGHT, fuse_kind, ranks
from fermix_memory.application.query_ports import MessageHit
from fermix_memory.domain.messages import Message
from fermix_memory.domain.scopes import history_filter
from fermix_memory.domain.values import ConversationKey, Role

AGENT = "companion"
KS_GRID = (1, 2, 3, 5, 10, 20, 30, 60)
WEIGHTS = (0.25, 0.4, 0.5, 0.6, 0.75, 1.0, 1.25, 1.5)
CURRENT = (60, 1.0)
AT = (1, 5, 10)
GATHERED = 25
CACHE_VERSION = 1

# --- gathering the two lists, once -------------------------------------------------------------


def fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def cache_key(question: dict[str, Any]) -> str:
    return f"{question['id']}|{question['conversation']}|{question['question']}"


def read_cache(path: Path) -> dict[str, Any]:
    try:
        cache: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": CACHE_VERSION, "lists": {}}
    return cache if cache.get("version") == CACHE_VERSION else {"version": CACHE_VERSION, "lists": {}}


class Home:
    """The one home of every conversation, kept beside the cache (``<cache>.home``) while
    ``conversations.jsonl`` is unchanged, so a rerun with new questions embeds nothing."""

    def __init__(self, folder: Path, conversations: Sequence[dict[str, Any]], embedder: Any, stamp: str) -> None:
        mapping = folder / "turns.json"
        if mapping.exists() and json.loads(mapping.read_text())["stamp"] == stamp:
            saved = json.loads(mapping.read_text())
            self.memory = MemorySystem.open(folder / "home", embedder=embedder)
            self.turn_of = {int(k): v for k, v in saved["turn_of"].items()}
            self.where = {k: tuple(v) for k, v in saved["where"].items()}
            progress("fusion: the home beside the cache is reused")
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        progress(f"fusion: storing and embedding {sum(1 for _ in turns(conversations))} turns")
        ours = Ours(folder / "home", conversations, embedder=embedder)
        progress(f"fusion: embedded in {ours.embedding['until_embedded_s']:.0f} s")
        self.memory, self.turn_of, self.where = ours.memory, ours.turn_of, ours.where
        mapping.write_text(json.dumps({"stamp": stamp, "turn_of": self.turn_of, "where": self.where}))

    def lists(self, question: dict[str, Any]) -> dict[str, list[list[Any]]]:
        """The two lists hybrid recall fuses (``application/recall.py``: ``search_history`` and
        the search by meaning, each ``GATHERED`` deep), asked of the composition's own parts:
        recall's date and name hops come after this fusion and are not measured here."""
        owner, chat = self.where[question["conversation"]]
        cmd = self.memory._command(Recall, dict(query=question["question"], agent_id=AGENT, owner_id=owner,
                                                conversation=chat, scope="current", source="history"))
        where = history_filter(cmd.reader, cmd.scope)
        app = self.memory._app
        assert where is not None and app.semantic is not None
        vector = app.semantic.embed_query(cmd.query)
        found = {"keyword": app.queries.search_history(cmd.query, where, GATHERED),
                 "semantic": [] if vector is None else app.semantic.history(vector, where, GATHERED)}
        return {mode: [[hit.message.id, self.turn_of.get(hit.message.id, "?"), hit.context_of, hit.similarity]
                       for hit in hits] for mode, hits in found.items()}


def turns(conversations: Sequence[dict[str, Any]]) -> Any:
    return (turn for c in conversations for session in c["sessions"] for turn in session["turns"])


def gather(questions: Sequence[dict[str, Any]], conversations: Sequence[dict[str, Any]], cache_path: Path,
           quick: bool) -> dict[str, Any]:
    cache = read_cache(cache_path)
    missing = [q for q in questions if cache_key(q) not in cache["lists"]]
    progress(f"fusion: {len(questions) - len(missing)} questions' lists cached, {len(missing)} to ask")
    if missing:
        from fermix_memory import load_embedder

        stamp = fingerprint(DATA / "conversations.jsonl") + ("-quick" if quick else "")
        home = Home(cache_path.with_name(cache_path.name + (".quick" if quick else "") + ".home"),
                    conversations, load_embedder(), stamp)
        try:
            for i, question in enumerate(missing, 1):
                cache["lists"][cache_key(question)] = home.lists(question)
                if i % 200 == 0 or i == len(missing):
                    progress(f"fusion: asked {i}/{len(missing)}")
                    cache_path.write_text(json.dumps(cache), encoding="utf-8")
        finally:
            home.memory.close()
    return cache


# --- fusing offline with the product's function ------------------------------------------------

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


def hits_of(rows: Sequence[Sequence[Any]]) -> list[MessageHit]:
    """Cached rows back as ``MessageHit``s: the fields fusion reads (id, reply of, similarity);
    the turn id rides in ``content``."""
    where = ConversationKey(channel="chat", chat_id="c")
    return [MessageHit(message=Message(id=row[0], agent_id=AGENT, owner_id="o", conversation=where, sender="s",
                                       role=Role.USER, kind="text", content=row[1], created_at=_EPOCH),
                       rank=0.0, snippet="", context_of=row[2], similarity=row[3]) for row in rows]


def message_id(hit: MessageHit) -> int:
    return hit.message.id


def fused_turns(lists: dict[str, list[MessageHit]], k: int, w: float, depth: int, limit: int = 10) -> list[str]:
    """The product's ``fuse_kind`` at constant ``k`` and vector weight ``w``: the turn ids, best first."""
    hits = fuse_kind(lists["keyword"][:depth], lists["semantic"][:depth], limit, message_id, weight=w, k=k)
    return [hit.message.content for hit in hits]


def before_turns(lists: dict[str, list[MessageHit]], depth: int, limit: int = 10) -> list[str]:
    """The fusion before ADR-0076 (k=60, w=1, a reply ranked on its own score: what the vector
    list adds to its question does not move it), for the figures' "before" column."""
    scores: dict[int, float] = {}
    hits: dict[int, MessageHit] = {}
    for hit, rank in zip(lists["keyword"][:depth], ranks(lists["keyword"][:depth]), strict=True):
        hits.setdefault(hit.message.id, hit)
        scores[hit.message.id] = 1.0 / (60 + rank)
    for rank, hit in enumerate(lists["semantic"][:depth], 1):
        hits.setdefault(hit.message.id, hit)
        scores[hit.message.id] = scores.get(hit.message.id, 0.0) + 1.0 / (60 + rank)
    order = {key: i for i, key in enumerate(hits)}
    return [hits[key].message.content for key in sorted(hits, key=lambda key: (-scores[key], order[key]))[:limit]]


def recall_at(rows: Sequence[tuple[list[str], set[str]]]) -> dict[str, float]:
    n = len(rows) or 1
    return {f"R@{k}": round(sum(bool(answers & set(got[:k])) for got, answers in rows) / n, 4) for k in AT}


# --- choosing on one half, reporting on the other ---------------------------------------------


def half_of(question: dict[str, Any]) -> str:
    """``choose`` for the odd conversations (conv01, conv03, …), ``held_out`` for the even ones."""
    number = int("".join(ch for ch in question["conversation"] if ch.isdigit()) or 0)
    return "choose" if number % 2 else "held_out"


def buckets_of(question: dict[str, Any], long_turns: set[str]) -> list[str]:
    """The question's category (read from the data), ``long-turns`` too for a conversation of
    long turns (the paraphrases apart, as in recall_quality.py), and ``all`` but paraphrases."""
    category = question["category"]
    if category == "paraphrase":
        return [category]
    return [category, *([LONG_TURNS] if question["conversation"] in long_turns else []), "all"]


Prepared = list[tuple[dict[str, list[MessageHit]], set[str], list[str]]]


def score(prepared: Prepared, systems: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Per system, per bucket: R@1/5/10 and the number of questions."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, rank in systems.items():
        per: dict[str, list[tuple[list[str], set[str]]]] = {}
        for lists, answers, buckets in prepared:
            got = rank(lists)
            for bucket in buckets:
                per.setdefault(bucket, []).append((got, answers))
        out[name] = {b: {**recall_at(rows), "n": len(rows)} for b, rows in sorted(per.items())}
    return out


def choose(prepared: Prepared, depth: int) -> tuple[tuple[int, float], list[dict[str, Any]]]:
    """The (k, w) of the best R@5 over ``all`` on ``prepared`` (ties: R@1, then R@10, then the
    nearest to the current), and the whole grid."""
    grid: list[dict[str, Any]] = []
    for k in KS_GRID:
        for w in WEIGHTS:
            rows = [(fused_turns(lists, k, w, depth), answers) for lists, answers, b in prepared if "all" in b]
            grid.append({"k": k, "w": w, **recall_at(rows)})
    best = max(grid, key=lambda g: (g["R@5"], g["R@1"], g["R@10"],
                                    -abs(KS_GRID.index(g["k"]) - KS_GRID.index(CURRENT[0])) - abs(g["w"] - CURRENT[1])))
    return (best["k"], best["w"]), grid


def prepare(questions: Sequence[dict[str, Any]], cache: dict[str, Any], long_turns: set[str]) -> dict[str, Prepared]:
    halves: dict[str, Prepared] = {"choose": [], "held_out": []}
    for q in questions:
        cached = cache["lists"][cache_key(q)]
        lists = {mode: hits_of(cached[mode]) for mode in ("keyword", "semantic")}
        halves[half_of(q)].append((lists, set(q["answer_turn_ids"]), buckets_of(q, long_turns)))
    return halves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "fusion_lists.json",
                        help="where the questions' two lists are kept (and the home, beside it)")
    parser.add_argument("--quick", action="store_true", help="3 conversations (one of long turns)")
    parser.add_argument("--depth", type=int, default=10,
                        help="how deep each list is fused (the product: as deep as the limit asked, 10)")
    args = parser.parse_args()
    conversations, questions = load_set(DATA, args.quick)
    cache = gather(questions, conversations, args.cache, args.quick)
    long_turns = {c["id"] for c in conversations if c.get("style") == LONG_TURNS}
    halves = prepare(questions, cache, long_turns)
    chosen, grid = choose(halves["choose"], args.depth)
    progress(f"fusion: chosen on the odd conversations: k={chosen[0]}, w={chosen[1]}")
    systems = {
        "chosen": lambda lists: fused_turns(lists, chosen[0], chosen[1], args.depth),
        "current": lambda lists: fused_turns(lists, CURRENT[0], CURRENT[1], args.depth),
        "before": lambda lists: before_turns(lists, args.depth),
        "product": lambda lists: fused_turns(lists, FUSION_K, SEMANTIC_WEIGHT, args.depth),
        "keyword": lambda lists: [h.message.content for h in lists["keyword"][:10]],
        "semantic": lambda lists: [h.message.content for h in lists["semantic"][:10]],
    }
    held_out = score(halves["held_out"], systems)
    choosing = score(halves["choose"], systems)
    print_table(held_out)
    print(json.dumps({"chosen": {"k": chosen[0], "w": chosen[1]}, "current": {"k": CURRENT[0], "w": CURRENT[1]},
                      "product": {"k": FUSION_K, "w": SEMANTIC_WEIGHT}, "depth": args.depth,
                      "chosen_by": "R@5 on all (odd conversations), ties R@1 then R@10",
                      "questions": {h: len(p) for h, p in halves.items()},
                      "held_out": held_out, "choose_half": choosing, "grid_choose_half": grid}))


def print_table(figures: dict[str, dict[str, dict[str, float]]]) -> None:
    """The held-out half per category, as a Markdown table (stderr)."""
    progress("| category | n | " + " | ".join(f"{s} R@1/5/10" for s in figures) + " |")
    for bucket, first in figures["chosen"].items():
        cells = " | ".join("/".join(f"{figures[s][bucket][f'R@{k}']:.3f}" for k in AT) for s in figures)
        progress(f"| {bucket} | {first['n']:.0f} | {cells} |")


if __name__ == "__main__":
    sys.exit(main())
