"""Date questions over the generated conversations (``generate.py`` calls :func:`date_questions`).

Three kinds (``"date_kind"``), each naming a day the way people do, so that the day must matter:

* ``absolute``: "What did Caroline get up to on Monday 26 February 2024?" — answered by the turn
  that says the event happened (said that day, or said later as "on Monday"); the event's own
  words are left out of the question.
* ``relative``: the same in relative words ("yesterday", "last Monday", "last weekend", "two days
  ago", "last week") with the moment the question is asked at (``"as_of"``, UTC), which comes
  after the answering turn; plus "What did we talk about yesterday?" (every turn of that day).
* ``day``: a date-only filter, "What did we talk about on 3 May 2024?" — every turn said that
  (UTC) day answers; ``"whole_day": true`` marks the questions whose answer is a whole day.

Every question carries ``"answer_date"``: the day it is about (for "last week" and "the week of",
that week's Monday).
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
PER_CONVERSATION = {"absolute": 5, "relative": 4, "yesterday": 1, "day": 3}
ASKED_AT = time(23, 30)  # the as_of moment: late on its day (after every turn said that day)

PERSON = ["What did {P} get up to {when}?", "What happened to {P} {when}?", "What was {P} doing {when}?",
          "What did {P} do {when}?", "What was going on with {P} {when}?"]
WHOLE_DAY = ["What did we talk about {when}?", "What did {A} and {B} chat about {when}?",
             "What was said in the chat {when}?", "Remind me what we discussed {when}.",
             "What came up in our conversation {when}?"]


def ordinal(n: int) -> str:
    return f"{n}{'th' if 11 <= n % 100 <= 13 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def spelled(day: date, style: int) -> str:
    """``day`` as people write it, in one of seven styles (the last two without the year)."""
    month = MONTHS[day.month - 1]
    return [f"on {WEEKDAYS[day.weekday()]} {day.day} {month} {day.year}", f"on {day.day} {month} {day.year}",
            f"on {month} {ordinal(day.day)}, {day.year}", f"on {day.isoformat()}",
            f"on the {ordinal(day.day)} of {month} {day.year}", f"on {day.day} {month}",
            f"on {month} {ordinal(day.day)}"][style]


def day_of(stamp: str) -> date:
    return datetime.fromisoformat(stamp).astimezone(UTC).date()


def asked_on(day: date, after: datetime) -> str | None:
    """The as_of moment late on ``day``, or None when that is not after ``after``."""
    moment = datetime.combine(day, ASKED_AT, tzinfo=UTC)
    return moment.isoformat() if moment > after else None


def relative_options(event: dict[str, Any]) -> list[tuple[str, date]]:
    """(phrase, the day the question is asked on) pairs that name the event's day unambiguously."""
    day: date = event["day"]
    if event["week"]:
        monday = day
        return [("last week", monday + timedelta(days=7 + n)) for n in range(7)]
    wd = day.weekday()
    options = [("today", day), ("yesterday", day + timedelta(days=1)),
               ("the day before yesterday", day + timedelta(days=2)), ("two days ago", day + timedelta(days=2)),
               ("three days ago", day + timedelta(days=3))]
    # "on Monday": later in the same week; "last Monday": in the next week, at most 7 days on.
    options += [(f"on {WEEKDAYS[wd]}", day + timedelta(days=n)) for n in range(1, 7 - wd)]
    options += [(f"last {WEEKDAYS[wd]}", day + timedelta(days=n)) for n in range(7 - wd, 8)]
    if wd >= 5:  # a weekend day: "last weekend", asked Monday to Thursday after it
        options += [("last weekend", day + timedelta(days=7 - wd + n)) for n in range(4)]
    return options


def events_of(conversation: dict[str, Any], questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation's temporal events that only one event of their person matches by day."""
    said = {turn["id"]: datetime.fromisoformat(turn["created_at"])
            for session in conversation["sessions"] for turn in session["turns"]}
    events = []
    for q in questions:
        if q["conversation"] == conversation["id"] and q["category"] == "temporal":
            turn = q["answer_turn_ids"][0]
            events.append({"about": q["about"], "kind": q["kind"], "turn": turn, "said": said[turn],
                           "day": date.fromisoformat(q["answer_date"]),
                           "week": q["answer"].startswith("the week of")})
    days: dict[str, list[date]] = defaultdict(list)
    for e in events:  # every day an event of the person touches: its day(s) and the day it was said
        span = 7 if e["week"] else 1
        days[e["about"]] += [e["day"] + timedelta(days=n) for n in range(span)] + [e["said"].date()]
    clear = []
    for e in events:
        own = [e["day"] + timedelta(days=n) for n in range(7 if e["week"] else 1)] + [e["said"].date()]
        others = list(days[e["about"]])
        for d in own:
            others.remove(d)
        if not set(own[:-1]) & set(others) and (e["week"] or e["day"] not in others):
            clear.append(e)
    return clear


def person_question(rng: random.Random, e: dict[str, Any], conv_id: str, kind: str, when: str,
                    as_of: str | None = None) -> dict[str, Any]:
    day = e["day"].isoformat()
    what = "the week of " + day if e["week"] else day
    return {"conversation": conv_id, "category": "date", "date_kind": kind, "about": e["about"],
            "kind": e["kind"], "question": rng.choice(PERSON).format(P=e["about"], when=when),
            "answer": f"{e['kind']} ({what}; said on {e['said'].date().isoformat()})",
            "answer_turn_ids": [e["turn"]], "answer_date": day, **({"as_of": as_of} if as_of else {})}


def whole_day_question(rng: random.Random, conversation: dict[str, Any], day: date, kind: str, when: str,
                       as_of: str | None = None) -> dict[str, Any]:
    turns = [turn["id"] for session in conversation["sessions"] for turn in session["turns"]
             if day_of(turn["created_at"]) == day]
    names = [p["name"] for p in conversation["participants"]]
    return {"conversation": conversation["id"], "category": "date", "date_kind": kind, "about": "",
            "kind": "whole-day", "question": rng.choice(WHOLE_DAY).format(A=names[0], B=names[1], when=when),
            "answer": f"everything said on {day.isoformat()} ({len(turns)} turns)", "answer_turn_ids": turns,
            "answer_date": day.isoformat(), "whole_day": True, **({"as_of": as_of} if as_of else {})}


def conversation_questions(rng: random.Random, conversation: dict[str, Any],
                           questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    conv_id = conversation["id"]
    last = max(datetime.fromisoformat(t["created_at"]) for s in conversation["sessions"] for t in s["turns"])
    events = events_of(conversation, questions)
    rng.shuffle(events)
    out = []
    for e in events[:PER_CONVERSATION["absolute"]]:
        if e["week"]:
            when = "the week of " + spelled(e["day"], rng.choice([1, 2, 4])).removeprefix("on ")
        else:  # without the year only when the day is within the year before the newest turn
            styles = 7 if (last.date() - e["day"]).days < 300 else 5
            when = spelled(e["day"], rng.randrange(styles))
        out.append(person_question(rng, e, conv_id, "absolute", when))
    relative = 0
    for e in events[PER_CONVERSATION["absolute"]:]:
        options = [(phrase, asked) for phrase, asked in relative_options(e)
                   if asked_on(asked, e["said"]) is not None]
        if options and relative < PER_CONVERSATION["relative"]:
            phrase, asked = rng.choice(options)
            out.append(person_question(rng, e, conv_id, "relative", phrase, asked_on(asked, e["said"])))
            relative += 1
    days = sorted({day_of(t["created_at"]) for s in conversation["sessions"] for t in s["turns"]})
    busy = [d for d in days if sum(day_of(t["created_at"]) == d for s in conversation["sessions"]
                                   for t in s["turns"]) >= 5]
    picked = rng.sample(busy, PER_CONVERSATION["yesterday"] + PER_CONVERSATION["day"])
    for day in picked[:PER_CONVERSATION["yesterday"]]:
        newest = max(datetime.fromisoformat(t["created_at"]) for s in conversation["sessions"] for t in s["turns"]
                     if day_of(t["created_at"]) == day)
        as_of = asked_on(day + timedelta(days=1), newest)
        if as_of is not None:
            out.append(whole_day_question(rng, conversation, day, "relative", "yesterday", as_of))
    for day in picked[PER_CONVERSATION["yesterday"]:]:
        styles = 7 if (last.date() - day).days < 300 else 5
        out.append(whole_day_question(rng, conversation, day, "day", spelled(day, rng.randrange(styles))))
    return out


def date_questions(rng: random.Random, conversations: list[dict[str, Any]],
                   questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The date questions of every conversation, in conversation order."""
    return [q for conversation in conversations for q in conversation_questions(rng, conversation, questions)]
