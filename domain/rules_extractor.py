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
import unicodedata
from collections.abc import Iterator
from typing import Any

from fermix_memory.domain.memory import MAX_VALUE_CHARS
from fermix_memory.domain.values import MAX_KEY_CHARS

MAX_TEXT_CHARS = 100_000  # a review message is a few thousand characters; bound the work anyway
_SLUG_WORDS = 4

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "mt", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e", "ft", "inc"}
)

_FILLER = re.compile(
    r"(?:(?:hi|hello|hey|oh|also|and|so|well|actually|btw|by the way|anyway|fyi|ok|okay|yes|yeah|no"
    r"|just so you know|for the record|for context|as you know)\b[\s,:!\-]*)*",
    re.IGNORECASE,
)
_HYPOTHETICAL = re.compile(
    r"(?:if|suppose|supposing|imagine|assuming|hypothetically|what if|in case|let's say)\b", re.IGNORECASE
)
_CLAUSE_SPLIT = re.compile(
    r"\s*[,;]\s*(?:(?:and|but|so)\s+)?(?=(?:i|my|im)\b)|\s+(?:and|but|so)\s+(?=(?:i|my|im)\b)",
    re.IGNORECASE,
)

_I_AM = r"(?:i'm|i am|im)"
_ADV = r"(?:(?:really|actually|now|currently|just|recently|also|still|very|so|totally|definitely)\s+)*"

_NAME = re.compile(r"(?:my name is|my name's|i'm called|i am called|im called)\s+(?P<x>.+)", re.IGNORECASE)
_HOME = re.compile(
    rf"(?:i\s+{_ADV}(?:live in|moved to|relocated to)|i(?:'ve| have)\s+{_ADV}moved to"
    rf"|{_I_AM}\s+{_ADV}(?:based in|living in|located in))\s+(?P<x>.+)",
    re.IGNORECASE,
)
_ENDED = re.compile(
    r"(?:i\s+(?:don't|do not|dont)\s+(?:like|love|prefer)\s+(?P<x>.+?)\s+(?:any\s?more|any longer)"
    r"|i\s+no longer\s+(?:like|love|prefer)\s+(?P<y>.+))",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(rf"i\s+{_ADV}(?P<verb>prefer|like|love)\s+(?P<x>.+)", re.IGNORECASE)
_INTEREST = re.compile(rf"{_I_AM}\s+{_ADV}(?:interested in|into)\s+(?P<x>.+)", re.IGNORECASE)
_GOAL = re.compile(
    rf"(?:i\s+{_ADV}want to|my\s+(?:main\s+|big\s+)?goal is to|{_I_AM}\s+{_ADV}trying to)\s+(?P<x>.+)",
    re.IGNORECASE,
)
_REMEMBER = re.compile(r"(?:please\s+)?remember\s+that\s+(?P<x>.+)", re.IGNORECASE)
_DIRECTIVE = re.compile(r"(?:please\s+)?(?P<mode>always|never)\s+(?P<x>.+)", re.IGNORECASE)
_COPULA = re.compile(r"\s(?:is|are|was|were|will be|=)\s", re.IGNORECASE)
_CLAUSE_END = re.compile(r"\s*(?:[,;:()]|\s[-\u2013\u2014]\s)")
_NAMED = re.compile(r"^(?:called|named)\s+", re.IGNORECASE)

_PREFERENCE_VERBS = {"prefer": "Prefers", "like": "Likes", "love": "Loves"}
# Words that point at the conversation itself: "I like this", "I want to fix it".
_DEICTIC = frozenset(
    {
        "this",
        "that",
        "these",
        "those",
        "it",
        "you",
        "your",
        "yours",
        "here",
        "there",
        "them",
        "him",
        "her",
        "one",
    }
)
# "I want to know …", "I prefer not to say": talk about the conversation, not a fact.
_SPEECH_VERBS = frozenset(
    {"say", "tell", "answer", "share", "discuss", "talk", "comment", "think", "believe", "know", "ask",
     "imagine", "add", "mention", "see", "check", "confirm", "clarify", "understand", "hear", "point"}
)  # fmt: skip
_NAME_PARTICLES = frozenset({"de", "da", "di", "van", "von", "der", "den", "del", "la", "le", "bin", "al"})
_SECOND_PERSON = frozenset({"you", "your", "yours", "yourself"})
_NOT_NAMES = frozenset({"not", "a", "an", "the", "irrelevant", "none", "private", "secret", "unknown", "nobody"})
# "Never mind", "Always has been": sentence openers that are not standing rules.
_NOT_RULES = frozenset(
    {"mind", "again", "ever", "before", "been", "had", "have", "has", "was", "were", "is", "are", "will",
     "would", "did", "do", "does", "knew", "thought", "seen", "heard", "mind.", "happy", "fun", "a", "the"}
)  # fmt: skip
# Words that start a time or a condition: a key stops before them ("climb Mont Blanc next summer").
_TIME_WORDS = frozenset(
    {"next", "last", "this", "every", "each", "tomorrow", "today", "tonight", "soon", "someday", "eventually",
     "even", "yet", "already", "by", "until", "within", "ago", "now"}
)  # fmt: skip
_SLUG_SKIP_LEADING = frozenset({"a", "an", "the", "my", "our", "some", "to"})
_SLUG_CONNECTORS = frozenset(
    {"over", "than", "instead", "rather", "because", "since", "but", "when", "while", "whenever", "if",
     "unless", "although", "though", "for", "with", "without", "at", "on", "in", "during", "after",
     "before", "from", "to", "as", "so", "which", "who", "where", "that", "especially", "like", "except",
     "via", *_TIME_WORDS}
)  # fmt: skip
_SLUG_TRAILING = frozenset(
    {"and", "or", "of", "the", "a", "an", "my", "again", "too", "also", "still", "lot", "much", "very", "so",
     "to", "in", "on", "at", "for", "with", "by", "from", "if", "when", "than", "as", "that", *_TIME_WORDS}
)  # fmt: skip
_PLACE_CONNECTORS = frozenset(
    {"because", "since", "for", "with", "but", "when", "where", "after", "before", "last", "this", "next",
     "recently", "ago", "yesterday", "today", "now", "so", "which", "who", "to", "and"}
)  # fmt: skip
_FIRST_PERSON_START = (
    (re.compile(r"(?:i'm|i am|im)\b", re.IGNORECASE), "The user is"),
    (re.compile(r"(?:i've|i have)\b", re.IGNORECASE), "The user has"),
    (re.compile(r"i\b(?!')", re.IGNORECASE), "The user"),
    (re.compile(r"my\b", re.IGNORECASE), "The user's"),
)


def extract_operations(messages: list[dict[str, Any]], memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operation dicts (SPEC §12 shape) for the explicit statements in ``messages``.

    ``messages`` are the review input's message objects, oldest first (``id``, ``trust``,
    ``sender``, ``text``, ``at``); ``memories`` its memory rows (``id``, ``category``, ``key``,
    ``value``, ``scope``). Malformed items are skipped: this never raises on odd input.
    """
    latest: dict[tuple[str, str], _Statement] = {}
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or not isinstance(message.get("text"), str):
            continue
        operator = message.get("trust") == "operator"
        for statement in _statements(message["text"][:MAX_TEXT_CHARS], operator=operator):
            slot = (statement.category, statement.key)
            latest.pop(slot, None)  # re-insert so the output follows the latest statements' order
            latest[slot] = statement
    return _consolidate(list(latest.values()), _rows(memories))


class _Statement:
    __slots__ = ("category", "ended", "key", "value")

    def __init__(self, category: str, key: str, value: str, *, ended: bool = False) -> None:
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
                reason = _cap(f"User said they no longer like {st.value}")
                ops.append({"op": "archive", "id": gone.id, "reason": reason})
            continue
        row = by_slot.get((st.category, st.key))
        if row is None:
            ops.append({"op": "add", "category": st.category, "key": st.key, "value": st.value})
        elif row.value.strip().casefold() != st.value.casefold() and row.id not in touched:
            touched.add(row.id)
            ops.append({"op": "replace", "id": row.id, "value": st.value})
    return ops


def _row_liking(rows: list[_Row], thing: str) -> _Row | None:
    """A preference row whose value is exactly "Prefers/Likes/Loves <thing>" (any case)."""
    wanted = thing.casefold()
    for row in rows:
        if row.category != "preference":
            continue
        verb, _, rest = row.value.strip().partition(" ")
        if verb.casefold() in {"prefers", "likes", "loves", "enjoys"} and _trim(rest).casefold() == wanted:
            return row
    return None


# --- sentences ------------------------------------------------------------------------------


def _statements(text: str, *, operator: bool) -> Iterator[_Statement]:
    for sentence in _sentences(text.translate(_APOSTROPHES)):
        if _is_question(sentence):
            continue
        sentence = _trim(sentence)
        if _HYPOTHETICAL.match(_strip_filler(sentence)):
            continue
        for clause in _CLAUSE_SPLIT.split(sentence):
            statement = _match(_strip_filler(_trim(clause)), operator=operator)
            if statement is not None:
                yield statement


def _sentences(text: str) -> Iterator[str]:
    in_fence = False
    for line in text.splitlines():
        # One space between words keeps every later regex linear on hostile whitespace.
        stripped = " ".join(line.split())
        if stripped.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not stripped or stripped.startswith(">"):
            continue
        merged: list[str] = []
        for piece in re.split(r"(?<=[.!?;])\s+", stripped):
            if merged and _ends_with_abbreviation(merged[-1]):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        yield from merged


def _ends_with_abbreviation(piece: str) -> bool:
    if not piece.endswith("."):
        return False
    words = piece[:-1].rsplit(None, 1)
    return bool(words) and words[-1].lower() in _ABBREVIATIONS


def _is_question(sentence: str) -> bool:
    """True when the sentence's trailing punctuation holds a "?" ("Really? :)" included)."""
    for char in reversed(sentence):
        if char.isalnum():
            return False
        if char in "?\uff1f":
            return True
    return False


def _trim(text: str) -> str:
    """Strip surrounding space and trailing punctuation or emoji (keep ``C++``, ``C#``, ``)``)."""
    text = text.strip()
    end = len(text)
    while end and not (text[end - 1].isalnum() or text[end - 1] in ")]\"'+#%"):
        end -= 1
    return text[:end].rstrip()


def _strip_filler(text: str) -> str:
    match = _FILLER.match(text)
    return text[match.end() :] if match else text


# --- statement shapes -----------------------------------------------------------------------


def _match(clause: str, *, operator: bool, inside_remember: bool = False) -> _Statement | None:
    if not clause:
        return None
    if m := _NAME.fullmatch(clause):
        return _name(m.group("x"))
    if m := _HOME.fullmatch(clause):
        return _home(m.group("x"), all_lower_case=clause == clause.lower())
    if m := _ENDED.fullmatch(clause):
        thing = _trim(m.group("x") or m.group("y") or "")
        key = _key("prefers_", thing)
        return _Statement("preference", key, thing, ended=True) if key and thing else None
    if m := _PREFERENCE.fullmatch(clause):
        return _about("preference", "prefers_", _PREFERENCE_VERBS[m.group("verb").lower()], m.group("x"))
    if m := _INTEREST.fullmatch(clause):
        return _about("interest", "interest_", "Interested in", m.group("x"))
    if m := _GOAL.fullmatch(clause):
        return _about("goal", "goal_", "Wants to", m.group("x"))
    if not inside_remember and (m := _REMEMBER.fullmatch(clause)):
        return _remember(m.group("x"), operator=operator)
    if operator and (m := _DIRECTIVE.fullmatch(clause)):
        return _directive(m.group("mode"), m.group("x"))
    return None


def _name(raw: str) -> _Statement | None:
    name = re.split(r"\s*(?:[,;:()]|\s-\s|\band\b|\bbut\b|\bby the way\b)\s*", raw.strip(), maxsplit=1)[0]
    words = name.split()
    if not words or words[0].lower() in _NOT_NAMES:
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
            if not (word[:1].isupper() or word in _NAME_PARTICLES):
                break
            kept.append(word)
        words = kept
    name = " ".join(words)
    if len(words) > 4 or not re.fullmatch(r"[^\W\d_][\w'.\-]*(?:\s[^\W\d_][\w'.\-]*)*", name):
        return None
    return _Statement("identity", "name", _cap(name))


def _home(raw: str, *, all_lower_case: bool) -> _Statement | None:
    words = raw.split()
    kept: list[str] = []
    for word in words:
        if kept and _bare(word) in _PLACE_CONNECTORS:
            break
        kept.append(word)
    place = _trim(" ".join(kept))
    if not place or _bare(kept[0]) in {"a", "an"} or _points_at_conversation(place):
        return None
    # A place name has a capital unless the writer types everything in lower case:
    # this keeps "I live in fear" or "I live in the countryside" out.
    if place == place.lower() and not all_lower_case:
        return None
    return _Statement("identity", "home_city", _cap(place))


def _about(category: str, prefix: str, lead: str, raw: str) -> _Statement | None:
    thing = _trim(raw)
    if not thing or _points_at_conversation(thing):
        return None
    first_words = [_bare(w) for w in thing.split()[:3]]
    if any(w in _SPEECH_VERBS for w in first_words):
        return None
    key = _key(prefix, thing)
    return _Statement(category, key, _cap(f"{lead} {thing}")) if key else None


def _remember(raw: str, *, operator: bool) -> _Statement | None:
    fact = _trim(raw)
    # "Remember that my name is Sam" is an identity statement, not a context note.
    inner = _match(fact, operator=operator, inside_remember=True)
    if inner is not None:
        return inner
    if not fact or any(_bare(w) in _SECOND_PERSON for w in fact.split()):
        # "Remember that you must …" instructs the agent; it is not a fact about the work.
        return None
    subject = fact
    for pattern, replacement in _FIRST_PERSON_START:
        if m := pattern.match(fact):
            # "my sister is Ana" → key "sister"; "I'm allergic to nuts" → "allergic_to_nuts".
            subject = fact[m.end() :] if replacement != "The user's" else fact
            fact = replacement + fact[m.end() :]
            break
    copula = _COPULA.search(subject)
    key = _key("", subject[: copula.start()] if copula else subject, cut_at_connectors=False)
    if not key:
        return None
    if copula is not None:
        # The key names the subject, so the value is what it is: "training_days: Tuesday and Thursday".
        answer = _NAMED.sub("", _trim(subject[copula.end() :]), count=1)
        if answer:
            return _Statement("context", key, _cap(answer))  # as written: "prod-3" stays lower case
    return _Statement("context", key, _cap(fact[:1].upper() + fact[1:]))


def _directive(mode: str, raw: str) -> _Statement | None:
    rule = _trim(raw)
    words = rule.split()
    if len(words) < 2 or _bare(words[0]) in _NOT_RULES or _bare(words[0]).endswith("ed"):
        return None
    # The whole opening of the rule names it, so "Never answer in English" replaces
    # "Always answer in English" and "Always answer briefly" stays a separate rule.
    key = _key("rule_", rule, cut_at_connectors=False)
    return _Statement("directive", key, _cap(f"{mode.capitalize()} {rule}")) if key else None


def _points_at_conversation(text: str) -> bool:
    return any(_bare(w) in _DEICTIC for w in text.split())


def _bare(word: str) -> str:
    return word.strip(".,;:!?\"'()[]").lower()


def _key(prefix: str, phrase: str, *, cut_at_connectors: bool = True) -> str:
    """``prefix`` + the slug of ``phrase`` (see the module docstring), at most 64 characters."""
    phrase = _CLAUSE_END.split(phrase, maxsplit=1)[0]  # one phrase: "answer in English, even if …"
    spelled = phrase.replace("+", " plus ").replace("#", " sharp ")  # C++ and C# are not C
    folded = unicodedata.normalize("NFKD", spelled).encode("ascii", "ignore").decode().lower()
    words = re.findall(r"[a-z0-9]+", folded)
    while words and words[0] in _SLUG_SKIP_LEADING:
        words.pop(0)
    kept: list[str] = []
    for word in words:
        # "not to …" stays whole so that "prefer not to X" never shares a key with "prefer X".
        if cut_at_connectors and kept and word in _SLUG_CONNECTORS and not (word == "to" and kept[-1] == "not"):
            break
        kept.append(word)
        if len(kept) == _SLUG_WORDS:
            break
    while kept and kept[-1] in _SLUG_TRAILING:
        kept.pop()
    if not kept:
        return ""
    key = prefix + "_".join(kept)
    while len(key) > MAX_KEY_CHARS and len(kept) > 1:
        kept.pop()
        key = prefix + "_".join(kept)
    return key[:MAX_KEY_CHARS].rstrip("_")


def _cap(value: str) -> str:
    value = " ".join(value.split())
    if len(value) <= MAX_VALUE_CHARS:
        return value
    cut = value[: MAX_VALUE_CHARS + 1].rsplit(" ", 1)[0]
    return _trim(cut if len(cut) >= MAX_VALUE_CHARS // 2 else value[:MAX_VALUE_CHARS])
