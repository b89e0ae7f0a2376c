"""Write the recall evaluation set: long multi-session chats between named people, and questions
whose answers are specific turns (single-hop, multi-hop, temporal).

Deterministic: the same seed gives byte-identical files (no clock, no network). The phrasing
comes from the hand-written banks in ``banks.py``; see ``README.md`` for the format.

Run (from the repository root)::

    python3 benchmarks/recall_eval/generate.py            # rewrites conversations.jsonl + questions.jsonl
    python3 benchmarks/recall_eval/generate.py --check    # fails if the committed files are stale
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import banks  # the banks sit beside this script
import dated

SEED = 20_261_130
HERE = Path(__file__).resolve().parent
# (number of people) per conversation; three group chats among them.
SHAPES = [2, 2, 3, 2, 2, 2, 3, 2, 2, 2, 3, 2]
# Long-turn conversations after those (their own random stream, so the first twelve never
# change): the same kinds of facts, events and chains, every line said at length.
LONG_SHAPES = [2, 3, 2]
LONG_WORDS = (22, 38)
# Conversations with entity chains after those (their own stream, seed + 3): (people, long turns).
ENTITY_SHAPES = [(2, False), (3, False), (2, True), (2, False)]
ENTITY_KINDS_PER_PERSON = 7
ENTITY_FACTS = (2, 3)  # facts said later about each name
FACTS_PER_PERSON = 14
EVENTS_PER_PERSON = {2: 7, 3: 5}
CHAINS_PER_PERSON = 5
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

FOLLOW_UPS = [
    ("Since when?", "Oh, ages. I just never mentioned it."),
    ("How did that happen?", "Long story, I'll tell you over a drink."),
    ("Seriously?", "Seriously!"),
    ("And you like it?", "More than I expected, honestly."),
    ("Tell me more!", "Next time, I promise. It's a whole saga."),
    ("Huh, I'd never have guessed.", "I'm full of surprises."),
    ("Wait, really, {name}?", "Really really."),
    ("How come I didn't know this?", "You never asked!"),
]


class Fields(dict[str, str]):
    """Template fields; ``{City}`` is ``{city}`` with its first letter capitalised."""

    def __missing__(self, key: str) -> str:
        lower = key[:1].lower() + key[1:]
        if lower != key and lower in self:
            return cap(self[lower])
        raise KeyError(key)


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def fill(template: str, fields: dict[str, str]) -> str:
    return template.format_map(Fields(fields))


@dataclass
class Line:
    speaker: str
    text: str
    tag: str | None = None  # marks a turn some question points at


@dataclass
class Person:
    name: str
    gender: str
    sheet: dict[str, Any] = field(default_factory=dict)

    def pronouns(self) -> dict[str, str]:
        return banks.PRONOUNS[self.gender]


@dataclass
class Question:
    category: str
    about: str
    kind: str
    question: str
    answer: str
    tags: list[str]
    extra: dict[str, str] = field(default_factory=dict)
    via: list[str] = field(default_factory=list)  # entity-hop: the link turn naming the entity
    phrasings: list[str] = field(default_factory=list)  # entity-hop: the ones to try, in order


def lengthen(rng: random.Random, text: str) -> str:
    """``text`` as someone who talks at length says it: an opening aside, then a trailing thought
    and more asides while the turn holds fewer words than a count drawn from :data:`LONG_WORDS`."""
    target = rng.randint(*LONG_WORDS)
    asides = [rng.choice(banks.LONG_OPENERS)]
    tail = ""
    spare = rng.sample(banks.LONG_ASIDES, len(banks.LONG_ASIDES))

    def said() -> str:
        return " ".join([*asides, text]).rstrip(".!") + (f", {tail}" if tail else "")

    while len(said().split()) < target and (spare or not tail):
        if not tail:
            tail = rng.choice(banks.LONG_TAILS)
        else:
            asides.append(spare.pop())
    return said()


class ConversationBuilder:
    def __init__(self, rng: random.Random, conv_id: str, people: list[Person], long_turns: bool = False) -> None:
        self.rng = rng
        self.long_turns = long_turns
        self.conv_id = conv_id
        self.people = people
        self.n_sessions = rng.randint(14, 18)
        start = datetime(2023, 1, 2) + timedelta(days=rng.randint(0, 540))
        self.dates: list[datetime] = []
        at = start
        for _ in range(self.n_sessions):
            at = at.replace(hour=rng.randint(7, 21), minute=rng.randint(0, 59), second=0)
            self.dates.append(at)
            at = at + timedelta(days=rng.randint(3, 17))
        self.blocks: list[list[list[Line]]] = [[] for _ in range(self.n_sessions)]
        self.questions: list[Question] = []
        self.used: dict[str, set[str]] = {}
        self.tag_count = 0

    # --- helpers --------------------------------------------------------------------------------

    def others(self, person: Person) -> list[Person]:
        return [p for p in self.people if p is not person]

    def new_tag(self) -> str:
        self.tag_count += 1
        return f"tag{self.tag_count}"

    def pick_value(self, kind: str, values: list[dict[str, str]], key_fields: list[str]) -> dict[str, str]:
        """A value of ``kind`` whose key fields no one in this conversation has used yet."""
        used = self.used.setdefault(kind, set())
        candidates = [v for v in values if all(f"{f}={v[f]}" not in used for f in key_fields)]
        value = dict(self.rng.choice(candidates))
        used.update(f"{f}={value[f]}" for f in key_fields)
        return value

    def reaction(self, listener: Person, speaker: Person, bank: list[str] = banks.REACTIONS) -> Line:
        return Line(listener.name, fill(self.rng.choice(bank), {"name": speaker.name}))

    def person_fields(self, person: Person, other: Person) -> dict[str, str]:
        return {"P": person.name, "O": other.name, **person.pronouns()}

    # --- single-hop facts -----------------------------------------------------------------------

    def add_fact(self, person: Person, kind: str) -> None:
        bank = banks.FACTS[kind]
        value = self.pick_value(kind, bank["values"], bank["dfield"])
        person.sheet[kind] = value
        asker = self.rng.choice(self.others(person))
        fields = {**value, **self.person_fields(person, asker), "name": person.name}
        if "rs" in value:
            fields["rs"] = value["rs"]
        tag = self.new_tag()
        if self.rng.random() < 0.3:  # volunteered; otherwise the answer to someone's question
            lines = [Line(person.name, fill(self.rng.choice(banks.STATEMENTS[kind]), fields), tag)]
        else:
            pair = self.rng.randrange(len(bank["ask"]))
            lines = [Line(asker.name, fill(bank["ask"][pair], fields)),
                     Line(person.name, fill(bank["answer"][pair], fields), tag)]
        roll = self.rng.random()
        if roll < 0.45:
            lines.append(self.reaction(asker, person))
        elif roll < 0.8:
            ask, reply = self.rng.choice(FOLLOW_UPS)
            lines += [Line(asker.name, fill(ask, {"name": person.name})), Line(person.name, reply)]
        if len(self.people) > 2 and self.rng.random() < 0.4:
            third = self.rng.choice([p for p in self.others(person) if p is not asker])
            lines.append(self.reaction(third, person))
        self.blocks[self.rng.randrange(self.n_sessions)].append(lines)
        question = fill(self.rng.choice(bank["questions"]), fields)
        self.questions.append(Question("single-hop", person.name, kind, question, fill(bank["gold"][0], fields), [tag]))
        if self.rng.random() < 0.75:
            self.add_fact_distractor(person, kind, fields)

    def add_fact_distractor(self, person: Person, kind: str, fields: dict[str, str]) -> None:
        """Someone else talks about the same topic (same value negated, or another value)."""
        bank = banks.FACTS[kind]
        speaker = self.rng.choice(self.others(person))
        other_value = self.pick_value(kind, bank["values"], bank["dfield"])
        dfields = {**fields, **{f"d{k}": v for k, v in other_value.items()}}
        lines = [Line(speaker.name, fill(self.rng.choice(bank["distractors"]), dfields))]
        if self.rng.random() < 0.6:
            listener = self.rng.choice(self.others(speaker))
            lines.append(self.reaction(listener, speaker, banks.REMARK_REPLIES))
        self.blocks[self.rng.randrange(self.n_sessions)].append(lines)

    # --- temporal -------------------------------------------------------------------------------

    def add_event(self, person: Person, kind: str) -> None:
        bank = banks.EVENTS[kind]
        session = self.rng.randrange(self.n_sessions)
        when, back = self.rng.choice(banks.WHEN)
        day, answer = self.resolve_date(self.dates[session], back)
        fields = {**person.pronouns(), "P": person.name, "when": when,
                  "band": self.rng.choice(banks.FACTS["band"]["values"])["band"],
                  "lake": self.rng.choice(banks.LAKES),
                  "fiance": person.sheet.get("partner_job", {}).get("partner")
                  or self.rng.choice(banks.OTHER_NAMES)[0]}
        tag = self.new_tag()
        lines: list[Line] = []
        asker = self.rng.choice(self.others(person))
        if self.rng.random() < 0.6:
            lines.append(Line(asker.name, fill(self.rng.choice(banks.EVENT_PROMPTS), {"name": person.name})))
        lines.append(Line(person.name, fill(self.rng.choice(bank["say"]), fields), tag))
        if self.rng.random() < 0.7:
            lines.append(self.reaction(asker, person, banks.BAD_NEWS if "bad_news" in bank else banks.GOOD_NEWS))
        self.blocks[session].append(lines)
        person.sheet.setdefault("events", {})[kind] = answer
        what = fill(self.rng.choice(bank["q"]), fields)
        template = self.rng.choice(["When did {P} {what}?", "On what date did {P} {what}?"])
        self.questions.append(Question("temporal", person.name, kind, template.format(P=person.name, what=what),
                                       answer, [tag], {"answer_date": day}))
        if self.rng.random() < 0.4:
            speaker = self.rng.choice(self.others(person))
            self.blocks[self.rng.randrange(self.n_sessions)].append(
                [Line(speaker.name, fill(self.rng.choice(bank["distractor"]), fields))])

    @staticmethod
    def resolve_date(said_at: datetime, back: object) -> tuple[str, str]:
        """The day an event happened, from when it was said; ``(iso day, readable answer)``."""
        session_day = said_at.date().isoformat()
        if isinstance(back, int):
            day = said_at - timedelta(days=back)
            return day.date().isoformat(), f"{day.date().isoformat()} (said on {session_day})"
        if back == "week":
            monday = said_at - timedelta(days=said_at.weekday() + 7)
            return monday.date().isoformat(), f"the week of {monday.date().isoformat()} (said on {session_day})"
        target = WEEKDAYS.index(str(back))
        delta = (said_at.weekday() - target) % 7 or 7
        day = said_at - timedelta(days=delta)
        return day.date().isoformat(), f"{day.date().isoformat()}, a {back} (said on {session_day})"

    # --- multi-hop ------------------------------------------------------------------------------

    def chain_value(self, kind: str, person: Person) -> dict[str, str]:
        rng = self.rng
        female = [n for n, g in banks.OTHER_NAMES if g == "f"]
        makers: dict[str, Any] = {
            "friend_move": lambda: {"friend": rng.choice(female), "city": rng.choice(banks.CITIES)},
            "employer_city": lambda: {"company": rng.choice(banks.COMPANIES), "city": rng.choice(banks.CITIES)},
            "pet_vet": lambda: {"kind": rng.choice(["kitten", "puppy", "rescue lurcher", "tabby kitten"]),
                                "pet": rng.choice(["Pumpkin", "Luna", "Tilly", "Fig", "Nova", "Hazel"])},
            "book_verdict": lambda: {"book": rng.choice(["The Winter Ledger", "Salt and Iron", "Harbour of Glass",
                                                         "The Ninth Bridge", "Quiet Machines", "Foxglove Lane"]),
                                     "verdict": rng.choice(banks.VERDICTS)},
            "course_result": lambda: {"subject": rng.choice(banks.SUBJECTS), "result": rng.choice(banks.RESULTS)},
            "trip_gift": lambda: {"place": rng.choice(banks.TRIP_PLACES), "gift": rng.choice(banks.GIFTS)},
            "race_time": lambda: {"race": rng.choice(banks.RACES), "time": rng.choice(banks.TIMES)},
            "renovation": lambda: {"room": rng.choice(banks.ROOMS), "colour": rng.choice(banks.COLOURS)},
            "cousin_baby": lambda: {"cousin": rng.choice(banks.OTHER_NAMES)[0],
                                    "baby": rng.choice(["Ada", "Nell", "Aurora", "Mabel", "Ines", "Thea"])},
        }
        used = self.used.setdefault("chain:" + kind, set())
        for _ in range(50):
            value: dict[str, str] = makers[kind]()
            signature = json.dumps(sorted(value.items()))
            first = next(iter(value.values()))
            if signature not in used and first not in used:
                break
        used.update({signature, first})
        return value

    def add_chain(self, person: Person, kind: str) -> None:
        bank = banks.CHAINS[kind]
        value = self.chain_value(kind, person)
        person.sheet.setdefault("chains", {})[kind] = value
        other = self.rng.choice(self.others(person))
        first = self.rng.randrange(self.n_sessions - 2)
        second = self.rng.randrange(first + 1, self.n_sessions)
        tags = []
        for part, session in (("part1", first), ("part2", second)):
            template = self.rng.choice(bank[part])
            speaker, listener = (other, person) if template.startswith("O:") else (person, other)
            fields = {**value, **self.person_fields(person, other), "name": listener.name}
            tag = self.new_tag()
            tags.append(tag)
            lines = [Line(speaker.name, fill(template.removeprefix("O:"), fields), tag)]
            if self.rng.random() < 0.65:
                lines.append(self.reaction(listener, speaker))
            self.blocks[session].append(lines)
        fields = {**value, **self.person_fields(person, other)}
        self.questions.append(Question("multi-hop", person.name, kind, fill(self.rng.choice(bank["q"]), fields),
                                       fill(bank["gold"][0], fields), tags))

    # --- entity chains ---------------------------------------------------------------------------

    def entity_name(self, bank: str) -> tuple[str, str]:
        """A name from ``bank`` no one in this conversation has used yet, and the thing it names
        (a product's kind, else "")."""
        if bank == "product":
            thing, names = self.rng.choice(banks.PRODUCTS)
            pool, what = names, thing
        else:
            pool = {"f": banks.ENTITY_WOMEN, "m": banks.ENTITY_MEN, "pet": banks.ENTITY_PETS,
                    "company": banks.ENTITY_COMPANIES, "venue": banks.ENTITY_VENUES}[bank]
            what = ""
        used = self.used.setdefault("entity", set())
        name = self.rng.choice([n for n in pool if n not in used] or pool)
        used.add(name)
        return name, what

    def add_entity_chain(self, person: Person, kind: str) -> None:
        """A LINK turn naming a relation or thing, then sessions later FACT turns about the name
        alone; a question per fact asks about the relation without the name."""
        bank = banks.ENTITY_KINDS[kind]
        rel, names = self.rng.choice(bank["rels"])
        name, thing = self.entity_name(names)
        occ, occq = self.rng.choice(banks.OCCASIONS)
        fields = {**self.person_fields(person, person), "E": name, "rel": thing or rel, "occ": occ, "occq": occq}
        person.sheet.setdefault("entities", {})[kind] = {"name": name, "rel": fields["rel"]}
        other = self.rng.choice(self.others(person))
        first = self.rng.randrange(self.n_sessions - 3)
        link = self.new_tag()
        lines = [Line(person.name, fill(self.rng.choice(bank["link"]), fields), link)]
        if self.rng.random() < 0.6:
            lines.append(self.reaction(other, person))
        self.blocks[first].append(lines)
        used = self.used.setdefault("entity_fact", set())
        facts = sorted(bank["facts"], key=lambda f: (f[0] in used, self.rng.random()))
        for fact, phrasings, gold in facts[:self.rng.randint(*ENTITY_FACTS)]:
            used.add(fact)
            tag = self.new_tag()
            lines = []
            if self.rng.random() < 0.4:
                lines.append(Line(other.name, fill(self.rng.choice(banks.EVENT_PROMPTS), {"name": person.name})))
            lines.append(Line(person.name, fill(fact, fields), tag))
            if self.rng.random() < 0.6:
                lines.append(self.reaction(other, person))
            self.blocks[self.rng.randrange(first + 1, self.n_sessions)].append(lines)
            order = self.rng.sample(phrasings, len(phrasings))
            self.questions.append(Question("entity-hop", person.name, kind, "", fill(gold, fields), [tag],
                                           {"entity": name}, [link], [fill(q, fields) for q in order]))
        self.add_entity_distractors(person, kind, rel, names)

    def add_entity_distractors(self, person: Person, kind: str, rel: str, names: str) -> None:
        """Someone else's relation of the same kind under another name; rarely, the same name for
        something else."""
        speaker = self.rng.choice(self.others(person))
        if names in ("f", "m", "pet") and self.rng.random() < 0.4:
            other_name, _ = self.entity_name(names)
            line = fill(self.rng.choice(banks.ENTITY_OTHER_LINK), {"E": other_name, "rel": rel})
            self.blocks[self.rng.randrange(self.n_sessions)].append([Line(speaker.name, line)])
        if names in ("f", "m", "pet") and self.rng.random() < 0.15:
            name = person.sheet["entities"][kind]["name"]
            line = fill(self.rng.choice(banks.ENTITY_NAME_ELSEWHERE), {"E": name})
            self.blocks[self.rng.randrange(self.n_sessions)].append([Line(speaker.name, line)])

    # --- small talk and assembly ----------------------------------------------------------------

    def small_talk(self, deck: list[list[tuple[int, str]]]) -> list[Line]:
        if not deck:
            deck.extend(self.rng.sample(banks.SMALL_TALK, len(banks.SMALL_TALK)))
        pair = self.rng.sample(self.people, 2)
        names = {"n0": pair[0].name, "n1": pair[1].name}
        return [Line(pair[i].name, fill(text, names)) for i, text in deck.pop()]

    def assemble(self, min_turns: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
        rng = self.rng
        deck: list[list[tuple[int, str]]] = []
        target = rng.randint(min_turns, min_turns + 50)
        while sum(len(b) for bs in self.blocks for b in bs) + 4 * self.n_sessions < target:
            self.blocks[rng.randrange(self.n_sessions)].append(self.small_talk(deck))
        sessions = []
        where: dict[str, str] = {}
        number = 0
        for index, blocks in enumerate(self.blocks):
            rng.shuffle(blocks)
            if rng.random() < 0.7:
                blocks.insert(rng.randint(0, len(blocks)), self.small_talk(deck))
            pair = rng.sample(self.people, 2)
            names = {"n0": pair[0].name, "n1": pair[1].name}
            opening = [Line(pair[0].name, fill(rng.choice(banks.GREETINGS), names)),
                       Line(pair[1].name, fill(rng.choice(banks.GREETING_REPLIES), names))]
            closing = [Line(pair[1].name, fill(rng.choice(banks.CLOSINGS), {"n1": pair[0].name})),
                       Line(pair[0].name, fill(rng.choice(banks.CLOSING_REPLIES), {"n0": pair[1].name}))]
            at = self.dates[index]
            turns = []
            for line in [*opening, *(line for block in blocks for line in block), *closing]:
                number += 1
                turn_id = f"{self.conv_id}:t{number:04d}"
                if line.tag is not None:
                    where[line.tag] = turn_id
                text = lengthen(rng, line.text) if self.long_turns else line.text
                turns.append({"id": turn_id, "speaker": line.speaker, "text": text,
                              "created_at": at.isoformat() + "+00:00"})
                at += timedelta(seconds=rng.randint(15, 240))
            sessions.append({"session": index + 1, "date": self.dates[index].date().isoformat(), "turns": turns})
        return sessions, where


def build_conversation(rng: random.Random, number: int, size: int, cast: list[tuple[str, str]],
                       long_turns: bool = False, entity_kinds: int = 0) -> tuple[dict, list]:
    conv_id = f"conv{number:02d}"
    people = [Person(name, gender) for name, gender in cast]
    builder = ConversationBuilder(rng, conv_id, people, long_turns)
    chain_kinds = list(banks.CHAINS)
    for person in people:
        chains = rng.sample(chain_kinds, CHAINS_PER_PERSON)
        kinds = [k for k in banks.FACTS if not (k == "pet" and "pet_vet" in chains)]
        for kind in rng.sample(kinds, FACTS_PER_PERSON):
            builder.add_fact(person, kind)
        for kind in chains:
            builder.add_chain(person, kind)
    event_kinds = rng.sample(list(banks.EVENTS), EVENTS_PER_PERSON[size] * size)
    for i, kind in enumerate(event_kinds):
        builder.add_event(people[i % size], kind)
    for person in people if entity_kinds else ():
        for kind in rng.sample(list(banks.ENTITY_KINDS), entity_kinds):
            builder.add_entity_chain(person, kind)
    sessions, where = builder.assemble(min_turns=320)
    text_of = {turn["id"]: turn["text"] for session in sessions for turn in session["turns"]}
    conversation = {
        "id": conv_id,
        **({"style": "long-turns"} if long_turns else {}),
        "participants": [{"name": p.name, "pronoun": p.pronouns()["sub"], "sheet": p.sheet} for p in people],
        "sessions": sessions,
    }
    questions = []
    for q in builder.questions:
        answers = [where[t] for t in q.tags]
        if q.via:  # entity-hop: the first phrasing sharing no content word with the fact turn
            fact = content_stems(text_of[answers[0]])
            q.question = next((text for text in q.phrasings if not content_stems(text) & fact), "")
            if not q.question:
                continue
        questions.append({"conversation": conv_id, "category": q.category, "about": q.about, "kind": q.kind,
                          "question": q.question, "answer": q.answer, "answer_turn_ids": answers,
                          **({"via_turn_ids": [where[t] for t in q.via]} if q.via else {}), **q.extra})
    return conversation, questions


# The crude content-word test of entity-hop questions (the data test checks it the same way).
STOP_WORDS = frozenset(re.findall(r"\S+", """a about after all always am an and any anything are as at be because
been being but by can
could did do does doing don't for from get go going got had has have he her hers him his how i i'm if in is it it's
its just me most my no not now of on one only or our out she so some than that that'd the their them then there they
this those to too up was we were what when where which who why will with would yes yep you your"""))


def content_stems(text: str) -> set[str]:
    """The text's content words, crudely stemmed (so "raised" meets "raise", "lessons" "lesson")."""
    words = {w for w in re.findall(r"[a-z']+", text.lower()) if w not in STOP_WORDS and len(w) > 1}
    return {re.sub(r"(ing|ed|es|s|ly|er)$", "", w.removesuffix("'s")) for w in words}


def generate(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    conversations, questions = [], []
    for number, size in enumerate(SHAPES, start=1):
        cast = rng.sample(banks.PEOPLE, size)
        conversation, qs = build_conversation(rng, number, size, cast)
        conversations.append(conversation)
        questions.extend(qs)
    long_rng = random.Random(seed + 1)
    for number, size in enumerate(LONG_SHAPES, start=len(SHAPES) + 1):
        cast = long_rng.sample(banks.PEOPLE, size)
        conversation, qs = build_conversation(long_rng, number, size, cast, long_turns=True)
        conversations.append(conversation)
        questions.extend(qs)
    # Conversations with entity chains (their own stream, seed + 3), then the date questions over
    # every conversation (seed + 2): the lines above stay byte-for-byte what they were.
    entity_rng = random.Random(seed + 3)
    for number, (size, long_turns) in enumerate(ENTITY_SHAPES, start=len(SHAPES) + len(LONG_SHAPES) + 1):
        cast = entity_rng.sample(banks.PEOPLE, size)
        conversation, qs = build_conversation(entity_rng, number, size, cast, long_turns, ENTITY_KINDS_PER_PERSON)
        conversations.append(conversation)
        questions.extend(qs)
    questions.extend(dated.date_questions(random.Random(seed + 2), conversations, questions))
    for index, q in enumerate(questions, start=1):
        q["id"] = f"q{index:04d}"
    return conversations, [{"id": q.pop("id"), **q} for q in questions]


def as_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n" for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--check", action="store_true", help="fail if the files on disk differ from a fresh run")
    args = parser.parse_args(argv)
    conversations, questions = generate(args.seed)
    files = {"conversations.jsonl": as_jsonl(conversations), "questions.jsonl": as_jsonl(questions)}
    if args.check:
        stale = [name for name, text in files.items()
                 if not (args.out / name).exists() or (args.out / name).read_text(encoding="utf-8") != text]
        print("stale: " + ", ".join(stale) if stale else "up to date")
        return 1 if stale else 0
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
    turns = sum(len(s["turns"]) for c in conversations for s in c["sessions"])
    by_category: dict[str, int] = {}
    for q in questions:
        by_category[q["category"]] = by_category.get(q["category"], 0) + 1
    print(f"{len(conversations)} conversations, {turns} turns, {len(questions)} questions {by_category}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
