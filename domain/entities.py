"""Names in text: the people, places, organisations, pets, products and events a turn is about.

Heuristics, no model (ADR-0077): a name is a span of capitalised words ("Kestrel Health"),
which may hold a lower-case joining word between two of them ("Bank of England", "São Paulo de
Olivença") and may end with an event's head word ("Berlin marathon", "Bath half"). A possessive
"'s" ends a span and is dropped. Never names: "I" and other single letters, numbers, the
calendar's words (dates are read elsewhere) and the closed-class words, interjections and frequent
verbs of :data:`~.common_words.NEVER_NAMES` — the latter also drop an article ("saw The Lanterns"
names "lanterns", as "the Lanterns" does). A capitalised word at a sentence's start (or written in
capitals, "WOW THAT'S GREAT") counts unless it is such a word, or a frequent noun or adjective of
:data:`~.common_words.COMMON_WORDS` standing alone ("Honey and lemon." names nothing, "Glass
Houses is back" names "glass houses"). Names come out case-folded, each once, in order.

One regular expression finds the capitalised words (the engine skips the rest of the text), then
one pass over them, each looking only at the few characters around it: time is linear in the
text's length, and a turn in lower case costs one ``str.islower``.
"""

from __future__ import annotations

import re

from .common_words import COMMON_WORDS, NEVER_NAMES

# A capitalised word (or one starting with a letter that is not ASCII lower-case; checked after):
# it starts where no word character stands before it (nor one and an apostrophe: "O'Brien");
# inner apostrophes and hyphens belong to it. The pattern opens with a plain class (A-Z or not
# ASCII) and looks back from there, so the engine skips lower-case text without trying it.
_CAPITAL = re.compile(r"[A-Z\x80-\U0010ffff](?<=[^\W\d_a-z])(?<![\w-].)(?<!\w['\u2019].)(?:[\w'\u2019-]*\w)?")
# What may stand between two capitalised words of one name: spaces, with at most two lower-case
# joining words ("Bank of England", "Bank of the West", "São Paulo de Olivença").
_JOIN = re.compile(
    r"[ \t]+(?:(?:of|the|de|da|di|do|dos|das|del|della|van|von|der|la|le|du|y|and(?=[ \t]+the\b))[ \t]+){0,2}"
)
# Lower-case words that may end a name of an event ("Berlin marathon", "Brighton half marathon").
_EVENT = re.compile(r"(?:[ \t]+(?:marathon|half|festival|race|triathlon|trail|ultra|conference)\b){1,2}")
# A quoted title: up to 60 characters between quotes, opening with a capital ('Salt and Iron').
_QUOTED = re.compile(r"['\u2018\"\u201c](?<!\w.)([^\W\d_a-z][^'\u2019\"\u201d\n]{0,60}?)['\u2019\"\u201d](?!\w)")
_ARTICLES = ("the ", "a ", "an ")
# Characters that may stand between a sentence's end and its first word.
_OPENERS = frozenset(" \t\r\n\"'\u201c\u2018«([*_")
# Sentence-initial common words that are not names alone: adverbs and participles by their ending.
_NOT_NAME_ENDINGS = (
    "ously", "ally", "ably", "ibly", "ently", "antly", "ately", "fully", "ively", "edly", "ingly", "ing", "ed",
)


def _no_name(word: str) -> bool:
    """Whether a capitalised word is never part of a name: "I", "The", "I'm", "AMAZING" (a long
    word in capitals is shouting; a short one may be an acronym, "NHS")."""
    word = word.replace("\u2019", "'").removesuffix("'s")
    return (len(word) < 2 or word.lower() in NEVER_NAMES or not word[0].isupper()
            or (len(word) > 5 and word.isupper()))


# The never-names as a sentence or a shout writes them ("The", "I'm", "WHAT"): known at a glance.
_NO_NAME_FORMS = frozenset(form for w in NEVER_NAMES for form in (w.capitalize(), w.upper()) if _no_name(form))


def entities_in(text: str) -> tuple[str, ...]:
    """The names ``text`` mentions, normalised (case-folded), each once, in order of appearance."""
    if not text or text.islower():
        return ()
    names: dict[str, None] = {}
    span: list[str] = []
    weak = False  # the span is one word that is no name alone
    end = 0  # where the span's last word ends, or -1 when it ended with a possessive
    titles = _titles(text)
    skip_until = 0
    for match in _CAPITAL.finditer(text):
        begin = match.start()
        if titles and begin >= titles[0][0]:  # a quoted title is one name, its words no others
            if span:
                _close(text, span, weak, end, names)
                span = []
            while titles and begin >= titles[0][0]:
                _, skip_until, title = titles.pop(0)
                names.setdefault(title, None)
        if begin < skip_until:
            continue
        word = match.group()
        if len(word) < 2 or word in _NO_NAME_FORMS:  # no name: it ends a span
            if span:
                _close(text, span, weak, end, names)
                span = []
            continue
        joiners = _joiners(text, end, begin, weak and span[0] not in COMMON_WORDS) if span else None
        if span and joiners is None:
            _close(text, span, weak, end, names)
            span = []
        if "\u2019" in word:
            word = word.replace("\u2019", "'")
        possessive = word.endswith("'s")
        if possessive:
            word = word[:-2]
        low = word.lower()
        # a long word in capitals is shouting ("AMAZING"); a short one may be an acronym ("NHS")
        if len(word) < 2 or low in NEVER_NAMES or not word[0].isupper() or (len(word) > 5 and word.isupper()):
            if span:
                _close(text, span, weak, end, names)
                span = []
            continue
        if span and joiners is not None:
            span.extend(joiners)
            weak = False
        else:
            weak = _weak(low, word) and _at_start(text, begin)
        span.append(low)
        end = -1 if possessive else match.end()
    if span:
        _close(text, span, weak, end, names)
    for _, _, rest in titles:
        names.setdefault(rest, None)
    return tuple(names)


def _titles(text: str) -> list[tuple[int, int, str]]:
    """Quoted titles ('Nine Winters in Oslo'): every word of four letters or more capitalised."""
    found = []
    for match in _QUOTED.finditer(text):
        words = match.group(1).split()
        if len(words) <= 7 and all(w[0].isupper() or len(w) < 4 for w in words):
            low = match.group(1).lower().replace("\u2019", "'")
            for article in _ARTICLES:
                if low.startswith(article):
                    low = low[len(article):]
            found.append((match.start(), match.end(), low))
    return found


def _joiners(text: str, end: int, begin: int, verb: bool) -> list[str] | None:
    """The joining words between a span's last word and the next capitalised word, or None."""
    if end < 0:
        return None
    if text[end:begin] == " ":
        return []
    if begin - end > 24 or verb:  # "Booked the Juniper Inn": no name of "Booked"
        return None
    join = _JOIN.fullmatch(text, end, begin)
    return join.group().split() if join else None


def _at_start(text: str, begin: int) -> bool:
    """Whether a sentence (or a clause after a comma) starts at ``begin``."""
    j = begin - 1
    while j >= 0 and text[j] in _OPENERS:
        j -= 1
    return j < 0 or not text[j].isalnum()


def _weak(low: str, word: str) -> bool:
    """Whether the word, alone and opening a sentence, is more likely no name."""
    return low in COMMON_WORDS or word.isupper() or (len(low) > 5 and low.endswith(_NOT_NAME_ENDINGS))


def _close(text: str, span: list[str], weak: bool, end: int, names: dict[str, None]) -> None:
    if end > 0:
        event = _EVENT.match(text, end)
        if event:  # the event, then the place alone ("Lisbon marathon", "Lisbon")
            names.setdefault(" ".join([*span, *event.group().split()]), None)
    if not weak or len(span) > 1:
        names.setdefault(" ".join(span), None)
