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
