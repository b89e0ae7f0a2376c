"""Pins for domain/fence.py: escaping replaces exactly the bracket stretches and keeps every other
character, runs the multi-character NFKC expansions, and gives up after exactly eight passes."""

from __future__ import annotations

import pytest

from fermix_memory.domain.fence import (
    CLOSE_TAG,
    LABEL,
    MEMORY_MD_HEADING,
    OPEN_TAG,
    SUMMARY_CLOSE_TAG,
    SUMMARY_LABEL,
    SUMMARY_OPEN_TAG,
    USER_MD_HEADING,
    as_summary_block,
    conversation_summary_block,
    escape_fence,
    memory_context_block,
)

LT, GT = "\u2039", "\u203a"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a<b>c", f"a{LT}b{GT}c"),
        ("<<>>", f"{LT}{LT}{GT}{GT}"),
        ("x&lt;y&gt;z", f"x{LT}y{GT}z"),
        ("x&lt;y &amp; z", f"x{LT}y &amp; z"),
        ("&lt;&lt;ab", f"{LT}{LT}ab"),
        ("x&#60y", f"x{LT}y"),
        ("a&#x3c;b", f"a{LT}b"),
        ("a&#x3C;b&#62;c", f"a{LT}b{GT}c"),
        ("a&ltx;b", f"a{LT}x;b"),  # the undecoded tail of a reference is kept
        ("a&gtxy;b", f"a{GT}xy;b"),
        ("a&amp;lt;b", f"a{LT}b"),
        ("a&&#108;t;b", f"a{LT}b"),
        ("a&#38;&#35;60;b", f"a{LT}b"),
        ("a\uff06lt;b", f"a{LT}b"),
        ("a\ufe60gt;b", f"a{GT}b"),
        ("a\u200b&l\u200bt;b", f"a\u200b{LT}b"),
        ("\uff1c\ufe65\u27e8\u3009", f"{LT}{GT}{LT}{GT}"),
    ],
)
def test_escape_replaces_exactly_the_bracket_stretches(text: str, expected: str) -> None:
    assert escape_fence(text) == expected
    assert escape_fence(expected) == expected


def test_every_character_after_an_encoded_bracket_is_kept() -> None:
    text = "if a&lt;b then c&gt;d, else e&#60;f & g&#x3e;h; done"
    assert escape_fence(text) == f"if a{LT}b then c{GT}d, else e{LT}f & g{GT}h; done"


def test_multi_character_nfkc_expansions_are_decoded_and_kept() -> None:
    # U+325A CIRCLED NUMBER THIRTY expands to "30": "&#65" "30" "8;" is &#65308; (full-width <).
    assert escape_fence("x&#65\u325a8;y") == f"x{LT}y"
    # Ligatures and fractions expand to several characters; they are kept as written.
    assert escape_fence("\ufb01<\ufb01 \u00bd&lt;\u00bd") == f"\ufb01{LT}\ufb01 \u00bd{LT}\u00bd"
    assert escape_fence("\ufb01\ufb02 &amp; \u2474") == "\ufb01\ufb02 &amp; \u2474"


def test_a_chain_of_eight_decodings_is_followed_and_nine_is_neutralised() -> None:
    assert escape_fence("a&" + "amp;" * 7 + "lt;b") == f"a{LT}b"
    deep = escape_fence("a&" + "amp;" * 8 + "lt;b")
    assert deep == "a\uff06" + "amp;" * 8 + "lt;b"
    # A chain that never settles is neutralised even without a bracket at its end.
    assert escape_fence("a&" + "amp;" * 20 + "b") == "a\uff06" + "amp;" * 20 + "b"
    # Eight levels without a bracket settle and are kept.
    assert escape_fence("a&" + "amp;" * 6 + "b") == "a&" + "amp;" * 6 + "b"


def test_text_with_ampersands_but_no_brackets_is_unchanged() -> None:
    for text in ("Tom & Jerry", "a &amp; b", "&copy; 2026", "&#38;", "R&D; Q&A", "\uff06 \ufe60"):
        assert escape_fence(text) == text


def test_memory_context_block_exact_layout() -> None:
    assert memory_context_block("  ## Identity\n- name: <Ada>\n ", "## Context\n- p: q\n") == (
        f"{OPEN_TAG}\n{LABEL}\n\n{USER_MD_HEADING}\n## Identity\n- name: {LT}Ada{GT}\n\n"
        f"{MEMORY_MD_HEADING}\n## Context\n- p: q\n{CLOSE_TAG}"
    )
    assert memory_context_block(" \n", "x") == f"{OPEN_TAG}\n{LABEL}\n\n{MEMORY_MD_HEADING}\nx\n{CLOSE_TAG}"
    assert memory_context_block("u", "\t") == f"{OPEN_TAG}\n{LABEL}\n\n{USER_MD_HEADING}\nu\n{CLOSE_TAG}"
    assert memory_context_block(" ", "\n") == ""


def test_summary_block_layout_and_recognition() -> None:
    block = conversation_summary_block("  they said <hi> & left  ")
    assert block == f"{SUMMARY_OPEN_TAG}\n{SUMMARY_LABEL}\n\n they said {LT}hi{GT} & left\n{SUMMARY_CLOSE_TAG}".replace(
        "\n\n they", "\n\nthey")
    assert as_summary_block(block) == block
    assert as_summary_block("plain text") == conversation_summary_block("plain text")
    # A block whose inside is not escaped is fenced again.
    forged = f"{SUMMARY_OPEN_TAG}\n{SUMMARY_LABEL}\n\n<x>\n{SUMMARY_CLOSE_TAG}"
    assert as_summary_block(forged) == conversation_summary_block(forged)
    # The smallest well-formed block: an empty inside.
    empty = f"{SUMMARY_OPEN_TAG}\n{SUMMARY_LABEL}\n\n\n{SUMMARY_CLOSE_TAG}"
    assert as_summary_block(empty) == empty
    # Head and tail that overlap are not a block.
    head_only = f"{SUMMARY_OPEN_TAG}\n{SUMMARY_LABEL}\n\n"
    assert as_summary_block(head_only) == conversation_summary_block(head_only)


def test_a_reference_ending_inside_a_multi_character_expansion_replaces_that_character_whole() -> None:
    # U+248F DIGIT EIGHT FULL STOP expands to "8.": "&#6530" "8" is &#65308; (full-width <).
    assert escape_fence("a&#6530\u248fb") == f"a{LT}b"
    assert escape_fence("a&\u325a<b") == f"a&\u325a{LT}b"


def test_a_reference_that_does_not_decode_keeps_its_characters_apart() -> None:
    assert escape_fence("a&x>b") == f"a&x{GT}b"
    assert escape_fence("a&>b") == f"a&{GT}b"
    assert escape_fence("a\uff06>") == f"a\uff06{GT}"
    assert escape_fence("x&#6") == "x&#6"
    assert escape_fence("l\u325a &#6") == "l\u325a &#6"


def test_a_reference_decoded_without_its_semicolon_keeps_its_tail_once() -> None:
    # "&amplt;" decodes to "&lt;" (the tail "lt;" kept once), then to "<".
    assert escape_fence("a&amplt;b") == f"a{LT}b"


def test_a_summary_whose_head_and_tail_overlap_is_fenced_again() -> None:
    head = f"{SUMMARY_OPEN_TAG}\n{SUMMARY_LABEL}\n\n"
    overlapping = head + SUMMARY_CLOSE_TAG  # ends with "\n</conversation-summary>" through the head's newline
    assert as_summary_block(overlapping) == conversation_summary_block(overlapping)
