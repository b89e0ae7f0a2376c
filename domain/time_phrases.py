"""Where the date phrases of a text are (ADR-0075): the one pattern that reads them, tried only at
the places a phrase can begin. :mod:`time_expressions` gives the phrases their days.

Pure. A text holding no hint of a date (no number, no calendar word) stops at a check that costs
about one ``str.split``; an ASCII text is matched lower-cased by the pattern without case
folding (the same matches, at half the cost), any other text as it is, case folded."""

from __future__ import annotations

import re

from fermix_memory.domain import time_calendar as cal

_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november"
          r"|december|sept|jan|feb|mar|apr|jun|jul|aug|sep|oct|nov|dec)")
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT = (r"(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
          r"|(?:a\s+)?couple\s+of|(?:a\s+)?few|several)")
_ORD = r"(?:st|nd|rd|th)?"
_ON_WEEKDAY = rf"(?:{_WEEKDAY},?\s+)?"  # "Saturday 11 May 2024": the date decides

_PHRASE_SOURCE = (
    r"\b(?:(?P<prep>on|in|during|at|over|since|from|of)\s+)?"
    r"(?P<wk>(?:the\s+)?week\s+of\s+)?"
    r"(?:"
    rf"(?P<iso>{_ON_WEEKDAY}(?P<iso_y>\d{{4}})[-/.](?P<iso_m>\d{{1,2}})[-/.](?P<iso_d>\d{{1,2}})(?!\d))"
    rf"|(?P<num>{_ON_WEEKDAY}(?P<num_a>\d{{1,2}})[/.](?P<num_b>\d{{1,2}})[/.](?P<num_y>\d{{4}}|\d{{2}})(?![\d/.]\d))"
    rf"|(?P<dm>{_ON_WEEKDAY}(?:the\s+)?(?P<dm_d>\d{{1,2}}){_ORD}(?:\s+of)?\s+(?P<dm_m>{_MONTH})\b\.?"
    r"(?:,?\s+(?P<dm_y>\d{4})(?!\d))?)"
    rf"|(?P<md>{_ON_WEEKDAY}(?P<md_m>{_MONTH})\.?\s+(?:the\s+)?(?P<md_d>\d{{1,2}}){_ORD}(?![\d:])\b"
    r"(?:,?\s+(?P<md_y>\d{4})(?!\d))?)"
    rf"|(?P<mo>(?:(?P<mo_q>early|mid|late)[-\s]+)?(?P<mo_m>{_MONTH})\b\.?"
    r"(?:,?\s+(?P<mo_y>\d{4})(?!\d))?)"
    r"|(?P<yr>(?P<yr_the>the\s+year\s+)?(?P<yr_y>[12]\d{3})(?![\d:]))"
    r"|(?P<rd>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow"
    r"|(?:yesterday|tomorrow)(?:\s+(?:morning|afternoon|evening|night))?|earlier\s+today|today"
    r"|tonight|this\s+(?:morning|afternoon|evening)|last\s+night)"
    rf"|(?P<ago>(?P<ago_n>{_COUNT})\s+(?P<ago_u>day|week|month|year)s?\s+(?:ago|back))"
    r"|(?P<unit>(?P<unit_w>last|this|next|past|previous|the\s+past|the\s+last|the\s+previous"
    r"|this\s+coming|the\s+coming|coming)\s+(?P<unit_u>weekend|week|month|year)\b)"
    r"|(?P<wend>the\s+weekend)"
    r"|(?P<wd>(?:(?P<wd_w>last|this\s+coming|this|next|coming|past|previous)\s+)?"
    rf"(?P<wd_d>{_WEEKDAY})(?P<wd_pl>s|\s+(?:nights|mornings|afternoons|evenings))?)"
    rf"|(?P<od>{_ON_WEEKDAY}the\s+(?P<od_d>\d{{1,2}})(?:st|nd|rd|th))"
    r")\b")
# Longest forms first, no repeat inside a repeat: time linear in the length.
PHRASE = re.compile(_PHRASE_SOURCE, re.IGNORECASE)
# The same pattern for a lower-cased ASCII text: its literals are lower case and it has no
# letter class, so it finds there what PHRASE finds in the text, without folding each letter.
_PHRASE_LOWER = re.compile(_PHRASE_SOURCE)

# a text holding none of these (lower-cased) has no date phrase: most turns stop here
_HINTS = ("day", "week", "month", "year", "night", "morn", "noon", "evening", "tomorrow", "jan",
          "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DIGIT = re.compile(r"[0-9]")
# every phrase holds one of these words (or a number); the words that may come before the
# first of them in a phrase ("on the 3rd", "a couple of days", "during the week of")
_TRIGGERS = frozenset([*cal.MONTHS, *cal.WEEKDAYS, "today", "tonight", "yesterday", "tomorrow",
                       "morning", "afternoon", "evening", "night", "day", "days", "week", "weeks",
                       "weekend", "month", "months", "year", "years"])
# trigger words no phrase begins with (only a leader before them can begin one: "last night")
_NO_START = frozenset(["morning", "afternoon", "evening", "night", "day", "days", "weeks", "weekend",
                       "month", "months", "year", "years"])
LEADERS = frozenset([*cal.COUNTS, "on", "in", "during", "at", "over", "since", "from", "of",
                     "the", "last", "this", "next", "past", "previous", "coming", "early", "mid",
                     "late", "earlier"])
_WORD = re.compile(r"[a-z]+")
_NUMBERS = re.compile(r"[0-9]+")  # a run of digits: a number begins where one begins
_MAX_LEADERS = 5
# An ASCII text through bytes.translate: letters a-z kept, digits as "0", the rest as spaces; its
# words are then as _WORD finds them when it has no "0".
_LETTERS_ONLY = bytes(c if 97 <= c <= 122 else 48 if 48 <= c <= 57 else 32 for c in range(256))
_TRIGGER_BYTES = {word.encode(): word for word in _TRIGGERS}


def _leaders(low: str, at: int) -> list[int]:
    """Where a phrase whose first trigger word begins at ``at`` may begin, earliest first: at the
    leader words just before it ("on the 3rd", "a couple of days"), or at the word itself."""
    starts = [at]
    for _ in range(_MAX_LEADERS):
        end = starts[-1] - 1
        if end < 1 or low[end] not in " -":
            break
        begin = max(low.rfind(" ", 0, end), low.rfind("-", 0, end)) + 1
        if low[begin:end] not in LEADERS:
            break
        starts.append(begin)
    return starts[::-1]


def _triggers(low: str, words: set[str] | frozenset[str], numbers: bool) -> list[tuple[int, bool]]:
    """Where the trigger ``words`` and the numbers of ``low`` (if it may hold any) begin, in
    order, each with whether a phrase may begin right there."""
    at = [(m.start(), True) for m in _NUMBERS.finditer(low)] if numbers else []
    for word in words:
        i = low.find(word)
        can_start = word not in _NO_START
        while i >= 0:
            after = i + len(word)
            if (i == 0 or not low[i - 1].isalpha()) and not low[after:after + 1].isalpha():
                at.append((i, can_start))
            i = low.find(word, after)
    at.sort()
    return at


def _matches(subject: str, low: str, pattern: re.Pattern[str], words: set[str] | frozenset[str],
             numbers: bool = True) -> list[re.Match[str]]:
    """The phrases of ``subject`` (the text, or ``low`` itself), as ``pattern.finditer`` would
    find them, trying only the places a phrase can begin at (about a microsecond a place)."""
    found: list[re.Match[str]] = []
    done = 0
    for trigger, can_start in _triggers(low, words, numbers):
        if trigger < done:
            continue
        starts = _leaders(low, trigger) if trigger > 1 and low[trigger - 1] in " -" else (trigger,)
        for start in starts:
            if start < done or (start == trigger and not can_start):
                continue
            m = pattern.match(subject, start)
            if m is not None:
                found.append(m)
                done = m.end()
                break
    return found


def _hinted(low: str) -> bool:
    return any(hint in low for hint in _HINTS) or _DIGIT.search(low) is not None


def phrases(text: str, low: str) -> list[re.Match[str]]:
    """The date phrases of ``text`` (``low`` is ``text.lower()``), in order, none overlapping."""
    if text.isascii():
        letters = low.encode("ascii").translate(_LETTERS_ONLY)
        words: set[str] | frozenset[str]
        numbers = b"0" in letters
        if numbers:  # a phrase may begin at a number
            words = _TRIGGERS.intersection(_WORD.findall(low))
        else:
            tokens = letters.split()
            if _TRIGGER_BYTES.keys().isdisjoint(tokens):
                return []  # no calendar word, no number: no phrase
            words = {_TRIGGER_BYTES[t] for t in _TRIGGER_BYTES.keys() & tokens}
        return _matches(low, low, _PHRASE_LOWER, words, numbers)
    if not _hinted(low):
        return []
    if len(low) != len(text):  # a letter whose lower case is longer: read it all
        return list(PHRASE.finditer(text))
    return _matches(text, low, PHRASE, _TRIGGERS.intersection(_WORD.findall(low)))
