"""The offline rules extractor: sentences after a question, openers that are no rule, and why each
word of its word lists is there (each case is extracted as written here with the word listed, and
differently with the word taken out of its list)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fermix_memory.adapters.providers.rules import patterns as pat
from fermix_memory.adapters.providers.rules.extractor import extract_operations
from fermix_memory.adapters.providers.rules.text import sentences, slug_key
from tests.unit.test_rules_extractor import add, extract, row

PARIS = [add("identity", "home_city", "Paris")]


def without(monkeypatch: pytest.MonkeyPatch, name: str, word: str) -> None:
    """The extractor as if ``word`` were not in the list ``name`` (the lists built from
    ``TIME_WORDS`` lose it too, unless they name it themselves)."""
    monkeypatch.setattr(pat, name, getattr(pat, name) - {word})
    if name == "TIME_WORDS":
        monkeypatch.setattr(pat, "SLUG_CONNECTORS", pat.SLUG_CONNECTORS - {word})
        own_trailing = {"by"}  # SLUG_TRAILING names "by" itself
        monkeypatch.setattr(pat, "SLUG_TRAILING", pat.SLUG_TRAILING - ({word} - own_trailing))


def matters(monkeypatch: pytest.MonkeyPatch, name: str, word: str, run: Callable[[], Any], expected: Any) -> None:
    assert run() == expected
    without(monkeypatch, name, word)
    assert run() != expected, f"{word!r} changes nothing in {name}"


# --- sentences --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Where is it? I live in Paris.",
    "Where is it?! I live in Paris.",
    'Where is it?" I live in Paris.',
    "Where is it?\u201d I live in Paris.",
    "Where is it?) I live in Paris.",
    "Where is it\uff1f I live in Paris.",
    "Where is it\uff1fI live in Paris\u3002",
    "Where is Dr. Who? I live in Paris.",
])
def test_a_statement_after_a_question_in_the_same_message_is_extracted(text: str) -> None:
    assert extract(text) == PARIS


def test_a_closing_quote_or_bracket_stays_with_its_sentence() -> None:
    assert list(sentences('She said "go." Then (twice.) it ended! Done\uff01Yes\u3002 ok\uff1f')) == [
        'She said "go."', "Then (twice.)", "it ended!", "Done\uff01", "Yes\u3002", "ok\uff1f"]


def test_a_quoted_value_ending_a_sentence_keeps_its_closing_quote() -> None:
    assert extract('Remember that the motto is "Be kind." I live in Paris.') == [
        add("context", "motto", '"Be kind."'), *PARIS]


# --- openers that are no rule -----------------------------------------------------------------


@pytest.mark.parametrize("text", ["Never Mind the weather.", "Never mind the weather.", "NEVER MIND that.",
                                  "Never Mind.", "never Mind, it works."])
def test_never_mind_is_no_directive_whatever_its_case(text: str) -> None:
    assert extract(text, trust="operator") == []


def test_a_directive_after_never_mind_in_another_sentence_is_kept() -> None:
    assert extract("Never Mind. Always answer in English.", trust="operator") == [
        add("directive", "rule_answer_in_english", "Always answer in English")]


@pytest.mark.parametrize("word", sorted(pat.NOT_RULES))
def test_each_opener_that_is_no_rule(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "NOT_RULES", word, lambda: extract(f"Never {word} forget it.", trust="operator"), [])


# --- the word lists ---------------------------------------------------------------------------


@pytest.mark.parametrize("word", sorted(pat.ABBREVIATIONS))
def test_each_abbreviation_does_not_end_a_sentence(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "ABBREVIATIONS", word, lambda: extract(f"Remember that the note is {word}. Smith."),
            [add("context", "note", f"{word}. Smith")])


@pytest.mark.parametrize("word", sorted(pat.DEICTIC))
def test_each_word_pointing_at_the_conversation_keeps_a_statement_out(monkeypatch: pytest.MonkeyPatch,
                                                                      word: str) -> None:
    matters(monkeypatch, "DEICTIC", word, lambda: extract(f"I like {word} jazz."), [])


@pytest.mark.parametrize("word", sorted(pat.SPEECH_VERBS))
def test_each_speech_verb_keeps_talk_about_the_conversation_out(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "SPEECH_VERBS", word, lambda: extract(f"I want to {word} something."), [])


@pytest.mark.parametrize("word", sorted(pat.NAME_PARTICLES))
def test_each_name_particle_stays_in_a_name(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "NAME_PARTICLES", word, lambda: extract(f"My name is Anna {word} Berg."),
            [add("identity", "name", f"Anna {word} Berg")])


@pytest.mark.parametrize("word", sorted(pat.SECOND_PERSON))
def test_each_second_person_word_keeps_an_instruction_out_of_the_facts(monkeypatch: pytest.MonkeyPatch,
                                                                       word: str) -> None:
    matters(monkeypatch, "SECOND_PERSON", word, lambda: extract(f"Remember that {word} deploy on Fridays."), [])


@pytest.mark.parametrize("word", sorted(pat.NOT_NAMES))
def test_each_word_that_is_no_name(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "NOT_NAMES", word, lambda: extract(f"My name is {word} Sam."), [])


@pytest.mark.parametrize("word", sorted(pat.PLACE_CONNECTORS))
def test_each_place_connector_ends_a_place(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "PLACE_CONNECTORS", word, lambda: extract(f"I live in Paris {word} work."), PARIS)


@pytest.mark.parametrize("word", sorted(pat.SLUG_SKIP_LEADING))
def test_each_leading_word_a_key_drops(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "SLUG_SKIP_LEADING", word, lambda: slug_key("prefers_", f"{word} jazz"), "prefers_jazz")


@pytest.mark.parametrize("word", sorted(pat.SLUG_CONNECTORS - pat.TIME_WORDS))
def test_each_connector_cuts_a_key(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "SLUG_CONNECTORS", word, lambda: slug_key("prefers_", f"jazz {word} blues"), "prefers_jazz")


@pytest.mark.parametrize("word", sorted(pat.SLUG_TRAILING - pat.TIME_WORDS))
def test_each_word_a_key_never_ends_on(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "SLUG_TRAILING", word, lambda: slug_key("", f"answer {word}", cut_at_connectors=False),
            "answer")


@pytest.mark.parametrize("word", sorted(pat.TIME_WORDS))
def test_each_time_word_cuts_a_key(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    matters(monkeypatch, "TIME_WORDS", word, lambda: slug_key("goal_", f"climb {word} Mont Blanc"), "goal_climb")


def test_a_time_word_is_also_never_the_last_word_of_a_key() -> None:
    assert [slug_key("", f"answer {w}", cut_at_connectors=False) for w in sorted(pat.TIME_WORDS)] == [
        "answer"] * len(pat.TIME_WORDS)


@pytest.mark.parametrize(("verb", "lead"), [("prefer", "Prefers"), ("like", "Likes"), ("love", "Loves")])
def test_each_liking_verb_words_its_value_and_shares_one_key(verb: str, lead: str) -> None:
    assert pat.PREFERENCE_VERBS[verb] == lead
    assert extract(f"I {verb} jazz.") == [add("preference", "prefers_jazz", f"{lead} jazz")]


@pytest.mark.parametrize("apostrophe", ["\u2019", "\u2018", "\u02bc"])
def test_each_typographic_apostrophe_reads_as_a_plain_one(apostrophe: str) -> None:
    assert extract(f"I{apostrophe}m interested in chess.") == [add("interest", "interest_chess", "Interested in chess")]


def test_another_mark_is_no_apostrophe() -> None:
    assert extract("I`m interested in chess.") == []


@pytest.mark.parametrize("verb", ["Prefers", "Likes", "Loves", "Enjoys"])
def test_each_liking_verb_of_a_stored_row_lets_an_ended_liking_archive_it(verb: str) -> None:
    liked = row(3, "preference", "music", f"{verb} jazz")
    assert extract("I no longer like jazz.", memories=[liked]) == [
        {"op": "archive", "id": 3, "reason": "User said they no longer like jazz"}]


def test_a_row_with_another_verb_is_not_an_ended_liking() -> None:
    assert extract("I no longer like jazz.", memories=[row(3, "preference", "music", "Adores jazz")]) == []


@pytest.mark.parametrize("article", ["a", "an"])
def test_a_place_that_starts_with_an_indefinite_article_is_no_home(article: str) -> None:
    assert extract(f"I live in {article} Big House.") == []
    assert extract("I live in the Big House.") == [add("identity", "home_city", "the Big House")]


@pytest.mark.parametrize("filler", ["Hi", "Hello", "Hey", "Oh", "Also", "And", "So", "Well", "Actually", "Btw",
                                    "By the way", "Anyway", "FYI", "OK", "Okay", "Yes", "Yeah", "No",
                                    "Just so you know", "For the record", "For context", "As you know"])
def test_each_filler_before_a_statement_is_skipped(filler: str) -> None:
    assert extract(f"{filler} I live in Paris.") == PARIS
    assert extract("Bonjour I live in Paris.") == [], "a word that is no filler is not skipped"


@pytest.mark.parametrize("opener", ["If", "Suppose", "Supposing", "Imagine", "Assuming", "Hypothetically",
                                    "What if", "In case", "Let's say"])
def test_each_hypothetical_opener_keeps_its_sentence_out(opener: str) -> None:
    assert extract(f"{opener} it rains, I live in Paris.") == []
    assert extract("Later it rains, I live in Paris.") == PARIS, "a sentence without such an opener is read"


@pytest.mark.parametrize(("message_id", "sources"), [(1, {"source_message_ids": [1]}), (2, {"source_message_ids": [2]}),
                                                     (0, {}), (-1, {}), (True, {}), ("1", {}), (None, {})])
def test_a_statement_names_its_message_when_the_id_is_a_whole_number_from_1(message_id: object,
                                                                            sources: dict[str, Any]) -> None:
    message = {"id": message_id, "trust": "guest", "sender": "sam", "text": "I live in Paris."}
    assert extract_operations([message], []) == [{**PARIS[0], **sources}]
