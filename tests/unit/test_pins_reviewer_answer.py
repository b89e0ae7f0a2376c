"""Pins for domain/reviewer_answer.py and reviewer_answer_repair.py: the exact limits (64 KiB,
50 operations, the largest row id) as literals, and every accepted spelling next to its refused neighbour."""

from __future__ import annotations

import json

import pytest

from fermix_memory.domain.errors import ReviewerAnswerError
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, ReplaceOperation
from fermix_memory.domain.reviewer_answer import (
    OPERATIONS_SCHEMA,
    format_reviewer_answer,
    operation_to_dict,
    parse_reviewer_answer,
)
from fermix_memory.domain.reviewer_answer_repair import parse_reviewer_answer_tolerant

LIMIT = 65536  # 64 KiB
ONE_ADD = '{"operations": [{"op": "add", "category": "goal", "key": "k", "value": "v"}]}'


def padded(body: str, size: int, pad: str = " ") -> str:
    """``body`` followed by whitespace up to ``size`` characters."""
    return body + pad * (size - len(body))


def test_an_answer_of_exactly_64_kib_is_parsed_and_one_byte_more_refused() -> None:
    assert parse_reviewer_answer(padded(ONE_ADD, LIMIT)) == [AddOperation(category="goal", key="k", value="v")]
    with pytest.raises(ReviewerAnswerError, match="65536 bytes"):
        parse_reviewer_answer(padded(ONE_ADD, LIMIT + 1))


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    # "é" is two bytes: the value makes the text 64 KiB in bytes while shorter in characters.
    head = '{"operations": [{"op": "add", "category": "goal", "key": "k", "value": "'
    tail = '"}]}'
    room = LIMIT - len(head) - len(tail)
    exact = head + "\u00e9" * (room // 2) + "x" * (room % 2) + tail
    assert len(exact.encode("utf-8")) == LIMIT and len(exact) < LIMIT
    assert len(parse_reviewer_answer(exact)) == 1
    over = head + "\u00e9" * (room // 2) + "x" * (room % 2) + "\u00e9" + tail
    assert len(over) < LIMIT
    with pytest.raises(ReviewerAnswerError, match="bytes"):
        parse_reviewer_answer(over)


def test_a_lone_surrogate_counts_three_bytes_towards_the_limit() -> None:
    text = padded(ONE_ADD, LIMIT - 2) + "\ud800"
    assert len(text) == LIMIT - 1
    with pytest.raises(ReviewerAnswerError, match="bytes"):
        parse_reviewer_answer(text)


def answer(*ops: dict[str, object]) -> str:
    return json.dumps({"operations": list(ops)})


def test_fifty_operations_are_accepted_and_fifty_one_refused() -> None:
    op = {"op": "archive", "id": 1}
    assert len(parse_reviewer_answer(answer(*[op] * 50))) == 50
    with pytest.raises(ReviewerAnswerError, match="51 operations, limit 50"):
        parse_reviewer_answer(answer(*[op] * 51))


def test_row_ids_from_1_to_the_largest_sqlite_rowid() -> None:
    largest = 9223372036854775807
    assert parse_reviewer_answer(answer({"op": "archive", "id": largest})) == [ArchiveOperation(id=largest)]
    assert parse_reviewer_answer(answer({"op": "archive", "id": 1})) == [ArchiveOperation(id=1)]
    for bad in (largest + 1, 0, -1):
        with pytest.raises(ReviewerAnswerError, match="positive row id"):
            parse_reviewer_answer(answer({"op": "archive", "id": bad}))


@pytest.mark.parametrize("text", ["Nothing to save.", "  Nothing to save.\n", '{"operations": []}'])
def test_nothing_to_save_spellings(text: str) -> None:
    assert parse_reviewer_answer(text) == []


@pytest.mark.parametrize("text", ["nothing to save.", "Nothing to save", "Nothing to save!", "", "   "])
def test_other_spellings_are_refused(text: str) -> None:
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer(text)


@pytest.mark.parametrize("fence", ["```json\n", "```JSON\n", "```\n", "``` json \n"])
def test_one_fenced_block_is_accepted(fence: str) -> None:
    assert len(parse_reviewer_answer(f"{fence}{ONE_ADD}\n```")) == 1


@pytest.mark.parametrize("text", [f"```python\n{ONE_ADD}\n```", "```" + ONE_ADD + "```", "``````",
                                  f"Here it is: {ONE_ADD}", f"{ONE_ADD} done", "[1]"])
def test_other_wrappings_are_refused(text: str) -> None:
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer(text)


def test_the_smallest_fenced_block() -> None:
    # The newline right before the closing fence: an empty body, refused as not JSON.
    with pytest.raises(ReviewerAnswerError, match="one JSON object"):
        parse_reviewer_answer("```\n```")


def test_all_fields_of_each_operation() -> None:
    ops = parse_reviewer_answer(answer(
        {"op": "add", "category": "goal", "key": "k", "value": "v", "confidence": 0.5},
        {"op": "add", "category": "goal", "key": "k", "value": "v"},
        {"op": "replace", "id": 3, "value": "w"},
        {"op": "replace", "id": 3, "category": "interest", "key": "k2", "confidence": 1},
        {"op": "archive", "id": 4, "reason": "old"},
        {"op": "archive", "id": 5},
    ))
    assert ops == [
        AddOperation(category="goal", key="k", value="v", confidence=0.5),
        AddOperation(category="goal", key="k", value="v", confidence=1.0),
        ReplaceOperation(id=3, value="w"),
        ReplaceOperation(id=3, category="interest", key="k2", confidence=1),
        ArchiveOperation(id=4, reason="old"),
        ArchiveOperation(id=5, reason=""),
    ]


@pytest.mark.parametrize(
    ("op", "message"),
    [
        ({"op": "replace", "id": 3}, "at least one of"),
        ({"op": "add", "category": "goal", "key": "k"}, "missing 'value'"),
        ({"op": "archive", "id": 3, "extra": 1}, "unknown fields 'extra'"),
        ({"op": "add", "category": "goal", "key": "k", "value": None}, "must be a JSON string, got null"),
        ({"op": "add", "category": 1, "key": "k", "value": "v"}, '"category" must be a JSON string, got a number'),
        ({"op": "add", "category": "g", "key": "k", "value": "v", "confidence": "1"}, "JSON number, got a string"),
        ({"op": "add", "category": "g", "key": "k", "value": "v", "confidence": True}, "JSON number, got a boolean"),
        ({"op": "replace", "id": 1.0, "value": "v"}, "JSON integer, got a number"),
        ({"op": "replace", "id": True, "value": "v"}, "JSON integer, got a boolean"),
        ({"op": "replace", "id": [1], "value": "v"}, "JSON integer, got an array"),
        ({"op": "replace", "id": {}, "value": "v"}, "JSON integer, got an object"),
        ({"op": "delete", "id": 1}, '"op" must be'),
        ({"id": 1}, '"op" must be'),
    ],
)
def test_structural_problems_name_the_operation(op: dict[str, object], message: str) -> None:
    with pytest.raises(ReviewerAnswerError, match="operations\\[1\\]") as raised:
        parse_reviewer_answer(answer({"op": "archive", "id": 1}, op))
    assert message in str(raised.value)


def test_a_lone_surrogate_in_a_field_is_refused() -> None:
    with pytest.raises(ReviewerAnswerError, match="not valid Unicode"):
        parse_reviewer_answer('{"operations": [{"op": "add", "category": "g", "key": "k", "value": "\\ud800"}]}')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"operations": [], "extra": 1}', "unknown top-level keys"),
        ("{}", 'no "operations" list'),
        ('{"operations": {}}', "must be a JSON array"),
        ('{"operations": [1]}', "must be a JSON object"),
        ('{"operations": [], "operations": []}', "duplicate key"),
        ('{"operations": [{"op": "add", "category": "g", "key": "k", "value": "v", "confidence": NaN}]}',
         "not a JSON number"),
    ],
)
def test_document_problems(text: str, message: str) -> None:
    with pytest.raises(ReviewerAnswerError, match=message):
        parse_reviewer_answer(text)


def test_non_text_answer_is_refused() -> None:
    with pytest.raises(ReviewerAnswerError, match="must be text"):
        parse_reviewer_answer(b"Nothing to save.")  # type: ignore[arg-type]


def test_format_round_trips_and_leaves_unset_fields_out() -> None:
    ops = [AddOperation(category="goal", key="k", value="v\u00e9", confidence=0.5),
           ReplaceOperation(id=3, key="k2"), ArchiveOperation(id=4), ArchiveOperation(id=5, reason="r")]
    text = format_reviewer_answer(ops)
    assert "\u00e9" in text  # not escaped
    assert parse_reviewer_answer(text) == ops
    assert operation_to_dict(ReplaceOperation(id=3, key="k2")) == {"op": "replace", "id": 3, "key": "k2"}
    assert operation_to_dict(ArchiveOperation(id=4)) == {"op": "archive", "id": 4}
    assert operation_to_dict(ArchiveOperation(id=5, reason="r")) == {"op": "archive", "id": 5, "reason": "r"}
    assert format_reviewer_answer([]) == "Nothing to save."


def test_an_empty_answer_is_refused_as_empty() -> None:
    for text in ("", "  \n "):
        with pytest.raises(ReviewerAnswerError, match="empty"):
            parse_reviewer_answer(text)


def test_a_fence_that_is_opened_but_not_closed_is_refused() -> None:
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer('```json\n{"operations": []}abc')
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer('{"operations": []}\n```')


_CATEGORY = {"type": "string", "enum": ["identity", "preference", "interest", "goal", "context", "directive"]}
_CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1}
_SOURCES = {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 50}


def test_the_structured_output_schema_is_exactly_the_answer_form() -> None:
    # Providers enforce this schema: its limits must be the parser's (confidence 0..1, ids
    # from 1, at most 50 operations and 50 source ids, no field beyond the listed ones).
    assert OPERATIONS_SCHEMA == {
        "type": "object",
        "properties": {
            "operations": {
                "type": "array",
                "maxItems": 50,
                "items": {
                    "anyOf": [
                        {
                            "type": "object",
                            "properties": {"op": {"const": "add"}, "category": _CATEGORY, "key": {"type": "string"},
                                           "value": {"type": "string"}, "confidence": _CONFIDENCE,
                                           "source_message_ids": _SOURCES},
                            "required": ["op", "category", "key", "value"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {"op": {"const": "replace"}, "id": {"type": "integer", "minimum": 1},
                                           "value": {"type": "string"}, "category": _CATEGORY,
                                           "key": {"type": "string"}, "confidence": _CONFIDENCE,
                                           "source_message_ids": _SOURCES},
                            "required": ["op", "id"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {"op": {"const": "archive"}, "id": {"type": "integer", "minimum": 1},
                                           "reason": {"type": "string"}, "source_message_ids": _SOURCES},
                            "required": ["op", "id"],
                            "additionalProperties": False,
                        },
                    ]
                },
            }
        },
        "required": ["operations"],
        "additionalProperties": False,
    }


def thinking(size: int) -> str:
    """A ``<think>`` block followed by :data:`ONE_ADD`, ``size`` characters in all."""
    return "<think>" + "x" * (size - len("<think></think>") - len(ONE_ADD)) + "</think>" + ONE_ADD


def test_tolerant_parse_repairs_an_answer_of_exactly_64_kib() -> None:
    text = thinking(LIMIT)
    assert len(text) == LIMIT
    assert parse_reviewer_answer_tolerant(text) == (
        [AddOperation(category="goal", key="k", value="v")],
        ("thinking dropped",),
    )


def test_tolerant_parse_never_repairs_an_answer_over_64_kib() -> None:
    # The answer left after the thinking is small, but the answer as given is too long.
    with pytest.raises(ReviewerAnswerError, match="65536 bytes"):
        parse_reviewer_answer_tolerant(thinking(LIMIT + 1))


def test_tolerant_parse_refuses_non_text_with_the_typed_error() -> None:
    with pytest.raises(ReviewerAnswerError, match="must be text, got NoneType"):
        parse_reviewer_answer_tolerant(None)  # type: ignore[arg-type]


def test_a_closing_think_tag_without_the_opening_one_is_prose() -> None:
    text = "My answer </think> " + ONE_ADD
    assert parse_reviewer_answer_tolerant(text) == (
        [AddOperation(category="goal", key="k", value="v")],
        ("prose around the answer dropped",),
    )


def test_an_opening_think_tag_that_is_never_closed_is_prose() -> None:
    text = "<think> I will save one goal. " + ONE_ADD
    assert parse_reviewer_answer_tolerant(text) == (
        [AddOperation(category="goal", key="k", value="v")],
        ("prose around the answer dropped",),
    )


def test_after_dropped_thinking_the_error_is_about_the_answer_itself() -> None:
    # Two objects after the thinking: refused, and the message is about what follows the
    # thinking, not about the thinking block the strict parser first stumbled on.
    with pytest.raises(ReviewerAnswerError, match="not one valid JSON object"):
        parse_reviewer_answer_tolerant("<think>hmm</think> " + ONE_ADD + " " + ONE_ADD)


def test_an_object_no_repair_can_read_keeps_the_strict_error() -> None:
    # Balanced braces, but neither JSON nor a Python literal (a bare word as a value).
    with pytest.raises(ReviewerAnswerError, match="not one valid JSON object: Expecting value"):
        parse_reviewer_answer_tolerant('{"operations": nope}')


def test_tolerant_parse_refuses_an_answer_over_64_kib_in_utf8_bytes() -> None:
    head = '{"operations": [{"op": "add", "category": "goal", "key": "k", "value": "'
    text = head + "\u00e9" * 33000 + '"}]}'
    assert len(text) < LIMIT < len(text.encode("utf-8"))
    with pytest.raises(ReviewerAnswerError, match="65536 bytes"):
        parse_reviewer_answer_tolerant(text)


def test_an_apostrophe_in_the_prose_before_the_answer_opens_no_string() -> None:
    assert parse_reviewer_answer_tolerant("Here's my answer: " + ONE_ADD) == (
        [AddOperation(category="goal", key="k", value="v")],
        ("prose around the answer dropped",),
    )


def test_prose_right_after_the_closing_brace_is_not_part_of_the_answer() -> None:
    assert parse_reviewer_answer_tolerant(ONE_ADD + ". Done.") == (
        [AddOperation(category="goal", key="k", value="v")],
        ("prose around the answer dropped",),
    )


def test_an_empty_python_string_first_in_the_answer_closes_at_once() -> None:
    # Adjacent Python literals join ('' 'operations' is 'operations'); the empty one must not
    # swallow the quote after it.
    assert parse_reviewer_answer_tolerant("{'' 'operations': []}") == ([], ("Python-style literal read as JSON",))


def test_an_escaped_quote_keeps_a_comma_inside_the_string() -> None:
    text = '{"operations": [{"op": "add", "category": "goal", "key": "k", "value": "say \\"a,}\\" now"},]}'
    assert parse_reviewer_answer_tolerant(text) == (
        [AddOperation(category="goal", key="k", value='say "a,}" now')],
        ("trailing commas dropped",),
    )


def test_an_apostrophe_after_the_answer_does_not_hide_a_second_object() -> None:
    # Two candidates stay ambiguous even when prose with an apostrophe separates them.
    for answer_text in (ONE_ADD, '{"operations": []}'):
        with pytest.raises(ReviewerAnswerError):
            parse_reviewer_answer_tolerant(answer_text + " That's all; not {this}.")


def test_a_fenced_array_is_refused_as_not_an_object() -> None:
    with pytest.raises(ReviewerAnswerError, match="must be a JSON object"):
        parse_reviewer_answer_tolerant('Here:\n```json\n["operations"]\n```')


def test_source_message_ids_are_optional_positive_integers_in_any_operation() -> None:
    given = [{"op": "add", "category": "goal", "key": "k", "value": "v", "source_message_ids": [4, 2, 4]},
             {"op": "replace", "id": 3, "value": "w", "source_message_ids": []},
             {"op": "archive", "id": 5, "source_message_ids": [9]}]
    assert parse_reviewer_answer(answer(*given)) == [
        AddOperation(category="goal", key="k", value="v", source_message_ids=(4, 2)),
        ReplaceOperation(id=3, value="w"),
        ArchiveOperation(id=5, source_message_ids=(9,)),
    ]
    assert operation_to_dict(ArchiveOperation(id=5, source_message_ids=(9,))) == {
        "op": "archive", "id": 5, "source_message_ids": [9]}
    for bad in ([0], ["1"], [True], 3, [1.0], list(range(1, 53))):
        with pytest.raises(ReviewerAnswerError, match="source_message_ids"):
            parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": bad}))
    # Source ids alone do not make a replace: it still needs something to change.
    with pytest.raises(ReviewerAnswerError, match="at least one"):
        parse_reviewer_answer(answer({"op": "replace", "id": 1, "source_message_ids": [1]}))
