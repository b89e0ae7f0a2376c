"""Calendar arithmetic of the date phrases (domain/time_calendar.py) and where the phrases of a
text are found (domain/time_phrases.py), pinned case by case."""

from __future__ import annotations

import calendar
from datetime import date

import pytest

from fermix_memory.domain import time_calendar as cal
from fermix_memory.domain import time_phrases as tp


def d(text: str) -> date:
    return date.fromisoformat(text)


def span(first: str, last: str | None = None) -> tuple[date, date]:
    return d(first), d(last or first)


# 2024-05-15 is a Wednesday; 2024-05-18/19 a weekend; 2024 is a leap year.
WED = d("2024-05-15")
SAT = d("2024-05-18")
SUN = d("2024-05-19")
MON = d("2024-05-13")


def test_month_names_and_abbreviations_give_their_month() -> None:
    for word, month in cal.MONTHS.items():
        assert calendar.month_name[month].lower().startswith(word), word
    assert sorted(set(cal.MONTHS.values())) == list(range(1, 13))


def test_counts_and_relative_days() -> None:
    exact = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
             "eleven", "twelve"]
    for n, word in enumerate(exact, start=1):
        assert cal.COUNTS[word] == (n, n)
    assert cal.COUNTS["a"] == cal.COUNTS["an"] == (1, 1)
    assert (cal.COUNTS["couple"], cal.COUNTS["few"], cal.COUNTS["several"]) == ((2, 3), (2, 5), (3, 7))
    assert cal.REL_DAYS == {"the day before yesterday": -2, "the day after tomorrow": 2,
                            "yesterday": -1, "tomorrow": 1, "last night": -1}
    assert cal.WEEKDAYS[WED.weekday()] == "wednesday"


@pytest.mark.parametrize(("day", "expected"), [
    (WED, span("2024-05-13", "2024-05-19")),
    (MON, span("2024-05-13", "2024-05-19")),
    (SUN, span("2024-05-13", "2024-05-19")),
    (d("2024-01-01"), span("2024-01-01", "2024-01-07")),
])
def test_week_of(day: date, expected: tuple[date, date]) -> None:
    assert cal.week_of(day) == expected
    assert cal.one_day(day) == (day, day)


@pytest.mark.parametrize(("year", "month", "part", "expected"), [
    (2024, 2, "", span("2024-02-01", "2024-02-29")),
    (2023, 2, "", span("2023-02-01", "2023-02-28")),
    (2024, 4, "early", span("2024-04-01", "2024-04-10")),
    (2024, 4, "mid", span("2024-04-11", "2024-04-20")),
    (2024, 4, "late", span("2024-04-21", "2024-04-30")),
    (2024, 12, "late", span("2024-12-21", "2024-12-31")),
    (2024, 5, "other", span("2024-05-01", "2024-05-31")),
])
def test_month_span(year: int, month: int, part: str, expected: tuple[date, date]) -> None:
    assert cal.month_span(year, month, part) == expected


@pytest.mark.parametrize(("day", "n", "expected"), [
    (WED, 0, (2024, 5)),
    (WED, 1, (2024, 4)),
    (WED, 4, (2024, 1)),
    (WED, 5, (2023, 12)),
    (WED, 17, (2022, 12)),
    (WED, 24, (2022, 5)),
    (WED, -7, (2024, 12)),
    (WED, -8, (2025, 1)),
    (d("2024-01-31"), 1, (2023, 12)),
    (d("2024-12-01"), -1, (2025, 1)),
    (d("2024-12-01"), 0, (2024, 12)),
])
def test_months_back(day: date, n: int, expected: tuple[int, int]) -> None:
    assert cal.months_back(day, n) == expected


@pytest.mark.parametrize(("day", "target", "how", "expected"), [
    (WED, 0, "this", "2024-05-13"),
    (WED, 2, "this", "2024-05-15"),
    (WED, 6, "this", "2024-05-19"),
    (WED, 4, "after", "2024-05-17"),
    (WED, 2, "after", "2024-05-22"),
    (WED, 0, "after", "2024-05-20"),
    (SUN, 6, "after", "2024-05-26"),
    (WED, 2, "on_or_before", "2024-05-15"),
    (WED, 0, "on_or_before", "2024-05-13"),
    (WED, 4, "on_or_before", "2024-05-10"),
    (WED, 3, "on_or_before", "2024-05-09"),
    (WED, 2, "before", "2024-05-08"),
    (WED, 1, "before", "2024-05-14"),
    (WED, 4, "before", "2024-05-10"),
    (MON, 6, "before", "2024-05-12"),
])
def test_weekday_span(day: date, target: int, how: str, expected: str) -> None:
    assert cal.weekday_span(day, target, how) == span(expected)


@pytest.mark.parametrize(("day", "which", "expected"), [
    (WED, "this", "2024-05-18"),
    (WED, "last", "2024-05-11"),
    (WED, "next", "2024-05-25"),
    (WED, "recent", "2024-05-11"),
    (SAT, "recent", "2024-05-18"),
    (SUN, "recent", "2024-05-18"),
    (SAT, "last", "2024-05-11"),
    (SUN, "next", "2024-05-25"),
    (d("2024-05-17"), "recent", "2024-05-11"),
    (MON, "this", "2024-05-18"),
])
def test_weekend_span(day: date, which: str, expected: str) -> None:
    saturday = d(expected)
    assert cal.weekend_span(day, which) == (saturday, date.fromordinal(saturday.toordinal() + 1))


@pytest.mark.parametrize(("day", "which", "unit", "expected"), [
    (WED, "past", "week", span("2024-05-09", "2024-05-15")),
    (WED, "past", "month", span("2024-04-16", "2024-05-15")),
    (WED, "past", "year", span("2023-05-17", "2024-05-15")),
    (WED, "last", "week", span("2024-05-06", "2024-05-12")),
    (WED, "this", "week", span("2024-05-13", "2024-05-19")),
    (WED, "next", "week", span("2024-05-20", "2024-05-26")),
    (WED, "last", "month", span("2024-04-01", "2024-04-30")),
    (WED, "this", "month", span("2024-05-01", "2024-05-31")),
    (WED, "next", "month", span("2024-06-01", "2024-06-30")),
    (d("2024-01-10"), "last", "month", span("2023-12-01", "2023-12-31")),
    (WED, "last", "year", span("2023-01-01", "2023-12-31")),
    (WED, "this", "year", span("2024-01-01", "2024-12-31")),
    (WED, "next", "year", span("2025-01-01", "2025-12-31")),
    (WED, "past", "weekend", span("2024-05-11", "2024-05-12")),
    (WED, "last", "weekend", span("2024-05-11", "2024-05-12")),
    (WED, "this", "weekend", span("2024-05-18", "2024-05-19")),
    (WED, "next", "weekend", span("2024-05-25", "2024-05-26")),
])
def test_unit_span(day: date, which: str, unit: str, expected: tuple[date, date]) -> None:
    assert cal.unit_span(day, which, unit) == expected


@pytest.mark.parametrize(("day", "count", "unit", "expected"), [
    (WED, (1, 1), "day", span("2024-05-14")),
    (WED, (2, 5), "day", span("2024-05-10", "2024-05-13")),
    (WED, (1, 1), "week", span("2024-05-05", "2024-05-11")),
    (WED, (2, 3), "week", span("2024-04-21", "2024-05-04")),
    (WED, (1, 1), "month", span("2024-04-01", "2024-04-30")),
    (WED, (2, 5), "month", span("2023-12-01", "2024-03-31")),
    (WED, (1, 1), "year", span("2023-01-01", "2023-12-31")),
    (WED, (3, 7), "year", span("2017-01-01", "2021-12-31")),
])
def test_ago_span(day: date, count: tuple[int, int], unit: str, expected: tuple[date, date]) -> None:
    assert cal.ago_span(day, count, unit) == expected


@pytest.mark.parametrize(("day", "month", "dom", "expected"), [
    (WED, 5, 15, "2024-05-15"),
    (WED, 5, 20, "2024-05-20"),
    (WED, 5, 10, "2024-05-10"),
    (WED, 12, 25, "2023-12-25"),
    (WED, 11, 1, "2024-11-01"),
    (d("2024-07-02"), 1, 1, "2024-01-01"),
    (d("2024-07-03"), 1, 1, "2025-01-01"),
    (d("2023-07-02"), 1, 1, "2023-01-01"),
    (d("2023-07-03"), 1, 1, "2024-01-01"),
    (d("2025-03-01"), 2, 29, "2024-02-29"),
    (d("2027-03-01"), 2, 29, "2028-02-29"),
])
def test_nearest_day(day: date, month: int, dom: int, expected: str) -> None:
    """Dates far apart on both sides tell which side is nearer; 2 and 3 July sit either side of
    the middle between two 1 Januaries (2 July 2024, a leap year, is a tie and goes back)."""
    assert cal.nearest_day(day, month, dom) == span(expected)


@pytest.mark.parametrize(("day", "month", "dom", "future", "expected"), [
    (WED, 5, 15, False, "2024-05-15"),
    (WED, 5, 15, True, "2024-05-15"),
    (WED, 5, 16, False, "2023-05-16"),
    (WED, 5, 14, True, "2025-05-14"),
    (WED, 3, 1, False, "2024-03-01"),
    (WED, 3, 1, True, "2025-03-01"),
    (d("2025-01-01"), 2, 29, False, "2024-02-29"),
    (d("2025-01-01"), 2, 29, True, "2028-02-29"),
    (d("1904-02-28"), 2, 29, False, "1896-02-29"),
    (d("1896-03-01"), 2, 29, True, "1904-02-29"),
])
def test_yearless_day(day: date, month: int, dom: int, future: bool, expected: str) -> None:
    assert cal.yearless_day(day, month, dom, future) == span(expected)


@pytest.mark.parametrize(("month", "dom"), [(2, 30), (4, 31), (13, 1), (1, 0)])
def test_a_day_the_calendar_never_has_raises(month: int, dom: int) -> None:
    for future in (False, True):
        with pytest.raises(ValueError):
            cal.yearless_day(WED, month, dom, future)
    with pytest.raises(ValueError):
        cal.nearest_day(WED, month, dom)


@pytest.mark.parametrize(("day", "month", "part", "future", "expected"), [
    (WED, 5, "", False, span("2024-05-01", "2024-05-31")),
    (WED, 5, "", True, span("2024-05-01", "2024-05-31")),
    (WED, 4, "", False, span("2024-04-01", "2024-04-30")),
    (WED, 4, "", True, span("2025-04-01", "2025-04-30")),
    (WED, 6, "", False, span("2023-06-01", "2023-06-30")),
    (WED, 6, "early", True, span("2024-06-01", "2024-06-10")),
    (WED, 2, "late", False, span("2024-02-21", "2024-02-29")),
])
def test_yearless_month(day: date, month: int, part: str, future: bool,
                        expected: tuple[date, date]) -> None:
    assert cal.yearless_month(day, month, part, future) == expected


@pytest.mark.parametrize(("day", "dom", "expected"), [
    (WED, 15, "2024-05-15"),
    (WED, 3, "2024-05-03"),
    (WED, 16, "2024-04-16"),
    (WED, 31, "2024-03-31"),
    (d("2024-03-15"), 30, "2024-01-30"),
    (d("2024-03-31"), 31, "2024-03-31"),
    (d("2024-03-30"), 31, "2024-01-31"),
    (d("2024-01-01"), 2, "2023-12-02"),
    (d("2023-03-01"), 29, "2023-01-29"),
    (d("2024-03-01"), 29, "2024-02-29"),
])
def test_ordinal_day(day: date, dom: int, expected: str) -> None:
    assert cal.ordinal_day(day, dom) == span(expected)


@pytest.mark.parametrize("dom", [32, 0])
def test_an_ordinal_no_month_has_raises(dom: int) -> None:
    with pytest.raises(ValueError):
        cal.ordinal_day(WED, dom)


# --- where the phrases are (time_phrases): the same matches as scanning the whole text ---

def _scan(text: str) -> list[tuple[int, int, str]]:
    """What the full pattern finds, left to right (an ASCII text lower-cased, as it is read)."""
    subject = text.lower() if text.isascii() else text
    return [(m.start(), m.end(), m.group()) for m in tp.PHRASE.finditer(subject)]


def _found(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in tp.phrases(text, text.lower())]


PHRASE_TEXTS = [
    ("we met on 2024-05-03 at noon", ["on 2024-05-03"]),
    ("Saturday 11 May 2024 was fun", ["saturday 11 may 2024"]),
    ("see you in early May", ["in early may"]),
    ("in early-may we left", ["in early-may"]),
    ("since a couple of days ago", ["since a couple of days ago"]),
    ("a few weeks back it rained", ["a few weeks back"]),
    ("3 days ago", ["3 days ago"]),
    ("on the 3rd", ["on the 3rd"]),
    ("the 3rd", ["the 3rd"]),
    ("x the 3rd", ["the 3rd"]),
    ("during the week of the 3rd", ["during the week of the 3rd"]),
    ("in the year 2020 and 1999", ["in the year 2020", "1999"]),
    ("last night and the day before yesterday", ["last night", "the day before yesterday"]),
    ("the night was long", []),
    ("one day i will", []),
    ("this coming monday", ["this coming monday"]),
    ("on this coming monday", ["on this coming monday"]),
    ("monday and friday nights", ["monday", "friday nights"]),
    ("the weekend, next weekend", ["the weekend", "next weekend"]),
    ("over the past week", ["over the past week"]),
    ("yesterday morning, today, tonight", ["yesterday morning", "today", "tonight"]),
    ("May 5th, 2023", ["may 5th, 2023"]),
    ("12/05/2024 and 3.4.24", ["12/05/2024", "3.4.24"]),
    ("monday-friday", ["monday", "friday"]),
    ("mid-june", ["mid-june"]),
    ("someday", []),
    ("mayday", []),
    ("daytime today", ["today"]),
    ("todays", []),
    ("the monday", ["monday"]),
    ("the the the the the the monday", ["monday"]),
    ("from the last week", ["from the last week"]),
    ("nothing here at all", []),
    ("", []),
    ("2024", ["2024"]),
    ("x2024 2024", ["2024"]),
    ("Café on Monday", ["on Monday"]),
    ("İstanbul on Monday", ["on Monday"]),
    ("naïve plans for 3 days ago", ["3 days ago"]),
    ("élan, rien", []),
    ("élan 42", []),
    ("rêve in the year 2020", ["in the year 2020"]),
    ("café-monday", ["monday"]),
    ("see you `monday`", ["monday"]),
    ("{monday}", ["monday"]),
    ("0 days ago", ["0 days ago"]),
    (" last week", ["last week"]),
    ("é: day week month year night morn noon evening tomorrow jan feb mar apr may jun jul aug sep "
     "oct nov dec", ["tomorrow", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
                     "oct", "nov", "dec"]),
    ("-last week", ["last week"]),
    ("the 10th: zoo day", ["the 10th"]),
]


@pytest.mark.parametrize(("text", "expected"), PHRASE_TEXTS)
def test_phrases(text: str, expected: list[str]) -> None:
    found = _found(text)
    assert [group for _, _, group in found] == expected
    assert found == _scan(text)


_VOCAB = ["on", "in", "the", "a", "of", "since", "last", "this", "next", "coming", "past", "early",
          "late", "mid", "couple", "few", "two", "3", "12", "2024", "05", "may", "june", "sept",
          "monday", "friday", "day", "days", "week", "weeks", "weekend", "month", "year", "years",
          "ago", "back", "night", "morning", "today", "tomorrow", "yesterday", "before", "after",
          "3rd", "1st", "x", "café", "Monday", "İ", "earlier", "tonight", "at", "during"]
_SEPARATORS = [" ", " ", " ", "-", ", ", "/", ".", ""]
_BEFORE_LEADER = [" ", "-", ", "]  # see test_what_a_full_scan_finds_and_the_reading_does_not


def _texts(count: int) -> list[str]:
    """Texts of the words phrases are built of, in a fixed pseudo-random order."""
    state = 12345
    texts = []
    for _ in range(count):
        parts = []
        state = (state * 1103515245 + 12345) % 2**31
        for _ in range(2 + state % 9):
            state = (state * 1103515245 + 12345) % 2**31
            word = _VOCAB[state % len(_VOCAB)]
            separators = _BEFORE_LEADER if word in tp.LEADERS and parts else _SEPARATORS
            if parts and parts[-1] not in separators:
                parts[-1] = " "
            parts.append(word)
            state = (state * 1103515245 + 12345) % 2**31
            parts.append(_SEPARATORS[state % len(_SEPARATORS)])
        texts.append("".join(parts))
    return texts


def test_phrases_are_those_a_full_scan_finds() -> None:
    differ = [text for text in _texts(3000) if _found(text) != _scan(text)]
    assert differ == []


@pytest.mark.parametrize(("text", "scanned", "read"), [
    ("on fridays we swim", ["on fridays"], []),
    ("friday or fridays", ["friday", "fridays"], ["friday"]),
    ("friday, fridays too", ["friday", "fridays"], ["friday"]),
    ("i was sick (last week)", ["last week"], []),
    ('"last week" was odd', ["last week"], []),
    ("see you.next monday", ["next monday"], ["monday"]),
    ("in late  june", ["in late  june"], ["june"]),
    ("we met\nlast week", ["last week"], []),
    ("last\tweek", ["last\tweek"], []),
])
def test_what_a_full_scan_finds_and_the_reading_does_not(text: str, scanned: list[str],
                                                         read: list[str]) -> None:
    """The reading starts a phrase at a leader word only after one space or a hyphen, and finds a
    weekday by its singular (plural weekdays name a habit: no day). The days read from texts are
    stored, so these stay as they are until a change of reading comes with a migration."""
    assert [group for _, _, group in _scan(text)] == scanned
    assert [group for _, _, group in _found(text)] == read
