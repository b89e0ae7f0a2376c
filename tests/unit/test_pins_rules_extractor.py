"""Pins for domain/rules_extractor.py: exact limits, output order, and which existing row a
statement replaces or archives (never the same row twice)."""

from __future__ import annotations

from typing import Any

from tests.unit.test_rules_extractor import add, extract, row


def test_a_message_is_read_up_to_exactly_100000_characters() -> None:
    statement = "I live in Paris"
    text = " " * (100_000 - len(statement) - 1) + "\n" + statement + "X"
    assert len(text) == 100_001
    assert extract(text) == [add("identity", "home_city", "Paris")]


def test_a_slug_keeps_four_words() -> None:
    assert extract("I prefer long green tea leaves daily.") == [
        add("preference", "prefers_long_green_tea_leaves", "Prefers long green tea leaves daily")
    ]


def test_the_output_follows_the_order_of_the_latest_statements() -> None:
    assert extract("I like jazz.", "I live in Paris.", "I love jazz.") == [
        add("identity", "home_city", "Paris"),
        add("preference", "prefers_jazz", "Loves jazz"),
    ]


def test_rows_with_a_usable_id_from_1_are_matched_and_others_ignored() -> None:
    liked = row(1, "preference", "prefers_jazz", "Likes jazz")
    assert extract("I love jazz.", memories=[liked]) == [{"op": "replace", "id": 1, "value": "Loves jazz"}]
    for bad in (row(0, "preference", "prefers_jazz", "Likes jazz"), row(1, "preference", "prefers_jazz", 3),
                row(1, "preference", 3, "Likes jazz"), row(1, 3, "prefers_jazz", "Likes jazz")):  # type: ignore[arg-type]
        assert extract("I love jazz.", memories=[bad]) == [add("preference", "prefers_jazz", "Loves jazz")]


def test_an_ended_liking_without_a_row_does_nothing() -> None:
    assert extract("I no longer like jazz.") == []


def test_a_row_is_archived_once_when_two_statements_point_at_it() -> None:
    rows: list[dict[str, Any]] = [row(1, "preference", "prefers_jazz_music", "Likes jazz")]
    ops = extract("I no longer like jazz.", "I don't like jazz music any more.", memories=rows)
    assert ops == [{"op": "archive", "id": 1, "reason": "User said they no longer like jazz"}]


def test_a_replaced_row_is_not_archived_in_the_same_batch() -> None:
    rows: list[dict[str, Any]] = [row(1, "preference", "prefers_jazz", "Likes jazz music")]
    ops = extract("I love jazz.", "I no longer like jazz music.", memories=rows)
    assert ops == [{"op": "replace", "id": 1, "value": "Loves jazz"}]


def test_only_preference_rows_are_archived_by_an_ended_liking() -> None:
    assert extract("I no longer like jazz.", memories=[row(1, "interest", "interest_jazz", "Likes jazz")]) == []
    spaced = [row(2, "preference", "prefers_music", "Likes  jazz ")]
    assert extract("I no longer like jazz.", memories=spaced) == [
        {"op": "archive", "id": 2, "reason": "User said they no longer like jazz"}
    ]


def test_a_closing_fence_line_is_skipped_whole() -> None:
    assert extract("```\ncode\n``` done, I like jazz") == []
    assert extract("``` open, I like jazz\ncode\n```") == []


def test_abbreviations_join_only_the_piece_they_end() -> None:
    assert extract("Hello. I live in St. Louis. I like jazz.") == [
        add("identity", "home_city", "St. Louis"),
        add("preference", "prefers_jazz", "Likes jazz"),
    ]


def test_a_sentence_ending_in_other_punctuation_is_not_joined_to_the_next() -> None:
    assert extract("I like jazz! I live in Paris.") == [
        add("preference", "prefers_jazz", "Likes jazz"),
        add("identity", "home_city", "Paris"),
    ]


def test_a_hypothetical_sentence_is_skipped_with_all_its_clauses() -> None:
    assert extract("If I move, I like jazz.") == []
    assert extract("Suppose I live in Paris, I love jazz.") == []


def test_a_filler_before_a_statement_is_skipped() -> None:
    assert extract("Also I like jazz.") == [add("preference", "prefers_jazz", "Likes jazz")]
    assert extract("By the way I live in Paris.") == [add("identity", "home_city", "Paris")]


def test_a_statement_whose_object_gives_no_key_is_ignored_also_when_it_ends_a_liking() -> None:
    rows = [row(1, "preference", "prefers_sushi", "Likes \u5bff\u53f8")]
    assert extract("I no longer like \u5bff\u53f8.", memories=rows) == []
    assert extract("I like \u5bff\u53f8.") == []


def name(value: str) -> list[dict[str, Any]]:
    return [add("identity", "name", value)]


def test_name_limits() -> None:
    assert extract("my name is sam, by the way") == name("Sam")
    assert extract("my name is sam lee") == name("Sam Lee")  # two lower-case words
    assert extract("my name is sam") == name("Sam")
    assert extract("my name is sam lee jones") == []  # three: no telling the name from what follows
    assert extract("My name is Sam Lee Van Jones") == name("Sam Lee Van Jones")  # four words
    assert extract("My name is Sam Lee Ann Marie Jo") == []  # five
    assert extract("My name is R2D2") == name("R2D2")
    assert extract("my name is 3po") == []  # a name starts with a letter


def test_a_home_starting_with_an_article_is_not_a_place() -> None:
    assert extract("I live in a Big House.") == []
    assert extract("I live in an Old Mill.") == []
    assert extract("I live in Paris with you.") == [add("identity", "home_city", "Paris")]


def test_speech_verbs_only_count_in_the_first_three_words() -> None:
    assert extract("I want to go and talk.") == []
    assert extract("I want to go home and talk.") == [
        add("goal", "goal_go_home_and_talk", "Wants to go home and talk")
    ]


def test_a_standing_rule_needs_two_words() -> None:
    assert extract("Always answer briefly.", trust="operator") == [
        add("directive", "rule_answer_briefly", "Always answer briefly")
    ]
    assert extract("Always smile.", trust="operator") == []
    assert extract("Always answer briefly.", trust="guest") == []


def test_sentence_openers_that_are_not_rules() -> None:
    assert extract("Always been there.", trust="operator") == []
    assert extract("Never crashed here.", trust="operator") == []
    assert extract("Never answer in English.", trust="operator") == [
        add("directive", "rule_answer_in_english", "Never answer in English")
    ]


def only(ops: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(ops) == 1, ops
    return ops[0]


def test_keys_are_at_most_64_characters_dropping_whole_words_first() -> None:
    a, b, c = "a" * 18, "b" * 18, "c" * 18
    exact = only(extract(f"I prefer {a} {b} {c}."))["key"]
    assert exact == f"prefers_{a}_{b}_{c}" and len(exact) == 64
    assert only(extract(f"I prefer {a} {b} {c}c."))["key"] == f"prefers_{a}_{b}"
    assert only(extract(f"I prefer {'x' * 70}."))["key"] == "prefers_" + "x" * 56
    assert only(extract(f"I prefer {'x' * 55} y."))["key"] == "prefers_" + "x" * 55


def test_keys_keep_not_to_and_drop_leading_and_trailing_small_words() -> None:
    assert only(extract("I prefer not to be late."))["key"] == "prefers_not_to_be_late"
    assert only(extract("I prefer the tea and."))["key"] == "prefers_tea"
    assert only(extract("I prefer C++."))["key"] == "prefers_c_plus_plus"
    assert only(extract("I prefer C#."))["key"] == "prefers_c_sharp"
    assert only(extract("I prefer caf\u00e9 au lait."))["key"] == "prefers_cafe_au_lait"


def remembered(fact: str) -> str:
    value = only(extract(f"Remember that {fact}"))["value"]
    assert isinstance(value, str)
    return value


def test_values_are_at_most_2000_characters_cut_between_words_when_that_keeps_half() -> None:
    assert remembered("the plan is " + "w" * 2000) == "w" * 2000
    cut = remembered("the plan is " + "w " * 1100)
    assert cut == "w" + " w" * 999 and len(cut) == 1999
    kept_half = "the plan is " + "w" * 1000 + " " + "z" * 1500  # the boundary keeps exactly 1000
    assert remembered(kept_half) == "w" * 1000
    short = "the plan is " + "w" * 999 + " " + "z" * 1500  # 999: a hard cut at 2000 instead
    assert remembered(short) == "w" * 999 + " " + "z" * 1000


def test_a_value_of_exactly_2000_characters_is_kept_whole() -> None:
    value = remembered("the plan is " + "w " * 999 + "ww")
    assert len(value) == 2000 and value == "w " * 999 + "ww"


def test_not_keeps_only_to_in_the_key() -> None:
    assert only(extract("I prefer not during winter."))["key"] == "prefers_not"
    assert only(extract("I prefer tea not to go."))["key"] == "prefers_tea_not_to_go"


def test_a_two_word_key_over_64_characters_drops_its_last_word() -> None:
    x, y = "x" * 40, "y" * 40
    assert only(extract(f"I prefer {x} {y}."))["key"] == f"prefers_{x}"


def test_a_value_whose_2000th_character_ends_a_word_keeps_that_word() -> None:
    fact = "the plan is ww" + " w" * 999 + " more"
    assert remembered(fact) == "ww" + " w" * 999


def test_a_rule_key_stops_at_the_end_of_its_first_phrase() -> None:
    assert only(extract("Always answer briefly, please.", trust="operator"))["key"] == "rule_answer_briefly"
    assert only(extract("Never answer late (ever).", trust="operator"))["key"] == "rule_answer_late"
