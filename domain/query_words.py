"""The words of a question that say what is wanted: everything but the stop words (R-FTS)."""

from __future__ import annotations

import re

# Words too common to say anything about what is wanted; dropped unless nothing else is left.
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
    "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has",
    "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not",
    "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own",
    "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
    "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
))
# Words a question about a conversation uses without naming what it is about ("what did we talk
# about on 3 May?"): with the stop words, what a date filter may say and still be only a filter.
CHAT_WORDS = frozenset((
    "talk", "talked", "talking", "chat", "chatted", "chatting", "discuss", "discussed", "say", "said", "tell",
    "told", "speak", "spoke", "mention", "mentioned", "happen", "happened", "us", "conversation", "go", "went",
    "on", "get", "got", "up",
))
_WORD = re.compile(r"\w+", re.UNICODE)


def content_words(text: str) -> list[str]:
    """The lower-cased words of ``text`` that are not stop words, in order, each once."""
    return list(dict.fromkeys(w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOPWORDS))
