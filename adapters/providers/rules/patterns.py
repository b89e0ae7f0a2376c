"""What the rules extractor (:mod:`.extractor`) recognises: the sentence shapes as regular
expressions, matched case-insensitively at the start of a sentence, and the word lists that keep
keys and values to whole phrases of plain facts."""

from __future__ import annotations

import re

SLUG_WORDS = 4

APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "mt", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e", "ft", "inc"}
)

FILLER = re.compile(
    r"(?:(?:hi|hello|hey|oh|also|and|so|well|actually|btw|by the way|anyway|fyi|ok|okay|yes|yeah|no"
    r"|just so you know|for the record|for context|as you know)\b[\s,:!\-]*)*",
    re.IGNORECASE,
)
HYPOTHETICAL = re.compile(
    r"(?:if|suppose|supposing|imagine|assuming|hypothetically|what if|in case|let's say)\b", re.IGNORECASE
)
CLAUSE_SPLIT = re.compile(
    r"\s*[,;]\s*(?:(?:and|but|so)\s+)?(?=(?:i|my|im)\b)|\s+(?:and|but|so)\s+(?=(?:i|my|im)\b)",
    re.IGNORECASE,
)

_I_AM = r"(?:i'm|i am|im)"
_ADV = r"(?:(?:really|actually|now|currently|just|recently|also|still|very|so|totally|definitely)\s+)*"

NAME = re.compile(r"(?:my name is|my name's|i'm called|i am called|im called)\s+(?P<x>.+)", re.IGNORECASE)
HOME = re.compile(
    rf"(?:i\s+{_ADV}(?:live in|moved to|relocated to)|i(?:'ve| have)\s+{_ADV}moved to"
    rf"|{_I_AM}\s+{_ADV}(?:based in|living in|located in))\s+(?P<x>.+)",
    re.IGNORECASE,
)
ENDED = re.compile(
    r"(?:i\s+(?:don't|do not|dont)\s+(?:like|love|prefer)\s+(?P<x>.+?)\s+(?:any\s?more|any longer)"
    r"|i\s+no longer\s+(?:like|love|prefer)\s+(?P<y>.+))",
    re.IGNORECASE,
)
PREFERENCE = re.compile(rf"i\s+{_ADV}(?P<verb>prefer|like|love)\s+(?P<x>.+)", re.IGNORECASE)
INTEREST = re.compile(rf"{_I_AM}\s+{_ADV}(?:interested in|into)\s+(?P<x>.+)", re.IGNORECASE)
GOAL = re.compile(
    rf"(?:i\s+{_ADV}want to|my\s+(?:main\s+|big\s+)?goal is to|{_I_AM}\s+{_ADV}trying to)\s+(?P<x>.+)",
    re.IGNORECASE,
)
REMEMBER = re.compile(r"(?:please\s+)?remember\s+that\s+(?P<x>.+)", re.IGNORECASE)
DIRECTIVE = re.compile(r"(?:please\s+)?(?P<mode>always|never)\s+(?P<x>.+)", re.IGNORECASE)
COPULA = re.compile(r"\s(?:is|are|was|were|will be|=)\s", re.IGNORECASE)
CLAUSE_END = re.compile(r"\s*(?:[,;:()]|\s[-\u2013\u2014]\s)")
NAMED = re.compile(r"^(?:called|named)\s+", re.IGNORECASE)

PREFERENCE_VERBS = {"prefer": "Prefers", "like": "Likes", "love": "Loves"}
# Words that point at the conversation itself: "I like this", "I want to fix it".
DEICTIC = frozenset(
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
SPEECH_VERBS = frozenset(
    {"say", "tell", "answer", "share", "discuss", "talk", "comment", "think", "believe", "know", "ask",
     "imagine", "add", "mention", "see", "check", "confirm", "clarify", "understand", "hear", "point"}
)  # fmt: skip
NAME_PARTICLES = frozenset({"de", "da", "di", "van", "von", "der", "den", "del", "la", "le", "bin", "al"})
SECOND_PERSON = frozenset({"you", "your", "yours", "yourself"})
NOT_NAMES = frozenset({"not", "a", "an", "the", "irrelevant", "none", "private", "secret", "unknown", "nobody"})
# "Never mind", "Always has been": sentence openers that are not standing rules.
NOT_RULES = frozenset(
    {"mind", "again", "ever", "before", "been", "had", "have", "has", "was", "were", "is", "are", "will",
     "would", "did", "do", "does", "knew", "thought", "seen", "heard", "happy", "fun", "a", "the"}
)  # fmt: skip
# Words that start a time or a condition: a key stops before them ("climb Mont Blanc next summer").
TIME_WORDS = frozenset(
    {"next", "last", "this", "every", "each", "tomorrow", "today", "tonight", "soon", "someday", "eventually",
     "even", "yet", "already", "by", "until", "within", "ago", "now"}
)  # fmt: skip
SLUG_SKIP_LEADING = frozenset({"a", "an", "the", "my", "our", "some", "to"})
SLUG_CONNECTORS = frozenset(
    {"over", "than", "instead", "rather", "because", "since", "but", "when", "while", "whenever", "if",
     "unless", "although", "though", "for", "with", "without", "at", "on", "in", "during", "after",
     "before", "from", "to", "as", "so", "which", "who", "where", "that", "especially", "like", "except",
     "via", *TIME_WORDS}
)  # fmt: skip
SLUG_TRAILING = frozenset(
    {"and", "or", "of", "the", "a", "an", "my", "again", "too", "also", "still", "lot", "much", "very", "so",
     "to", "in", "on", "at", "for", "with", "by", "from", "if", "when", "than", "as", "that", *TIME_WORDS}
)  # fmt: skip
PLACE_CONNECTORS = frozenset(
    {"because", "since", "for", "with", "but", "when", "where", "after", "before", "last", "this", "next",
     "recently", "ago", "yesterday", "today", "now", "so", "which", "who", "to", "and"}
)  # fmt: skip
FIRST_PERSON_START = (
    (re.compile(r"(?:i'm|i am|im)\b", re.IGNORECASE), "The user is"),
    (re.compile(r"(?:i've|i have)\b", re.IGNORECASE), "The user has"),
    (re.compile(r"i\b(?!')", re.IGNORECASE), "The user"),
    (re.compile(r"my\b", re.IGNORECASE), "The user's"),
)
