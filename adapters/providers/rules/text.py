"""Text handling of the rules extractor: sentences out of a message, trimming, and the key
slug and capped value of a statement (see :mod:`.extractor`)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from fermix_memory.adapters.providers.rules import patterns as pat
from fermix_memory.domain.memory import MAX_VALUE_CHARS
from fermix_memory.domain.values import MAX_KEY_CHARS

# A sentence ends at ". ! ? ;" (a closing quote or bracket may follow) and a space, or at a
# full-width full stop, exclamation or question mark (U+3002, U+FF01, U+FF1F), which needs no
# space: 'Where is it?" I live in Paris.' is two sentences.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?;])|(?<=[.!?;][\"'\u201d\u2019)\]]))\s+|(?<=[\u3002\uff01\uff1f])\s*(?=\S)")


def sentences(text: str) -> Iterator[str]:
    """The sentences of ``text``, outside quoted lines (``>``) and fenced code, spaces collapsed."""
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
        for piece in _SENTENCE_END.split(stripped):
            if merged and _ends_with_abbreviation(merged[-1]):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        yield from merged


def _ends_with_abbreviation(piece: str) -> bool:
    if not piece.endswith("."):
        return False
    words = piece[:-1].rsplit(None, 1)
    return bool(words) and words[-1].lower() in pat.ABBREVIATIONS


def is_question(sentence: str) -> bool:
    """True when the sentence's trailing punctuation holds a "?" ("Really? :)" included)."""
    for char in reversed(sentence):
        if char.isalnum():
            return False
        if char in "?\uff1f":
            return True
    return False


def trim(text: str) -> str:
    """Strip surrounding space and trailing punctuation or emoji (keep ``C++``, ``C#``, ``)``)."""
    text = text.strip()
    end = len(text)
    while end and not (text[end - 1].isalnum() or text[end - 1] in ")]\"'+#%"):
        end -= 1
    return text[:end].rstrip()


def strip_filler(text: str) -> str:
    """``text`` without a leading greeting or filler ("Hi,", "Also,", "By the way")."""
    match = pat.FILLER.match(text)
    return text[match.end() :] if match else text


def bare_word(word: str) -> str:
    """``word`` in lower case without surrounding punctuation."""
    return word.strip(".,;:!?\"'()[]").lower()


def slug_key(prefix: str, phrase: str, *, cut_at_connectors: bool = True) -> str:
    """``prefix`` + the slug of ``phrase`` (see :mod:`.extractor`), at most 64 characters."""
    phrase = pat.CLAUSE_END.split(phrase, maxsplit=1)[0]  # one phrase: "answer in English, even if …"
    spelled = phrase.replace("+", " plus ").replace("#", " sharp ")  # C++ and C# are not C
    folded = unicodedata.normalize("NFKD", spelled).encode("ascii", "ignore").decode().lower()
    words = re.findall(r"[a-z0-9]+", folded)
    while words and words[0] in pat.SLUG_SKIP_LEADING:
        words.pop(0)
    kept: list[str] = []
    for word in words:
        # "not to …" stays whole so that "prefer not to X" never shares a key with "prefer X".
        if cut_at_connectors and kept and word in pat.SLUG_CONNECTORS and not (word == "to" and kept[-1] == "not"):
            break
        kept.append(word)
        if len(kept) == pat.SLUG_WORDS:
            break
    while kept and kept[-1] in pat.SLUG_TRAILING:
        kept.pop()
    if not kept:
        return ""
    key = prefix + "_".join(kept)
    while len(key) > MAX_KEY_CHARS and len(kept) > 1:
        kept.pop()
        key = prefix + "_".join(kept)
    return key[:MAX_KEY_CHARS].rstrip("_")


def capped_value(value: str) -> str:
    """``value`` with single spaces, cut at a word boundary to the longest value a row may hold."""
    value = " ".join(value.split())
    if len(value) <= MAX_VALUE_CHARS:
        return value
    cut = value[: MAX_VALUE_CHARS + 1].rsplit(" ", 1)[0]
    return trim(cut if len(cut) >= MAX_VALUE_CHARS // 2 else value[:MAX_VALUE_CHARS])
