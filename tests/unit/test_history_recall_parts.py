"""Parts of history recall (ADR-0019): snippets marked with the index's own tokenizer, and
which turns count as questions (their reply comes with them)."""

from __future__ import annotations

import apsw

from fermix_memory.adapters.sqlite import history_rank
from fermix_memory.domain.messages import is_question


def snip(text: str, *words: str) -> str:
    tokenize = history_rank.tokenizer(apsw.Connection(":memory:"))
    return history_rank.snippet(tokenize, text, history_rank.stems(tokenize, list(words)))


def test_a_short_turn_is_whole_with_stemmed_words_marked() -> None:
    assert snip("You seem so relaxed lately, Kwame. What's the secret?", "relaxing", "KWAME") == (
        "You seem so [relaxed] lately, [Kwame]. What's the secret?")


def test_a_long_turn_is_cut_around_its_matches() -> None:
    text = " ".join(["filler"] * 30) + " the café near the station " + " ".join(["more"] * 30)
    assert snip(text, "cafe", "station") == (
        "…filler filler the [café] near the [station] more more more more more more more more more…")


def test_text_without_words_is_returned_as_it_is() -> None:
    assert snip("", "tea") == ""
    assert snip("\U0001f600\U0001f389", "tea") == "\U0001f600\U0001f389"


def test_a_turn_with_a_question_in_it_is_a_question() -> None:
    asks = ["Where did you grow up, Owen? You've got a bit of an accent.", "Really?", '"Why?" she said',
            "What's the secret?  ", "You did what?!", "\u4f60\u597d\uff1f"]
    states = ["Fine, thanks.", "see https://example.org/page?id=3", ""]
    assert [is_question(t) for t in asks] == [True] * len(asks)
    assert [is_question(t) for t in states] == [False] * len(states)


def test_candidates_are_the_scopes_rarest_words_until_enough_rows() -> None:
    # In-scope row counts of four query words in a scope of 1,000 rows, 2 results asked for
    # (16 candidate rows wanted): the rarest two cover it.
    assert history_rank.candidate_terms([900, 5, 12, 300], 1_000, 2) == [1, 2]
    # Words in more than half of the scope never select candidates on their own...
    assert history_rank.candidate_terms([900, 5, 600], 1_000, 10) == [1]
    # ...unless every word is that common.
    assert history_rank.candidate_terms([900, 600], 1_000, 10) == [0, 1]
