"""entities_in: the names a chat turn mentions (ADR-0077)."""

from __future__ import annotations

import time

import pytest

from fermix_memory.domain.entities import entities_in

CASES = [
    ("", ()),
    ("all lower case, no names here", ()),
    ("Esther is a florist.", ("esther",)),
    ("Honey and lemon, Caroline, and bed early.", ("caroline",)),
    ("Morning Kwame! I'm off to Osaka.", ("kwame", "osaka")),
    ("I think I'm coming down with something.", ()),
    ("Honestly, Thanks so much. Yes! Well, So what?", ()),
    ("Chloe's new job at Kestrel Health starts Monday.", ("chloe", "kestrel health")),
    ("Chloe\u2019s brother lives in Krakow", ("chloe", "krakow")),
    ("We moved in March, on a Tuesday, in Week 3.", ("week",)),
    ("Kwame ran the Berlin marathon in 1:58.", ("kwame", "berlin marathon", "berlin")),
    ("The Bank of England raised rates.", ("bank of england",)),
    ("I saw The Lanterns with Chloe, and the Lanterns were loud", ("lanterns", "chloe")),
    ("Lucy and the Tides put out a single", ("lucy and the tides",)),
    ("Reading 'Nine Winters in Oslo' again, Kwame.", ("nine winters in oslo", "kwame")),
    ("I'm lending you \u201cSalt and Iron\u201d, Nadia.", ("salt and iron", "nadia")),
    ("Glass Houses is back tonight!", ("glass houses",)),
    ("Zoë flew to São Paulo 🎉 Mei stayed", ("zoë", "são paulo", "mei")),
    ("Zoë 🎉 São Paulo", ("zoë", "são paulo")),
    ("WOW THAT'S GREAT", ()),
    ("I LOVE IT SO MUCH", ()),
    ("My GP at the NHS said so", ("gp", "nhs")),
    ("Booked the Juniper Inn for the weekend.", ("juniper inn",)),
    ("O'Brien met McDonald in Dublin", ("o'brien", "mcdonald", "dublin")),
    ("Obviously. Surviving, barely.", ()),
    ("A B C 42 7th", ()),
    ("Pumpkin had her jabs, Caroline.", ("pumpkin", "caroline")),
    ("Kwame, Kwame and KWAME", ("kwame",)),
    ("she said 'éa' twice", ()),  # a text in lower case names nothing, quoted or not
    ("Mei loved 'Salt and Iron' so much", ("mei", "salt and iron")),
    ("we saw KEANE at the BARBICAN in LONDON", ("keane",)),  # five capitals may name, six shout
    ("Kwame LONDON Osaka", ("kwame", "osaka")),
    ("we met X's friend Mei", ("mei",)),
    ("Mei élan Osaka", ("mei", "osaka")),
    ("TSB Bank of Scotland called me", ("tsb bank of scotland",)),  # a span that goes on is no verb
    ("ok.Honey and lemon", ()),  # a sentence's start, right after its full stop
    ("Honey and lemon", ()),
    ("a Honey and lemon", ("honey",)),  # not a sentence's first word: a capital names
    ("Jared came over.", ("jared",)),  # five letters ending "ed": a name, not a participle
    ("Yesterday the rates were raised by the Bank of England.", ("bank of england",)),
    # a quoted title: at most seven words, each of four letters or more capitalised, no article
    ("Read 'Nine Winters in Oslo and Old Bergen' twice", ("nine winters in oslo and old bergen",)),
    ("Read 'Nine Winters in Oslo and Old Bergen Town' twice", ("nine winters", "oslo", "old bergen town")),
    ("Read 'Salt with Iron' twice", ("salt", "iron")),
    ("we loved 'The Nine Winters' a lot", ("nine winters",)),
    # at most 24 characters of spaces and joining words between two words of one name
    ("Kwame" + " " * 24 + "Osaka", ("kwame osaka",)),
    ("Kwame" + " " * 25 + "Osaka", ("kwame", "osaka")),
    ("'Salt and Iron' and 'Nine Winters in Oslo' were good", ("salt and iron", "nine winters in oslo")),
]


@pytest.mark.parametrize(("text", "names"), CASES)
def test_names_of_a_turn(text: str, names: tuple[str, ...]) -> None:
    assert entities_in(text) == names


def test_a_very_long_text_takes_time_linear_in_its_length() -> None:
    # Inputs that make backtracking regular expressions blow up: long runs of capitals, of
    # joiners, of quotes and apostrophes. Compared with a text a tenth as long, in the same run.
    pieces = ["Aa of the " * 10, "'" * 50 + "A" * 50, "Kwame met Chloe at Kestrel Health. ", "x " * 50, "' A " * 25]
    for piece in pieces:
        small, big = piece * (10_000 // len(piece)), piece * (100_000 // len(piece))
        t0 = time.perf_counter()
        entities_in(small)
        t_small = time.perf_counter() - t0
        t0 = time.perf_counter()
        names = entities_in(big)
        t_big = time.perf_counter() - t0
        assert t_big < 40 * max(t_small, 1e-3), piece  # ten times the text, not a hundred times the time
        assert len(names) < 10


def test_a_quoted_title_is_a_name_even_where_its_first_word_is_part_of_another() -> None:
    assert "salt" in entities_in("Up-'Salt'")


def test_each_name_once_in_order_of_appearance() -> None:
    text = "Mei and Chloe went to Osaka. Then Chloe and Mei left Osaka for Kyoto."
    assert entities_in(text) == ("mei", "chloe", "osaka", "kyoto")
