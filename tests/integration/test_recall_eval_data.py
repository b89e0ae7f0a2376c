"""Integrity of the committed recall evaluation set (benchmarks/recall_eval); no benchmark run."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "recall_eval"
CORE = {"single-hop", "multi-hop", "temporal"}
CATEGORIES = {*CORE, "date", "entity-hop"}
DATE_KINDS = {"absolute", "relative", "day"}


def _jsonl(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def conversations() -> list[dict[str, Any]]:
    return _jsonl("conversations.jsonl")


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    return _jsonl("questions.jsonl")


def _turns(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    return [turn for session in conversation["sessions"] for turn in session["turns"]]


def test_conversations_meet_the_minimums(conversations: list[dict[str, Any]]) -> None:
    assert len(conversations) >= 10
    for conversation in conversations:
        names = [p["name"] for p in conversation["participants"]]
        assert len(names) >= 2 and len(set(names)) == len(names)
        assert len(_turns(conversation)) >= 300
        dates = [session["date"] for session in conversation["sessions"]]
        assert len(dates) >= 5 and dates == sorted(dates)
        assert {turn["speaker"] for turn in _turns(conversation)} <= set(names)


def test_some_conversations_are_said_at_length(conversations: list[dict[str, Any]],
                                               questions: list[dict[str, Any]]) -> None:
    """Voice transcripts and long-form writers: turns of 25-40 words on average, with questions
    that name who said it, beside the short-turn chats (which stay as they were)."""
    long = [c for c in conversations if c.get("style") == "long-turns"]
    assert len(long) >= 3 and conversations[:12] == [c for c in conversations if c.get("style") is None][:12]
    for conversation in long:
        words = [len(turn["text"].split()) for turn in _turns(conversation)]
        assert 25 <= sum(words) / len(words) <= 40, conversation["id"]
        asked = [q for q in questions if q["conversation"] == conversation["id"] and q["about"]]
        assert len(asked) >= 40 and all(q["about"] in q["question"] for q in asked)


def test_ids_are_unique(conversations: list[dict[str, Any]], questions: list[dict[str, Any]]) -> None:
    turn_ids = [turn["id"] for c in conversations for turn in _turns(c)]
    assert len(turn_ids) == len(set(turn_ids))
    assert len({c["id"] for c in conversations}) == len(conversations)
    assert len({q["id"] for q in questions}) == len(questions)


def test_every_question_points_at_existing_turns_of_its_conversation(
    conversations: list[dict[str, Any]], questions: list[dict[str, Any]]
) -> None:
    session_day = {turn["id"]: (c["id"], session["date"])
                   for c in conversations for session in c["sessions"] for turn in session["turns"]}
    for q in questions:
        assert q["category"] in CATEGORIES
        assert q["question"].strip() and q["answer"].strip()
        ids = q["answer_turn_ids"]
        assert ids and len(ids) == len(set(ids))
        for turn_id in ids:
            assert session_day[turn_id][0] == q["conversation"], q["id"]
        if q["category"] == "multi-hop":
            assert len(ids) >= 2
        if q["category"] in ("temporal", "date"):
            assert q["answer_date"] <= session_day[ids[0]][1]
        if q["category"] == "entity-hop":
            assert len(ids) == 1 and len(q["via_turn_ids"]) == 1, q["id"]
            via = q["via_turn_ids"][0]
            assert session_day[via][0] == q["conversation"] and session_day[via][1] < session_day[ids[0]][1]


def test_question_counts_meet_the_minimums(questions: list[dict[str, Any]]) -> None:
    by_category = Counter(q["category"] for q in questions)
    assert len(questions) >= 1400
    assert set(by_category) == CATEGORIES and min(by_category.values()) >= 50
    assert 200 <= by_category["date"] <= 300 and 120 <= by_category["entity-hop"] <= 200
    kinds = Counter(q["date_kind"] for q in questions if q["category"] == "date")
    assert set(kinds) == DATE_KINDS and min(kinds.values()) >= 40
    assert len({q["kind"] for q in questions if q["category"] == "entity-hop"}) >= 6


def test_the_first_lines_are_what_they_were(conversations: list[dict[str, Any]],
                                            questions: list[dict[str, Any]]) -> None:
    """The set grew by appending: the first 15 conversations and 860 questions (the three core
    categories) come first and are the only ones of their conversations' core questions."""
    assert [c["id"] for c in conversations[:15]] == [f"conv{n:02d}" for n in range(1, 16)]
    assert all(q["category"] in CORE for q in questions[:860])
    assert [q["id"] for q in questions] == [f"q{n:04d}" for n in range(1, len(questions) + 1)]
    old = {c["id"] for c in conversations[:15]}
    assert not any(q["category"] in CORE and q["conversation"] in old for q in questions[860:])


def _day(stamp: str) -> date:
    return datetime.fromisoformat(stamp).astimezone(UTC).date()


def test_date_questions_name_the_day_of_their_answer(conversations: list[dict[str, Any]],
                                                     questions: list[dict[str, Any]]) -> None:
    """``answer_date`` is the day the answering turn was said on or the day its event happened
    (the temporal question about the same turn knows it); relative ones carry an ``as_of`` after
    the answering turn; whole-day ones are answered by every turn said that day."""
    said = {turn["id"]: datetime.fromisoformat(turn["created_at"]) for c in conversations for turn in _turns(c)}
    by_day = Counter((turn["id"].split(":")[0], _day(turn["created_at"])) for c in conversations for turn in _turns(c))
    event_day = {q["answer_turn_ids"][0]: q["answer_date"] for q in questions if q["category"] == "temporal"}
    dated = [q for q in questions if q["category"] == "date"]
    for q in dated:
        assert q["date_kind"] in DATE_KINDS, q["id"]
        day = date.fromisoformat(q["answer_date"])
        if q["date_kind"] == "relative":
            as_of = datetime.fromisoformat(q["as_of"])
            assert as_of.utcoffset() == timedelta(0) and all(as_of > said[t] for t in q["answer_turn_ids"])
            assert timedelta(0) <= as_of.date() - day <= timedelta(days=13), q["id"]
        else:
            assert "as_of" not in q, q["id"]
        if q.get("whole_day"):
            assert all(_day(said[t].isoformat()) == day for t in q["answer_turn_ids"]), q["id"]
            assert len(q["answer_turn_ids"]) == by_day[(q["conversation"], day)], q["id"]
        else:
            assert q["date_kind"] != "day" and len(q["answer_turn_ids"]) == 1, q["id"]
            turn = q["answer_turn_ids"][0]
            assert q["answer_date"] in (said[turn].date().isoformat(), event_day[turn]), q["id"]
            assert q["about"] in q["question"], q["id"]


def test_committed_files_are_the_generator_output() -> None:
    spec = importlib.util.spec_from_file_location("recall_eval_generate", DATA / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path, modules = list(sys.path), set(sys.modules)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
        conversations, questions = module.generate()
    finally:  # the generator puts its folder on the path to import its banks; undo that
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            del sys.modules[name]
    assert module.as_jsonl(conversations) == (DATA / "conversations.jsonl").read_text(encoding="utf-8")
    assert module.as_jsonl(questions) == (DATA / "questions.jsonl").read_text(encoding="utf-8")


# --- the hand-written paraphrase questions (paraphrases.jsonl) -------------------------------------

STOP_WORDS = frozenset(re.findall(r"\S+", """a about after all always am an and any anything are as at be because
been being but by can
could did do does doing don't for from get go going got had has have he her hers him his how i i'm if in is it it's
its just me most my no not now of on one only or our out she so some than that that'd the their them then there they
this those to too up was we were what when where which who why will with would yes yep you your"""))


def _content_stems(text: str) -> set[str]:
    """The text's content words, crudely stemmed (so "raised" meets "raise", "lessons" "lesson")."""
    words = {w for w in re.findall(r"[a-z']+", text.lower()) if w not in STOP_WORDS and len(w) > 1}
    return {re.sub(r"(ing|ed|es|s|ly|er)$", "", w.removesuffix("'s")) for w in words}


def test_paraphrases_point_at_turns_that_share_no_content_word_with_them(
    conversations: list[dict[str, Any]], questions: list[dict[str, Any]]
) -> None:
    paraphrases = _jsonl("paraphrases.jsonl")
    assert len(paraphrases) >= 40
    assert len({p["id"] for p in paraphrases}) == len(paraphrases)
    assert len({(p["conversation"], p["question"]) for p in paraphrases}) == len(paraphrases)
    text_of = {turn["id"]: (c["id"], turn["text"]) for c in conversations for turn in _turns(c)}
    original = {q["id"]: q for q in questions}
    for p in paraphrases:
        assert p["category"] == "paraphrase" and p["question"].strip() and p["answer"].strip()
        assert original[p["paraphrase_of"]]["answer_turn_ids"] == p["answer_turn_ids"], p["id"]
        assert original[p["paraphrase_of"]]["conversation"] == p["conversation"], p["id"]
        for turn_id in p["answer_turn_ids"]:
            conversation, text = text_of[turn_id]
            assert conversation == p["conversation"], p["id"]
            shared = _content_stems(p["question"]) & _content_stems(text)
            assert not shared, (p["id"], shared)


def test_entity_hop_questions_share_no_content_word_with_their_fact_turn(
    conversations: list[dict[str, Any]], questions: list[dict[str, Any]]
) -> None:
    """The fact turn speaks of the name alone; the question asks about the relation or thing
    without the name: only the link turn (``via_turn_ids``) joins them."""
    text_of = {turn["id"]: turn["text"] for c in conversations for turn in _turns(c)}
    hops = [q for q in questions if q["category"] == "entity-hop"]
    assert len({(q["conversation"], q["question"]) for q in hops}) == len(hops)
    for q in hops:
        fact, link = text_of[q["answer_turn_ids"][0]], text_of[q["via_turn_ids"][0]]
        assert not _content_stems(q["question"]) & _content_stems(fact), q["id"]
        assert q["entity"] in fact and q["entity"] in link and q["entity"] not in q["question"], q["id"]
        assert q["about"] in q["question"] and q["about"] not in fact, q["id"]
