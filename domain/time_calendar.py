"""Calendar arithmetic for the date phrases of :mod:`time_expressions` (ADR-0075).

Every function takes the anchor's day and returns ``(first, last)``, both included; each raises
``ValueError`` or ``OverflowError`` for a day the calendar has not (``31 February``, year 0)."""

from __future__ import annotations

import calendar
from datetime import date, timedelta

Span = tuple[date, date]

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
    "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9,
    "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12,
    "dec": 12,
}
# how many: an exact count, or the fuzzy ones as (fewest, most)
COUNTS: dict[str, tuple[int, int]] = {
    "a": (1, 1), "an": (1, 1), "one": (1, 1), "two": (2, 2), "three": (3, 3), "four": (4, 4),
    "five": (5, 5), "six": (6, 6), "seven": (7, 7), "eight": (8, 8), "nine": (9, 9),
    "ten": (10, 10), "eleven": (11, 11), "twelve": (12, 12), "couple": (2, 3), "few": (2, 5),
    "several": (3, 7),
}


def one_day(day: date) -> Span:
    return day, day


def week_of(day: date) -> Span:
    """Monday to Sunday of ``day``'s ISO week."""
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def month_span(year: int, month: int, part: str = "") -> Span:
    """A calendar month, or its ``early`` (1-10), ``mid`` (11-20) or ``late`` (21-end) part."""
    last = calendar.monthrange(year, month)[1]
    first_day, last_day = {"early": (1, 10), "mid": (11, 20), "late": (21, last)}.get(part, (1, last))
    return date(year, month, first_day), date(year, month, last_day)


def months_back(day: date, n: int) -> tuple[int, int]:
    """(year, month) ``n`` calendar months before ``day``'s month (negative: after)."""
    index = day.year * 12 + day.month - 1 - n
    return index // 12, index % 12 + 1


def weekday_span(day: date, target: int, how: str) -> Span:
    """The ``target`` weekday (0 = Monday) near ``day``.

    ``how``: ``on_or_before`` (a question's plain weekday), ``before`` (a turn's plain weekday,
    "last Friday"), ``after`` ("next Friday", a weekday after a future cue), ``this`` (in
    ``day``'s ISO week)."""
    if how == "this":
        return one_day(day + timedelta(days=target - day.weekday()))
    if how == "after":
        return one_day(day + timedelta(days=(target - day.weekday()) % 7 or 7))
    back = (day.weekday() - target) % 7
    if how == "before" and back == 0:
        back = 7
    return one_day(day - timedelta(days=back))


def weekend_span(day: date, which: str) -> Span:
    """Saturday and Sunday: ``last`` (the weekend before ``day``'s week; on a weekend day, the
    one before it), ``this`` (of ``day``'s ISO week), ``next`` (of the week after), ``recent``
    (the latest one that has begun by ``day``)."""
    saturday = day + timedelta(days=5 - day.weekday())
    if which == "last":
        saturday -= timedelta(days=7)
    elif which == "next":
        saturday += timedelta(days=7)
    elif which == "recent" and saturday > day:
        saturday -= timedelta(days=7)
    return saturday, saturday + timedelta(days=1)


def unit_span(day: date, which: str, unit: str) -> Span:
    """``last``/``this``/``next``/``past`` week, month or year (``weekend``: see above).

    ``past`` rolls back from ``day`` (the past week: the seven days ending on it); the others
    are calendar units (last week: Monday to Sunday of the previous ISO week)."""
    if unit == "weekend":
        return weekend_span(day, "last" if which == "past" else which)
    if which == "past":
        length = {"week": 7, "month": 30, "year": 365}[unit]
        return day - timedelta(days=length - 1), day
    step = {"last": 1, "this": 0, "next": -1}[which]
    if unit == "week":
        first, last = week_of(day)
        shift = timedelta(days=7 * step)
        return first - shift, last - shift
    if unit == "month":
        return month_span(*months_back(day, step))
    year = day.year - step
    return date(year, 1, 1), date(year, 12, 31)


def ago_span(day: date, count: tuple[int, int], unit: str) -> Span:
    """``count`` days, weeks, months or years ago; a week ago is the seven days around it."""
    fewest, most = count
    if unit == "day":
        return day - timedelta(days=most), day - timedelta(days=fewest)
    if unit == "week":
        return day - timedelta(days=7 * most + 3), day - timedelta(days=7 * fewest - 3)
    if unit == "month":
        first = month_span(*months_back(day, most))[0]
        return first, month_span(*months_back(day, fewest))[1]
    return date(day.year - most, 1, 1), date(day.year - fewest, 12, 31)


def nearest_day(day: date, month: int, dom: int) -> Span:
    """``dom``/``month`` in the year that puts it nearest to ``day`` (a tie goes back)."""
    before = yearless_day(day, month, dom, future=False)[0]
    after = yearless_day(day, month, dom, future=True)[0]
    return one_day(after if (after - day) < (day - before) else before)


def yearless_day(day: date, month: int, dom: int, future: bool) -> Span:
    """``dom``/``month`` in the latest year it falls on or before ``day`` (``future``: the first
    on or after it); a day the calendar never has raises ``ValueError``."""
    for back in range(9):
        year = day.year + back if future else day.year - back
        try:
            found = date(year, month, dom)
        except ValueError:
            continue
        if (found >= day) if future else (found <= day):
            return one_day(found)
    raise ValueError("no such day")


def yearless_month(day: date, month: int, part: str, future: bool) -> Span:
    """The latest ``month`` that has begun by ``day`` (``future``: this one or the next)."""
    if future:
        year = day.year if month >= day.month else day.year + 1
    else:
        year = day.year if month <= day.month else day.year - 1
    return month_span(year, month, part)


def ordinal_day(day: date, dom: int) -> Span:
    """"On the 3rd": the latest such day of a month on or before ``day``."""
    year, month = day.year, day.month
    for _ in range(4):
        if dom <= calendar.monthrange(year, month)[1] and date(year, month, dom) <= day:
            return one_day(date(year, month, dom))
        year, month = months_back(date(year, month, 1), 1)
    raise ValueError("no such day")


# Words of a clause that turn a plain date forward ("see you on Monday"), and of a habit (no date).
FUTURE_WORDS = frozenset(["will", "shall", "gonna", "until", "till", "upcoming", "ll"])
FUTURE_PHRASES = ("going to", "see you", "plan to", "planning to", "can't wait", "this coming",
                  "let's", "looking forward")
HABIT_WORDS = ("every", "each")
# Days named relative to the anchor's.
REL_DAYS = {"the day before yesterday": -2, "the day after tomorrow": 2, "yesterday": -1,
            "tomorrow": 1, "last night": -1}
