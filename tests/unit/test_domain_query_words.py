"""The words of a question that say what is wanted."""

from __future__ import annotations

import pytest

from fermix_memory.domain.query_words import CHAT_WORDS, STOPWORDS, content_words


@pytest.mark.parametrize(("text", "words"), [
    ("", []),
    ("What did we talk about?", ["talk"]),
    ("Where does Kwame's SISTER work, where?", ["kwame", "s", "sister", "work"]),
    ("the of and", []),
    ("Zoë in São Paulo", ["zoë", "são", "paulo"]),
])
def test_content_words_are_the_lower_cased_words_but_stop_words_each_once(text: str, words: list[str]) -> None:
    assert content_words(text) == words


def test_chat_words_say_nothing_of_what_is_asked_about() -> None:
    assert {"talk", "chat", "discuss", "say", "happen"} <= CHAT_WORDS
    assert not {"sister", "museum", "pizza"} & CHAT_WORDS
    assert {"what", "about", "we"} <= STOPWORDS
