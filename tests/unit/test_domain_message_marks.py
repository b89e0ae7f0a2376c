"""A turn's marks: its days, then its names, each once, bounded in number, length and text read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fermix_memory.domain.mark_keys import day_mark, name_mark
from fermix_memory.domain.message_marks import MARKED_CHARS, MAX_MARK_CHARS, MAX_MARKS, marks_of

THURSDAY = datetime(2024, 2, 29, 18, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "marks"), [
    ("", ()),
    ("nothing to see here", ()),
    ("Spent the whole day at the museum on Monday.", ("d:2024-02-26",)),
    ("Mei got the job at the aquarium.", ("e:mei",)),
    ("Yesterday Mei and Tom went to Osaka.", ("d:2024-02-28", "e:mei", "e:tom", "e:osaka")),
    ("Mei, Mei and MEI again", ("e:mei",)),
])
def test_days_first_then_names_each_once(text: str, marks: tuple[str, ...]) -> None:
    assert marks_of(text, THURSDAY) == marks


def test_the_marks_are_their_prefix_and_the_iso_day_or_case_folded_name() -> None:
    assert day_mark(THURSDAY.date()) == "d:2024-02-29"
    assert name_mark("São Paulo") == "e:são paulo"


def test_at_most_max_marks_are_kept_the_first_ones() -> None:
    names = [f"Zed{chr(ord('a') + i // 26)}{chr(ord('a') + i % 26)}" for i in range(MAX_MARKS + 10)]
    marks = marks_of(", ".join(f"then {name}" for name in names), THURSDAY)
    assert marks == tuple(name_mark(name) for name in names[:MAX_MARKS])


def test_a_name_longer_than_a_mark_may_be_is_left_out() -> None:
    long_name = " ".join(["Grand"] * (MAX_MARK_CHARS // 5))
    marks = marks_of(f"we met {long_name} and then Mei", THURSDAY)
    assert marks == ("e:mei",) and all(len(m) <= MAX_MARK_CHARS for m in marks)


def test_only_the_head_of_a_long_text_is_read() -> None:
    head = "x " * (MARKED_CHARS // 2)
    assert marks_of("Mei " + head, THURSDAY) == ("e:mei",)
    assert marks_of(head + " and then Mei", THURSDAY) == ()


def test_the_bounds_are_those_the_stored_marks_were_made_with() -> None:
    # marks are stored: another bound would give a replayed log other marks than it has
    assert (MAX_MARKS, MAX_MARK_CHARS, MARKED_CHARS) == (32, 100, 4000)


def test_exactly_thirty_two_marks_are_kept() -> None:
    names = [f"Zed{chr(ord('a') + i // 26)}{chr(ord('a') + i % 26)}" for i in range(40)]
    marks = marks_of(", ".join(f"then {name}" for name in names), THURSDAY)
    assert len(marks) == 32 and marks[-1] == "e:zedbf"
    days = " ".join(f"on {n} March 2020," for n in range(1, 31)) + " and " + " ".join(
        f"on {n} April 2020," for n in range(1, 11))
    assert len(marks_of(days, THURSDAY)) == 32


@pytest.mark.parametrize(("last_word", "kept"), [("Abcdefgh", True), ("Abcdefghi", False)])
def test_a_mark_of_a_hundred_characters_is_kept_one_more_is_not(last_word: str, kept: bool) -> None:
    name = " ".join([*(f"Zed{chr(ord('a') + i)}a" for i in range(15)), last_word])
    marks = marks_of(f"we met {name} and Mei", THURSDAY)
    long_mark = name_mark(name)
    assert len(long_mark) == (100 if kept else 101)
    assert marks == ((long_mark, "e:mei") if kept else ("e:mei",))


def test_the_four_thousandth_character_is_the_last_read() -> None:
    text = "x" * 3994 + " Kwamex and more"
    assert marks_of(text, THURSDAY) == ("e:kwame",)
