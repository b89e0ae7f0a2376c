"""Offline, deterministic memory extraction from explicit first-person statements.

Low recall, high precision: only a handful of plain sentence shapes are recognised, matched
case-insensitively at the start of a sentence (after a greeting or filler such as "Hi," or
"Also,"), one sentence or first-person clause at a time:

============================================  ==========  ===========================  =============================
statement                                     category    key                          value
============================================  ==========  ===========================  =============================
my name is X / I'm called X                   identity    ``name``                     ``X``
I live in X / I moved to X / I'm based in X   identity    ``home_city``                ``X``
I prefer X / I like X / I love X              preference  ``prefers_<slug X>``         ``Prefers X`` / ``Likes X`` …
I don't like X any more / I no longer like X  preference  archives the matching row    —
I'm interested in X / I'm into X              interest    ``interest_<slug X>``        ``Interested in X``
I want to X / my goal is to X /               goal        ``goal_<slug X>``            ``Wants to X``
I'm trying to X
remember that S is Y / remember that X         context     ``<slug of S>``              ``Y`` / X
always X / never X (operator only)            directive   ``rule_<first words of X>``  ``Always X`` / ``Never X``
============================================  ==========  ===========================  =============================

Values read as a person writes them down: where the key already names the relation, the
value is the bare answer (``name: Alice Martin``, ``home_city: Berlin``, ``training_days:
Tuesday and Thursday``); otherwise a short declarative fact (``Prefers flat whites``).

Key derivation (``<slug X>``): X up to its first comma, folded to ASCII lower case, leading
articles and possessives dropped, cut before the first connecting or time word ("over",
"because", "with", "in", "next", "even", …), at most four words joined by ``_``, never ending
on such a word, so a key is whole words of one phrase ("I prefer flat whites over lattes" →
``prefers_flat_whites``, "my goal is to climb Mont Blanc next summer" →
``goal_climb_mont_blanc``, "always answer in English, even if …" → ``rule_answer_in_english``).
The three liking verbs share the ``prefers_`` key so that "I love jazz" after "I like jazz"
updates one row. For ``remember that X`` the key is the subject before "is"/"are"/"was"
("the deploy server is prod-3" → ``deploy_server: prod-3``; a leading "called"/"named" is
dropped from the value), so a later correction replaces it, or, without such a verb, X's first
four words; a leading "I"/"I'm" is left out of the key and written as "The user" in the value.

Ignored: questions (a sentence ending in "?"), hypotheticals (a sentence starting with "if",
"suppose", "imagine", "what if" …), quoted lines (``>``) and fenced code, objects that point
at the conversation itself ("I like this", "I want to know …"), and directives from guests.

Consolidation: the latest statement of a key in the batch wins (one operation per key); an
existing row with the same category and key is replaced by id when its value differs and
left alone when it is the same (compared case-insensitively).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fermix_memory.adapters.providers.rules import patterns as pat
from fermix_memory.adapters.providers.rules.text import (
    bare_word,
    capped_value,
    is_question,
    sentences,
    slug_key,
    strip_filler,
    trim,
)

MAX_TEXT_CHARS = 100_000  # a review message is a few thousand characters; bound the work anyway


def extract_operations(messages: list[dict[str, Any]], memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operation dicts (SPEC §12 shape) for the explicit statements in ``messages``.

    ``messages`` are the review input's message objects, oldest first (``id``, ``trust``,
    ``sender``, ``text``, ``at``); ``memories`` its memory rows (``id``, ``category``, ``key``,
    ``value``, ``scope``). Malformed items are skipped: this never raises on odd input. Each
    operation names in ``source_message_ids`` the message whose statement it carries.
    """
    latest: dict[tuple[str, str], _Statement] = {}
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or not isinstance(message.get("text"), str):
            continue
        operator = message.get("trust") == "operator"
        message_id = message.get("id")
        usable = isinstance(message_id, int) and not isinstance(message_id, bool) and message_id > 0
        source = message_id if usable else None
        for statement in _statements(message["text"][:MAX_TEXT_CHARS], operator=operator):
            statement.source = source
            slot = (statement.category, statement.key)
            latest.pop(slot, None)  # re-insert so the output follows the latest statements' order
            latest[slot] = statement
    return _consolidate(list(latest.values()), _rows(memories))


class _Statement:
    __slots__ = ("category", "ended", "key", "source", "value")

    def __init__(self, category: str, key: str, value: str, *, ended: bool = False) -> None:
        self.source: int | None = None  # the id of the message that said it
        self.category = category
        self.key = key
        self.value = value  # for an ended preference: the object that is no longer liked
        self.ended = ended


class _Row:
    __slots__ = ("category", "id", "key", "value")

    def __init__(self, row_id: int, category: str, key: str, value: str) -> None:
        self.id = row_id
        self.category = category
        self.key = key
        self.value = value


def _rows(memories: object) -> list[_Row]:
    rows = []
    for raw in memories if isinstance(memories, list) else []:
        if not isinstance(raw, dict):
            continue
        row_id, category, key, value = (raw.get(f) for f in ("id", "category", "key", "value"))
        if not isinstance(row_id, int) or isinstance(row_id, bool) or row_id < 1:
            continue
        if isinstance(category, str) and isinstance(key, str) and isinstance(value, str):
            rows.append(_Row(row_id, category, key, value))
    return sorted(rows, key=lambda r: r.id)


def _consolidate(statements: list[_Statement], rows: list[_Row]) -> list[dict[str, Any]]:
    by_slot: dict[tuple[str, str], _Row] = {}
    for existing in rows:
        by_slot.setdefault((existing.category, existing.key), existing)
    touched: set[int] = set()
    ops: list[dict[str, Any]] = []
    for st in statements:
        if st.ended:
            gone = by_slot.get((st.category, st.key)) or _row_liking(rows, st.value)
            if gone is not None and gone.id not in touched:
                touched.add(gone.id)
                reason = capped_value(f"User said they no longer like {st.value}")
                ops.append({"op": "archive", "id": gone.id, "reason": reason, **_sources(st)})
            continue
        row = by_slot.get((st.category, st.key))
        if row is None:
            ops.append({"op": "add", "category": st.category, "key": st.key, "value": st.value, **_sources(st)})
        elif row.value.strip().casefold() != st.value.casefold() and row.id not in touched:
            touched.add(row.id)
            ops.append({"op": "replace", "id": row.id, "value": st.value, **_sources(st)})
    return ops


def _sources(statement: _Statement) -> dict[str, Any]:
    return {"source_message_ids": [statement.source]} if statement.source is not None else {}


def _row_liking(rows: list[_Row], thing: str) -> _Row | None:
    """A preference row whose value is exactly "Prefers/Likes/Loves <thing>" (any case)."""
    wanted = thing.casefold()
    for row in rows:
        if row.category != "preference":
            continue
        verb, _, rest = row.value.strip().partition(" ")
        if verb.casefold() in {"prefers", "likes", "loves", "enjoys"} and trim(rest).casefold() == wanted:
            return row
    return None


# --- sentences ------------------------------------------------------------------------------


def _statements(text: str, *, operator: bool) -> Iterator[_Statement]:
    for sentence in sentences(text.translate(pat.APOSTROPHES)):
        if is_question(sentence):
            continue
        sentence = trim(sentence)
        if pat.HYPOTHETICAL.match(strip_filler(sentence)):
            continue
        for clause in pat.CLAUSE_SPLIT.split(sentence):
            statement = _match(strip_filler(trim(clause)), operator=operator)
            if statement is not None:
                yield statement


# --- statement shapes -----------------------------------------------------------------------


def _match(clause: str, *, operator: bool, inside_remember: bool = False) -> _Statement | None:
    if not clause:
        return None
    if m := pat.NAME.fullmatch(clause):
        return _name(m.group("x"))
    if m := pat.HOME.fullmatch(clause):
        return _home(m.group("x"), all_lower_case=clause == clause.lower())
    if m := pat.ENDED.fullmatch(clause):
        thing = trim(m.group("x") or m.group("y") or "")
        key = slug_key("prefers_", thing)
        return _Statement("preference", key, thing, ended=True) if key and thing else None
    if m := pat.PREFERENCE.fullmatch(clause):
        return _about("preference", "prefers_", pat.PREFERENCE_VERBS[m.group("verb").lower()], m.group("x"))
    if m := pat.INTEREST.fullmatch(clause):
        return _about("interest", "interest_", "Interested in", m.group("x"))
    if m := pat.GOAL.fullmatch(clause):
        return _about("goal", "goal_", "Wants to", m.group("x"))
    if not inside_remember and (m := pat.REMEMBER.fullmatch(clause)):
        return _remember(m.group("x"), operator=operator)
    if operator and (m := pat.DIRECTIVE.fullmatch(clause)):
        return _directive(m.group("mode"), m.group("x"))
    return None


def _name(raw: str) -> _Statement | None:
    name = re.split(r"\s*(?:[,;:()]|\s-\s|\band\b|\bbut\b|\bby the way\b)\s*", raw.strip(), maxsplit=1)[0]
    words = name.split()
    if not words or words[0].lower() in pat.NOT_NAMES:
        return None
    if name == name.lower():
        # Typed in lower case there is no capital to tell a name from the words after it.
        if len(words) > 2:
            return None
        words = [w[:1].upper() + w[1:] for w in words]
    else:
        # "I'm called Sam by my friends": keep the capitalised run (and name particles).
        kept = [words[0]]
        for word in words[1:]:
            if not (word[:1].isupper() or word in pat.NAME_PARTICLES):
                break
            kept.append(word)
        words = kept
    name = " ".join(words)
    if len(words) > 4 or not re.fullmatch(r"[^\W\d_][\w'.\-]*(?:\s[^\W\d_][\w'.\-]*)*", name):
        return None
    return _Statement("identity", "name", capped_value(name))


def _home(raw: str, *, all_lower_case: bool) -> _Statement | None:
    words = raw.split()
    kept: list[str] = []
    for word in words:
        if kept and bare_word(word) in pat.PLACE_CONNECTORS:
            break
        kept.append(word)
    place = trim(" ".join(kept))
    if not place or bare_word(kept[0]) in {"a", "an"} or _points_at_conversation(place):
        return None
    # A place name has a capital unless the writer types everything in lower case:
    # this keeps "I live in fear" or "I live in the countryside" out.
    if place == place.lower() and not all_lower_case:
        return None
    return _Statement("identity", "home_city", capped_value(place))


def _about(category: str, prefix: str, lead: str, raw: str) -> _Statement | None:
    thing = trim(raw)
    if not thing or _points_at_conversation(thing):
        return None
    first_words = [bare_word(w) for w in thing.split()[:3]]
    if any(w in pat.SPEECH_VERBS for w in first_words):
        return None
    key = slug_key(prefix, thing)
    return _Statement(category, key, capped_value(f"{lead} {thing}")) if key else None


def _remember(raw: str, *, operator: bool) -> _Statement | None:
    fact = trim(raw)
    # "Remember that my name is Sam" is an identity statement, not a context note.
    inner = _match(fact, operator=operator, inside_remember=True)
    if inner is not None:
        return inner
    if not fact or any(bare_word(w) in pat.SECOND_PERSON for w in fact.split()):
        # "Remember that you must …" instructs the agent; it is not a fact about the work.
        return None
    subject = fact
    for pattern, replacement in pat.FIRST_PERSON_START:
        if m := pattern.match(fact):
            # "my sister is Ana" → key "sister"; "I'm allergic to nuts" → "allergic_to_nuts".
            subject = fact[m.end() :] if replacement != "The user's" else fact
            fact = replacement + fact[m.end() :]
            break
    copula = pat.COPULA.search(subject)
    key = slug_key("", subject[: copula.start()] if copula else subject, cut_at_connectors=False)
    if not key:
        return None
    if copula is not None:
        # The key names the subject, so the value is what it is: "training_days: Tuesday and Thursday".
        answer = pat.NAMED.sub("", trim(subject[copula.end() :]), count=1)
        if answer:
            return _Statement("context", key, capped_value(answer))  # as written: "prod-3" stays lower case
    return _Statement("context", key, capped_value(fact[:1].upper() + fact[1:]))


def _directive(mode: str, raw: str) -> _Statement | None:
    rule = trim(raw)
    words = rule.split()
    if len(words) < 2 or bare_word(words[0]) in pat.NOT_RULES or bare_word(words[0]).endswith("ed"):
        return None
    # The whole opening of the rule names it, so "Never answer in English" replaces
    # "Always answer in English" and "Always answer briefly" stays a separate rule.
    key = slug_key("rule_", rule, cut_at_connectors=False)
    return _Statement("directive", key, capped_value(f"{mode.capitalize()} {rule}")) if key else None


def _points_at_conversation(text: str) -> bool:
    return any(bare_word(w) in pat.DEICTIC for w in text.split())
