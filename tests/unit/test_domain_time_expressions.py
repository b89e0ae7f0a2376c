"""The date parser: question phrases become day windows, stored turns their mentioned days."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from fermix_memory.domain.time_expressions import DateReading, DayWindow, mentioned_days, read_dates

THURSDAY = datetime(2024, 5, 16, 12, 0, tzinfo=UTC)  # Thursday 16 May 2024
EVAL = Path(__file__).resolve().parents[2] / "benchmarks" / "recall_eval"


def d(text: str) -> date:
    return date.fromisoformat(text)


def w(first: str, last: str | None = None) -> DayWindow:
    return DayWindow(d(first), d(last or first))


QUESTIONS = [
    # absolute
    ("what did we talk about on 3 May?", [w("2024-05-03")], "what did we talk about?", True),
    ("What happened on May 3rd?", [w("2024-05-03")], "What happened?", True),
    ("on the 3rd of May 2023 we met", [w("2023-05-03")], "we met", False),
    ("May 3, 2022", [w("2022-05-03")], "", False),
    ("notes from 2024-02-26", [w("2024-02-26")], "notes", False),
    ("26/02/2024", [w("2024-02-26")], "", False),
    ("02/26/2024", [w("2024-02-26")], "", False),  # the first number cannot be a month's
    ("03/04/2024", [w("2024-04-03")], "", False),  # day first
    ("03/12/2024", [w("2024-12-03")], "", False),
    ("12/26/2024", [w("2024-12-26")], "", False),
    ("05/13/2024", [w("2024-05-13")], "", False),
    ("26.02.24", [w("2024-02-26")], "", False),
    ("26.02.69", [w("2069-02-26")], "", False),  # two-digit years: 20yy below 70, else 19yy
    ("26.02.70", [w("1970-02-26")], "", False),
    ("What did I do in January 2022?", [w("2022-01-01", "2022-01-31")], "What did I do?", False),
    ("in March", [w("2024-03-01", "2024-03-31")], "", True),
    ("in June", [w("2023-06-01", "2023-06-30")], "", True),  # the latest June begun by the anchor
    ("in May", [w("2024-05-01", "2024-05-31")], "", True),
    ("June was hot", [w("2023-06-01", "2023-06-30")], "was hot", True),  # a bare full month name
    ("July was hot", [w("2023-07-01", "2023-07-31")], "was hot", True),
    ("April was wet", [w("2024-04-01", "2024-04-30")], "was wet", True),
    ("Sept was hot", [], "Sept was hot", False),  # a bare short name: no month
    ("Jan was cold", [], "Jan was cold", False),
    ("March was cold", [], "March was cold", False),  # "march" is a verb too
    ("during 2023", [w("2023-01-01", "2023-12-31")], "", False),
    ("mid-May", [w("2024-05-11", "2024-05-20")], "", True),
    ("early March 2021", [w("2021-03-01", "2021-03-10")], "", False),
    ("late February 2024", [w("2024-02-21", "2024-02-29")], "", False),
    ("on the 20th", [w("2024-04-20")], "", True),
    ("on the 3rd", [w("2024-05-03")], "", True),
    ("the week of 15 January", [w("2024-01-15", "2024-01-21")], "", True),
    ("during the week of 2024-01-17", [w("2024-01-15", "2024-01-21")], "", False),
    ("Dec 25", [w("2023-12-25")], "", True),
    ("29 February", [w("2024-02-29")], "", True),
    # weekdays
    ("What did we do on Monday?", [w("2024-05-13")], "What did we do?", True),
    ("on Thursday", [w("2024-05-16")], "", True),  # a question's plain weekday: on or before
    ("last Thursday", [w("2024-05-09")], "", True),
    ("last Friday", [w("2024-05-10")], "", True),
    ("next Monday", [w("2024-05-20")], "", True),
    ("this Monday", [w("2024-05-13")], "", True),
    ("this coming Saturday", [w("2024-05-18")], "", True),
    ("what will we do on Saturday?", [w("2024-05-18")], "what will we do?", True),
    ("see you on 20 May?", [w("2024-05-20")], "see you?", True),
    # the clause is read up to 80 characters back for a future word
    ("gonna " + "x" * 73 + " Saturday", [w("2024-05-18")], "gonna " + "x" * 73, True),
    ("gonna " + "x" * 74 + " Saturday", [w("2024-05-11")], "gonna " + "x" * 74, True),
    # relative days
    ("yesterday", [w("2024-05-15")], "", True),
    ("today", [w("2024-05-16")], "", True),
    ("tonight", [w("2024-05-16")], "", True),
    ("the day before yesterday", [w("2024-05-14")], "", True),
    ("tomorrow", [w("2024-05-17")], "", True),
    ("last night", [w("2024-05-15")], "", True),
    ("three days ago", [w("2024-05-13")], "", True),
    ("3 days ago", [w("2024-05-13")], "", True),
    ("a couple of days ago", [w("2024-05-13", "2024-05-14")], "", True),
    ("a few days ago", [w("2024-05-11", "2024-05-14")], "", True),
    ("a week ago", [w("2024-05-06", "2024-05-12")], "", True),
    ("two weeks ago", [w("2024-04-29", "2024-05-05")], "", True),
    ("2 weeks ago", [w("2024-04-29", "2024-05-05")], "", True),
    ("two months ago", [w("2024-03-01", "2024-03-31")], "", True),
    ("a year ago", [w("2023-01-01", "2023-12-31")], "", True),
    # weeks, weekends, months, years
    ("last weekend", [w("2024-05-11", "2024-05-12")], "", True),
    ("this weekend", [w("2024-05-18", "2024-05-19")], "", True),
    ("over the weekend", [w("2024-05-11", "2024-05-12")], "", True),
    ("What happened last week?", [w("2024-05-06", "2024-05-12")], "What happened?", True),
    ("this week", [w("2024-05-13", "2024-05-19")], "", True),
    ("next week", [w("2024-05-20", "2024-05-26")], "", True),
    ("the past week", [w("2024-05-10", "2024-05-16")], "", True),
    ("the previous week", [w("2024-05-10", "2024-05-16")], "", True),
    ("the last week", [w("2024-05-10", "2024-05-16")], "", True),
    ("the coming week", [w("2024-05-20", "2024-05-26")], "", True),
    ("last month", [w("2024-04-01", "2024-04-30")], "", True),
    ("this month", [w("2024-05-01", "2024-05-31")], "", True),
    ("last year", [w("2023-01-01", "2023-12-31")], "", True),
    ("since Monday", [w("2024-05-13", "2024-05-16")], "", True),
    # two phrases, in order
    ("yesterday or last Friday?", [w("2024-05-15"), w("2024-05-10")], "or?", True),
    ("yesterday and yesterday", [w("2024-05-15")], "and", True),
    ("İstanbul trip yesterday?", [w("2024-05-15")], "İstanbul trip?", True),  # lower() grows it
    # no dates
    ("", [], "", False),
    ("What does Kwame play on Tuesday nights?", [], "What does Kwame play on Tuesday nights?", False),
    ("Where do we go every Monday?", [], "Where do we go every Monday?", False),
    ("on Mondays", [], "on Mondays", False),
    ("Every Monday we swim", [], "Every Monday we swim", False),  # a habit at the text's start
    ("Each weekend we swim", [], "Each weekend we swim", False),
    ("every  Monday we swim", [], "every  Monday we swim", False),
    ("I may go; we march on", [], "I may go; we march on", False),
    ("for the 3rd time", [], "for the 3rd time", False),
    ("31 February", [], "31 February", False),
    ("2024-13-45", [], "2024-13-45", False),
    ("What is Kwame afraid of?", [], "What is Kwame afraid of?", False),
    ("1500 people came", [], "1500 people came", False),
    ("it costs 12.50 at 10:30", [], "it costs 12.50 at 10:30", False),
]


@pytest.mark.parametrize(("text", "windows", "rest", "relative"), QUESTIONS)
def test_read_dates(text: str, windows: list[DayWindow], rest: str, relative: bool) -> None:
    assert read_dates(text, THURSDAY) == DateReading(tuple(windows), rest, relative)


TURNS = [
    # said on Thursday 16 May 2024
    ("Ran my first 10k on Monday! My legs are jelly.", ["2024-05-13"]),
    ("We got engaged on Thursday!!", ["2024-05-09"]),  # a turn's plain weekday: before its day
    ("We went camping last Friday, froze all night.", ["2024-05-10"]),
    ("Dropped my phone in the canal the day before yesterday.", ["2024-05-14"]),
    ("Saw them live two days ago, best gig of my life.", ["2024-05-14"]),
    ("Had eight people over for dinner this morning.", ["2024-05-16"]),
    ("Passed! Driving test last week, one minor fault.",
     [f"2024-05-{n:02d}" for n in range(6, 13)]),
    ("We were away last weekend.", ["2024-05-11", "2024-05-12"]),
    ("Got it done two weeks ago.", [f"2024-{m}" for m in
                                    ("04-29", "04-30", "05-01", "05-02", "05-03", "05-04", "05-05")]),
    ("See you on Monday!", ["2024-05-20"]),
    ("I'll call you on Saturday.", ["2024-05-18"]),
    ("We're going to the coast next Monday.", ["2024-05-20"]),
    ("This is going to sound odd, went to the museum on Monday.", ["2024-05-13"]),
    ("My birthday was on 3 May.", ["2024-05-03"]),
    ("The exam is on 3 June, wish me luck.", ["2024-06-03"]),  # a turn's yearless date: nearest
    ("The party was on 20 December.", ["2023-12-20"]),
    ("Booked it for 2024-06-01.", ["2024-06-01"]),
    ("yesterday and today", ["2024-05-15", "2024-05-16"]),
    ("Been ill since last Friday.", [f"2024-05-{n}" for n in range(10, 17)]),  # seven days: marked
    # too wide, vague or none
    ("Been ill since last Thursday.", []),  # eight days: too wide
    ("Last month was rough, and next year will be better.", []),
    ("I'm off in June.", []),
    ("Every weekend until it's done.", []),
    ("They came for a long weekend.", []),
    ("We play on Tuesday nights.", []),
    ("It was great the other day.", []),
    ("", []),
    ("Nothing about time here at all.", []),
]


@pytest.mark.parametrize(("text", "days"), TURNS)
def test_mentioned_days(text: str, days: list[str]) -> None:
    assert mentioned_days(text, THURSDAY) == tuple(d(day) for day in days)


def test_an_aware_anchor_counts_in_utc_days() -> None:
    late_in_new_york = datetime(2024, 5, 15, 22, 0, tzinfo=timezone(timedelta(hours=-4)))
    assert mentioned_days("yesterday", late_in_new_york) == (d("2024-05-15"),)
    assert mentioned_days("yesterday", datetime(2024, 5, 16, 2, 0)) == (d("2024-05-15"),)


@pytest.mark.parametrize("anchor", [datetime(1, 1, 3), datetime(9999, 12, 30)])
@pytest.mark.parametrize("text", ["last year", "two years ago", "next month", "next week",
                                  "in December", "on 3 May", "tomorrow", "the day after tomorrow",
                                  "a year ago", "yesterday", "next Monday", "since 2023"])
def test_years_at_the_calendar_edges_give_no_window_or_a_valid_one(text: str, anchor: datetime) -> None:
    reading = read_dates(text, anchor)
    assert all(window.first <= window.last for window in reading.windows)
    mentioned_days(text, anchor)


@pytest.mark.parametrize("text", [
    "the year 1066", "in 2999", "on 1 January 1900", "0001-01-01", "9999-12-31",
])
def test_far_years(text: str) -> None:
    assert len(read_dates(text, THURSDAY).windows) == 1


@pytest.mark.parametrize("piece", [
    "a" * 100_000, "1" * 100_000, "on " * 33_000, "last " * 20_000, "a couple of " * 8_000,
    # a phrase or a number every few characters: 20,000 characters are enough to tell
    "the week of " * 1_700, "3 " * 10_000, "May " * 5_000, "1/" * 10_000, "-1" * 10_000,
])
def test_long_texts_are_read_to_the_end(piece: str) -> None:
    # no repeat nests inside a repeat: each of these takes milliseconds (a pattern that
    # backtracked would not come back); the last phrase is still found after the filler
    reading = read_dates(piece + ". yesterday", THURSDAY)
    assert reading.windows[-1] == w("2024-05-15")
    mentioned_days(piece, THURSDAY)


def _evaluation() -> tuple[dict[str, dict[str, str]], dict[str, datetime], list[dict[str, object]]]:
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
    return turns, newest, questions


def test_every_temporal_question_of_the_evaluation_finds_its_answer_day() -> None:
    """The turn that answers "When did Kwame run his first 10k?" speaks of the answer's day."""
    turns, _, questions = _evaluation()
    temporal = [q for q in questions if q["category"] == "temporal" and q.get("answer_date")]
    missed = []
    for question in temporal:
        turn = turns[str(question["answer_turn_ids"][0])]  # type: ignore[index]
        days = mentioned_days(turn["text"], datetime.fromisoformat(turn["created_at"]))
        if d(str(question["answer_date"])) not in days:
            missed.append((question["id"], turn["text"], days))
    assert len(temporal) > 200
    assert missed == []


def test_every_date_question_of_the_evaluation_reads_its_day() -> None:
    """"What was Kwame doing last Monday?" asked at its as_of (else the newest turn's time)."""
    _, newest, questions = _evaluation()
    dated = [q for q in questions if q["category"] == "date"]
    missed = []
    for question in dated:
        anchor = (datetime.fromisoformat(str(question["as_of"])) if question.get("as_of")
                  else newest[str(question["conversation"])])
        reading = read_dates(str(question["question"]), anchor)
        day = d(str(question["answer_date"]))
        if not any(window.first <= day <= window.last for window in reading.windows):
            missed.append((question["id"], question["question"], reading))
    assert len(dated) > 100
    assert missed == []
