"""Dates in text: the days a question asks about and the days a turn speaks of (ADR-0075).

Pure: relative phrases ("last Friday") count from an anchor the caller gives (the question's
moment, or the turn's own time), in UTC days. :mod:`time_phrases` finds the phrases (a cheap
check for a hint of a date first: most texts stop there); this module gives them their days.

Rules (ADR-0075):
- numeric dates are day first (26/02/2024, 26.02.24); month first only when the first number
  cannot be a month's (02/26/2024); two-digit years are 20yy below 70, else 19yy.
- a date without a year, a month without a year, a plain weekday ("on Monday") look back: the
  latest one on or before the anchor's day; in a stored turn a plain weekday is the latest one
  BEFORE the turn's day (a turn that says "on Monday" on a Monday means the week before) and a
  date without a year the nearest one ("the exam is on 3 June", "it was on 3 May"). A
  future cue earlier in the same clause ("will", "'ll", "going to", "see you", "can't wait",
  "this coming") turns them forward: the next one after the anchor's day. "next Monday" is
  always forward, "last Monday" always the latest one before the anchor's day.
- habits are no dates: "every Monday", "every weekend", "on Mondays", "Tuesday nights".
- "last/this/next week|month|year" are calendar units (ISO weeks, Monday to Sunday); "the past
  week/month/year" the 7/30/365 days ending on the anchor's day; weekends are Saturday and
  Sunday ("last weekend" is the one before the anchor's week, "the weekend" the latest begun;
  "a long weekend" is none).
- "N days ago" is that day; "a couple of" 2-3, "a few" 2-5, "several" 3-7; "N weeks ago" the
  seven days centred on 7·N days back; "N months/years ago" the calendar month/year.
- "early/mid/late May": days 1-10, 11-20, 21-end; "the week of 15 January": its ISO week; "since
  X": from X to the anchor's day.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

import attrs

from fermix_memory.domain import time_calendar as cal
from fermix_memory.domain.time_phrases import phrases


@attrs.frozen
class DayWindow:
    """The days from ``first`` to ``last``, both included."""

    first: date
    last: date


@attrs.frozen
class DateReading:
    """What :func:`read_dates` found in a text."""

    windows: tuple[DayWindow, ...]
    rest: str  # the text with its date phrases taken out
    relative: bool  # whether any phrase needed the anchor


MAX_MARKED_DAYS = 7  # a turn's window wider than this (a month, a year) marks no days
_DAY_STEPS = tuple(timedelta(days=i) for i in range(MAX_MARKED_DAYS))

_FULL_MONTHS = frozenset(name for name in cal.MONTHS if len(name) > 4 or name in {"may", "june", "july"})
# A clause that speaks of what is to come: one of the future words as a word of its own, or a
# future phrase anywhere (the clause lower-cased, its apostrophes plain).
_FUTURE = re.compile(
    r"(?<![a-z])(?:" + "|".join(sorted(cal.FUTURE_WORDS, key=len, reverse=True)) + r")(?![a-z])|"
    + "|".join(re.escape(phrase) for phrase in cal.FUTURE_PHRASES))


class _Found(NamedTuple):
    first: date
    last: date
    relative: bool
    start: int
    end: int


class _Context:
    """One text, its anchor's day and whether it is a stored turn (said) or a question."""

    def __init__(self, text: str, day: date, said: bool) -> None:
        self.text, self.day, self.said = text, day, said

    def habit(self, start: int) -> bool:
        """Whether "every" or "each" comes right before ``start``."""
        return self.text[max(0, start - 7):start].lower().rstrip().endswith(cal.HABIT_WORDS)

    def future(self, start: int) -> bool:
        """Whether the clause before ``start`` speaks of what is still to come."""
        text, low = self.text, max(0, start - 80)
        cut = max(text.rfind(".", low, start), text.rfind(",", low, start), text.rfind("!", low, start),
                  text.rfind("?", low, start), text.rfind(";", low, start), text.rfind("\n", low, start))
        clause = text[max(low, cut + 1):start].lower().replace("\u2019", "'")
        return _FUTURE.search(clause) is not None


def _absolute(m: re.Match[str], ctx: _Context) -> tuple[cal.Span, bool] | None:
    if m["iso"]:
        return cal.one_day(date(int(m["iso_y"]), int(m["iso_m"]), int(m["iso_d"]))), False
    if m["num"]:
        day, month, year = int(m["num_a"]), int(m["num_b"]), int(m["num_y"])
        if month > 12 >= day:
            day, month = month, day
        if len(m["num_y"]) == 2:
            year += 2000 if year < 70 else 1900
        return cal.one_day(date(year, month, day)), False
    if m["dm"] or m["md"]:
        which = "dm" if m["dm"] else "md"
        month, dom, spelt_year = cal.MONTHS[m[f"{which}_m"].lower()], int(m[f"{which}_d"]), m[f"{which}_y"]
        if spelt_year:
            return cal.one_day(date(int(spelt_year), month, dom)), False
        if ctx.future(m.start()):
            return cal.yearless_day(ctx.day, month, dom, future=True), True
        if ctx.said:  # a turn: "the exam is on 3 June", "it was on 3 May"
            return cal.nearest_day(ctx.day, month, dom), True
        return cal.yearless_day(ctx.day, month, dom, future=False), True
    return None


def _months_years(m: re.Match[str], ctx: _Context) -> tuple[cal.Span, bool] | None:
    if m["mo"]:
        name, part = m["mo_m"].lower(), (m["mo_q"] or "").lower()
        month = cal.MONTHS[name]
        if m["mo_y"]:
            return cal.month_span(int(m["mo_y"]), month, part), False
        if not (m["prep"] or part) and (name not in _FULL_MONTHS or name in {"may", "march"}):
            return None  # "I may", "march on": a bare month needs "in", "of", "mid-"...
        return cal.yearless_month(ctx.day, month, part, ctx.future(m.start())), True
    if m["yr"]:
        if not (m["yr_the"] or (m["prep"] or "").lower() in {"in", "during", "since", "of"}):
            return None
        year = int(m["yr_y"])
        return (date(year, 1, 1), date(year, 12, 31)), False
    if m["od"]:
        if (m["prep"] or "").lower() != "on":
            return None  # "the 3rd time" is no date; "on the 3rd" is
        return cal.ordinal_day(ctx.day, int(m["od_d"])), True
    return None


def _relative(m: re.Match[str], ctx: _Context) -> tuple[cal.Span, bool] | None:
    if m["rd"]:
        words = " ".join(m["rd"].lower().split())
        shift = next((v for k, v in cal.REL_DAYS.items() if words.startswith(k)), 0)
        return cal.one_day(ctx.day + timedelta(days=shift)), True
    if m["ago"]:
        counted = m["ago_n"].lower().split()
        key = counted[-1] if counted[-1] != "of" else counted[-2]
        count = cal.COUNTS.get(key) or (int(key), int(key))
        return cal.ago_span(ctx.day, count, m["ago_u"].lower()), True
    if m["unit"]:
        which = m["unit_w"].lower().split()[-1]
        which = {"previous": "last", "coming": "next"}.get(which, which)
        if which == "last" and m["unit_w"].lower().startswith("the"):
            which = "past"  # "the last week": the seven days up to now
        return cal.unit_span(ctx.day, which, m["unit_u"].lower()), True
    if m["wend"]:
        if ctx.habit(m.start()):
            return None  # "every weekend"
        return cal.weekend_span(ctx.day, "recent"), True
    if m["wd"]:
        return _weekday(m, ctx)
    return None


def _weekday(m: re.Match[str], ctx: _Context) -> tuple[cal.Span, bool] | None:
    if m["wd_pl"] or ctx.habit(m.start()):
        return None
    target = cal.WEEKDAYS.index(m["wd_d"].lower())
    word = " ".join((m["wd_w"] or "").lower().split())
    if word in {"next", "coming", "this coming"}:
        how = "after"
    elif word in {"last", "past", "previous"}:
        how = "before"
    elif word == "this":
        how = "this"
    elif ctx.future(m.start()):
        how = "after"
    else:
        how = "before" if ctx.said else "on_or_before"
    return cal.weekday_span(ctx.day, target, how), True


_Reader = Callable[[re.Match[str], _Context], tuple[cal.Span, bool] | None]
_READERS: tuple[_Reader, ...] = (_absolute, _months_years, _relative)
# the reader of each kind of phrase (the pattern's last group to close is its kind's)
_READER_OF: dict[str | None, _Reader] = {
    kind: reader for reader, kinds in ((_absolute, "iso num dm md"), (_months_years, "mo yr od"),
                                       (_relative, "rd ago unit wend"), (_weekday, "wd"))
    for kind in kinds.split()}


def _read(m: re.Match[str], ctx: _Context) -> tuple[cal.Span, bool] | None:
    reader = _READER_OF.get(m.lastgroup)
    if reader is not None:
        return reader(m, ctx)
    for reader in _READERS:
        got = reader(m, ctx)
        if got is not None:
            return got
    return None


def _resolve(m: re.Match[str], ctx: _Context) -> _Found | None:
    try:
        got = _read(m, ctx)
        if got is None:
            return None
        (first, last), relative = got
        if m["wk"] and first == last:
            first, last = cal.week_of(first)
        if (m["prep"] or "").lower() == "since":
            last, relative = max(last, ctx.day), True
    except (ValueError, OverflowError):
        return None  # "31 February", a year the calendar has not
    return _Found(first, last, relative, m.start(), m.end())


def _find(text: str, anchor: datetime, said: bool) -> list[_Found]:
    if not text:
        return []
    matches = phrases(text, text.lower())
    if not matches:
        return []
    if anchor.tzinfo is not None:
        anchor = anchor.astimezone(UTC)
    ctx = _Context(text, anchor.date(), said)
    return [found for m in matches if (found := _resolve(m, ctx)) is not None]


_SPACE_BEFORE_MARK = re.compile(r"\s+([?.!,;:])")
_SPACES = re.compile(r"\s{2,}")


def _rest(text: str, found: list[_Found]) -> str:
    if not found:
        return text
    pieces, at = [], 0
    for item in found:
        pieces.append(text[at:item.start])
        at = item.end
    pieces.append(text[at:])
    rest = _SPACE_BEFORE_MARK.sub(r"\1", _SPACES.sub(" ", " ".join(p.strip() for p in pieces)))
    return rest.strip().lstrip(",;:").strip()


def read_dates(text: str, anchor: datetime) -> DateReading:
    """The windows of days ``text`` names (a question), relative phrases counted from ``anchor``."""
    found = _find(text, anchor, said=False)
    if not found:  # most questions: no date, the text itself left
        return DateReading(windows=(), rest=text, relative=False)
    windows: list[DayWindow] = []
    for item in found:
        window = DayWindow(item.first, item.last)
        if window not in windows:
            windows.append(window)
    return DateReading(windows=tuple(windows), rest=_rest(text, found),
                       relative=any(item.relative for item in found))


def mentioned_days(text: str, said_at: datetime) -> tuple[date, ...]:
    """The days a stored turn said at ``said_at`` speaks of (windows of a few days at most).

    In ascending order, each once. The turn's own day is among them only when the turn names
    it ("today", "this morning", "tonight", a date); a window wider than a week names none."""
    found = _find(text, said_at, said=True)
    if not found:
        return ()
    days: set[date] = set()
    for first, last, *_ in found:
        if first == last:
            days.add(first)
            continue
        width = (last - first).days + 1
        if 0 < width <= MAX_MARKED_DAYS:
            days.update([first + step for step in _DAY_STEPS[:width]])
    return tuple(sorted(days))
