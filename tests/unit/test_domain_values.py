"""The domain's values: exact limits, key normalisation, identifier and scope-id checks.

The limits are written here as literals (the specification's numbers), never read from the
module under test, so that a changed constant fails.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fermix_memory.domain.errors import InvalidArgument, InvalidConversationKey, InvalidIdentifier, InvalidNumber
from fermix_memory.domain.values import (
    Category,
    ConversationKey,
    PromoteTarget,
    Scope,
    ScopeType,
    check_identifier,
    check_int,
    check_text,
    is_encodable,
    normalise_key,
    preview,
    shorten,
)

# --- identifiers -------------------------------------------------------------------------------


def test_identifier_of_exactly_256_characters_is_accepted_and_257_refused() -> None:
    assert check_identifier("a" * 256, "owner_id") == "a" * 256
    with pytest.raises(InvalidIdentifier, match="longer than 256"):
        check_identifier("a" * 257, "owner_id")


def test_identifier_must_be_text_and_not_empty_unless_allowed() -> None:
    with pytest.raises(InvalidIdentifier, match="must be text"):
        check_identifier(42, "agent_id")
    with pytest.raises(InvalidIdentifier, match="must not be empty"):
        check_identifier("", "agent_id")
    assert check_identifier("", "thread", allow_empty=True) == ""


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "\x1f", "a\x7f", "\x9f", "a\u2028", "\u2029b"])
def test_identifier_with_control_character_is_refused_as_control(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match="control characters"):
        check_identifier(bad, "owner_id")


@pytest.mark.parametrize("bad", ["a\ud800", "\udfff", "x\udc00y"])
def test_identifier_with_lone_surrogate_is_refused_as_surrogate(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match="lone surrogate"):
        check_identifier(bad, "owner_id")


def test_every_ascii_character_is_refused_exactly_when_it_is_a_control_character() -> None:
    for code in range(128):
        text = f"a{chr(code)}b"
        if 0x20 <= code <= 0x7E:
            assert check_identifier(text, "owner_id") == text
            assert is_encodable(text)
        else:
            with pytest.raises(InvalidIdentifier, match="control characters"):
                check_identifier(text, "owner_id")


@pytest.mark.parametrize("good", ["\xa0", "\u00e9l\u00e8ve", "\ud7ff", "\ue000", "\u2027", "\u202a", " ", "~"])
def test_identifier_keeps_printable_characters_next_to_the_forbidden_ranges(good: str) -> None:
    assert check_identifier(good, "owner_id") == good


# --- conversation keys -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "chat_id", "thread"),
    [("", "42", ""), ("telegram", "", ""), ("telegram", "4\x002", ""), ("telegram", "x" * 257, ""),
     ("tele\ngram", "42", ""), ("telegram", "42", "t\x00"), ("telegram", 42, "")],
)
def test_conversation_key_refuses_a_bad_part_with_its_own_error(channel: object, chat_id: object,
                                                                thread: str) -> None:
    with pytest.raises(InvalidConversationKey):
        ConversationKey(channel, chat_id, thread)  # type: ignore[arg-type]


def test_conversation_key_names_the_bad_part() -> None:
    with pytest.raises(InvalidConversationKey, match="chat_id"):
        ConversationKey("telegram", "")
    with pytest.raises(InvalidConversationKey, match="channel"):
        ConversationKey("", "42")
    with pytest.raises(InvalidConversationKey, match="thread_scope"):
        ConversationKey("telegram", "42", "\x00")


def test_conversation_key_accepts_256_character_parts_and_an_empty_thread() -> None:
    key = ConversationKey("c" * 256, "d" * 256, "t" * 256)
    assert ConversationKey.from_scope_id(key.scope_id) == key
    assert ConversationKey("telegram", "42").thread_scope == ""


def test_scope_id_escapes_colons_and_percent_and_round_trips() -> None:
    key = ConversationKey("a:b", "50%", "x:y:z")
    assert key.scope_id == "a%3Ab:50%25:x%3Ay%3Az"
    assert ConversationKey.from_scope_id(key.scope_id) == key
    assert ConversationKey("telegram", "42").scope_id == "telegram:42:"


@pytest.mark.parametrize("bad", ["telegram:42", "a:b:c:d", "nocolon"])
def test_from_scope_id_refuses_anything_but_three_parts(bad: str) -> None:
    with pytest.raises(InvalidConversationKey, match="not a conversation scope id"):
        ConversationKey.from_scope_id(bad)


def test_parse_spellings() -> None:
    assert ConversationKey.parse("telegram:42") == ConversationKey("telegram", "42", "")
    assert ConversationKey.parse("slack:C1:thread:9") == ConversationKey("slack", "C1", "thread:9")
    assert str(ConversationKey("slack", "C1", "thread:9")) == "slack:C1:thread:9"
    assert str(ConversationKey("telegram", "42")) == "telegram:42"


@pytest.mark.parametrize("bad", ["telegram", ":42", "telegram:", ""])
def test_parse_refuses_a_missing_channel_or_chat(bad: str) -> None:
    with pytest.raises(InvalidConversationKey, match="CHANNEL:CHAT_ID"):
        ConversationKey.parse(bad)


def test_parse_refuses_non_text() -> None:
    with pytest.raises(InvalidConversationKey, match="must be text"):
        ConversationKey.parse(42)  # type: ignore[arg-type]


# --- scopes ------------------------------------------------------------------------------------


def test_scope_id_of_the_longest_conversation_key_is_accepted_and_one_more_character_refused() -> None:
    # 3 parts x 12 characters per code point (4 UTF-8 bytes, each %XX) x 256 + 2 colons = 9218.
    longest = "\U0001f600" * 256
    key = ConversationKey(longest, longest, longest)
    assert len(key.scope_id) == 9218
    assert Scope.conversation(key).id == key.scope_id
    with pytest.raises(InvalidIdentifier, match="scope_id"):
        Scope(ScopeType.CONVERSATION, "x" * 9219)


@pytest.mark.parametrize("bad", ["", 7, None, "a\x00", "a\n", "\x85"])
def test_scope_refuses_empty_non_text_and_control_ids(bad: object) -> None:
    with pytest.raises(InvalidIdentifier, match="scope_id"):
        Scope(ScopeType.OWNER, bad)  # type: ignore[arg-type]


def test_scope_constructors() -> None:
    assert Scope.owner("alice") == Scope(ScopeType.OWNER, "alice")
    assert Scope.agent("ada") == Scope(ScopeType.AGENT, "ada")
    assert Scope.job("nightly") == Scope(ScopeType.JOB, "nightly")
    assert Scope("owner", "alice").type is ScopeType.OWNER


# --- categories --------------------------------------------------------------------------------


def test_category_targets_and_trust() -> None:
    user = {Category.IDENTITY, Category.PREFERENCE, Category.INTEREST, Category.GOAL}
    for category in Category:
        expected = PromoteTarget.USER_MD if category in user else PromoteTarget.MEMORY_MD
        assert category.promote_target is expected
        assert category.is_profile is (category in user)
        assert category.operator_only is (category is Category.DIRECTIVE)


# --- keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Coffee Order", "coffee_order"),
        ("coffee__order", "coffee_order"),
        ("coffee - order", "coffee_order"),
        ("a/b\tc", "a_b_c"),
        ("_coffee_", "coffee"),
        (".coffee.", "coffee"),
        ("__x.y__", "x.y"),
        ("a!!b", "ab"),
        ("a!_!_b", "a_b"),
        ("\uff23\uff4f\uff46\uff46\uff45\uff45", "coffee"),  # full-width, folded by NFKC
        ("  Tea  ", "tea"),
        ("x" * 64, "x" * 64),
    ],
)
def test_normalise_key(raw: str, expected: str) -> None:
    assert normalise_key(raw) == expected


@given(st.text(alphabet="abz09_.-", max_size=70))
def test_a_canonical_key_is_its_own_spelling_and_any_key_folds_to_one(raw: str) -> None:
    try:
        key = normalise_key(raw)
    except InvalidIdentifier:
        return
    assert normalise_key(key) == key and len(key) <= 64
    assert key[0] not in "_." and key[-1] not in "_." and "__" not in key
    assert normalise_key(key + "_") == key and normalise_key("_" + key) == key
    assert normalise_key(key.upper()) == key


def test_key_of_65_characters_is_refused() -> None:
    with pytest.raises(InvalidIdentifier, match="longer than 64"):
        normalise_key("x" * 65)
    assert normalise_key("_" + "x" * 64 + "_") == "x" * 64


@pytest.mark.parametrize("bad", ["", "  ", "___", "._.", "!!!", "\u00e9"])
def test_key_with_nothing_usable_is_refused(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match="no usable characters"):
        normalise_key(bad)


def test_key_must_be_text() -> None:
    with pytest.raises(InvalidIdentifier, match="must be text"):
        normalise_key(3)


# --- text helpers ------------------------------------------------------------------------------


def test_is_encodable() -> None:
    assert is_encodable("plain \U0001f600 text")
    assert not is_encodable("a\ud800")
    assert not is_encodable("\udfff")
    assert is_encodable("\ud7ff\ue000")


def test_shorten_keeps_text_at_the_limit_and_cuts_one_over() -> None:
    assert shorten("abcde", 5) == "abcde"
    assert shorten("abcdef", 5) == "abcd…"
    assert len(shorten("x" * 201, 200)) == 200


def test_shorten_cuts_at_the_last_word_boundary_when_it_keeps_half() -> None:
    assert shorten("aaaaa bbbbbbbbbb", 10) == "aaaaa…"
    assert shorten("aaaaa\nbbbbbbbbbb", 10) == "aaaaa…"
    assert shorten("aaaaa bb\nbbbbbbb", 10) == "aaaaa bb…"
    assert shorten("aaaaa\nbb bbbbbbb", 10) == "aaaaa\nbb…"
    # The boundary would keep less than half the limit: a hard cut instead.
    assert shorten("aaaa bbbbbbbbbbbb", 10) == "aaaa bbbb…"
    assert shorten("aaaa\nbbbbbbbbbbbb", 10) == "aaaa\nbbbb…"
    # The character at the cut is a space: no search for a boundary.
    assert shorten("aaaaaaaaa bbbb", 10) == "aaaaaaaaa…"


def test_shorten_with_tiny_limits() -> None:
    assert shorten("abc", 1) == "…"
    assert shorten("abc", 0) == ""
    assert shorten("abc", -1) == ""
    assert shorten("abc", 2) == "a…"


def test_shorten_does_not_split_a_combining_mark_or_zwj_sequence() -> None:
    text = "abcdefgh" + "e\u0301" * 3  # the 10th character is a combining accent
    assert shorten(text, 10) == "abcdefgh…"
    family = "abcdefg" + "\U0001f468\u200d\U0001f469\u200d\U0001f467" + "zz"
    assert shorten(family, 10) == "abcdefg…"
    selector = "abcdefgh\u2764\ufe0fzz"
    assert shorten(selector, 10) == "abcdefgh…"


def test_shorten_backs_off_at_most_eight_code_points() -> None:
    # A run of combining marks longer than the back-off: a hard cut at the limit.
    text = "a" + "\u0301" * 30
    assert shorten(text, 20) == "a" + "\u0301" * 18 + "…"
    # The cut falls 8 code points after the start of an accented letter: it backs off to it ...
    eight = "a" * 11 + "e" + "\u0301" * 8 + "zzz"
    assert shorten(eight, 20) == "a" * 11 + "…"
    # ... but not 9 after it.
    nine = "a" * 10 + "e" + "\u0301" * 9 + "zzz"
    assert shorten(nine, 20) == "a" * 10 + "e" + "\u0301" * 8 + "…"
    # Near the start: it may back off to the second character, never to the first.
    assert shorten("ab\u0301\u0301", 3) == "a…"
    assert shorten("e\u0301\u0301\u0301", 3) == "e\u0301…"


# --- preview, check_int, check_text -----------------------------------------------------------


def test_a_preview_shows_text_cut_to_40_characters_and_other_values_by_type() -> None:
    assert preview("x" * 41) == repr("x" * 40)
    assert preview("x" * 39) == repr("x" * 39)
    assert preview("abc", 2) == "'ab'"
    assert preview(10**100) == "a value of type int"
    assert preview(["x"]) == "a value of type list"


def test_whole_numbers_fit_in_a_signed_64_bit_integer() -> None:
    assert check_int(-9_223_372_036_854_775_808, "n") == -9_223_372_036_854_775_808
    assert check_int(9_223_372_036_854_775_807, "n") == 9_223_372_036_854_775_807
    for bad in (-9_223_372_036_854_775_809, 9_223_372_036_854_775_808, True, False, 1.0, "1", None):
        with pytest.raises(InvalidNumber):
            check_int(bad, "n")
    assert check_int(0, "n") == 0


def test_a_whole_number_below_its_minimum_is_refused_and_the_minimum_itself_accepted() -> None:
    assert check_int(1, "n", minimum=1) == 1
    with pytest.raises(InvalidNumber):
        check_int(0, "n", minimum=1)
    assert check_int(-5, "n") == -5


def test_free_text_is_checked_for_type_length_nul_and_surrogates() -> None:
    assert check_text("a\nb" + "c" * 7, "t", max_chars=10) == "a\nb" + "c" * 7
    assert check_text("", "t", max_chars=0) == ""
    for bad in (3, None, b"x", "c" * 11, "a\x00", "\udc00"):
        with pytest.raises(InvalidArgument):
            check_text(bad, "t", max_chars=10)
