"""The reviewer's answer (R-OPS, SPEC §12): the strict parser and the tolerant repair; the exact
limits (64 KiB, 50 operations, the largest row id) as literals, every accepted spelling next to
its refused neighbour, and how many source message ids one operation may name, in the parser and
in the structured-output schema providers enforce (the same limit, written here as a literal)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.domain.errors import ReviewerAnswerError
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.reviewer_answer import (
    _FIELDS,
    MAX_ANSWER_BYTES,
    MAX_OPERATIONS,
    MAX_SOURCE_IDS,
    NOTHING_TO_SAVE,
    OPERATIONS_SCHEMA,
    operation_to_dict,
    parse_reviewer_answer,
)
from fermix_memory.domain.reviewer_answer_repair import parse_reviewer_answer_tolerant
from tests.integration.loopback_models import WEAK_MODEL_ANSWERS, WEAK_MODEL_OPERATION

SPEC_EXAMPLE = """{"operations": [
 {"op": "add", "category": "preference", "key": "coffee", "value": "Prefers flat whites", "confidence": 0.9},
 {"op": "replace", "id": 12, "value": "Prefers oat-milk flat whites"},
 {"op": "archive", "id": 7, "reason": "no longer true"}]}"""

SPEC_OPERATIONS = [
    AddOperation(category="preference", key="coffee", value="Prefers flat whites", confidence=0.9),
    ReplaceOperation(id=12, value="Prefers oat-milk flat whites"),
    ArchiveOperation(id=7, reason="no longer true"),
]


def answer(*ops: dict[str, Any]) -> str:
    return json.dumps({"operations": list(ops)})


def answer_of(operations: list[Operation]) -> str:
    """What a model answers for ``operations``: the operations as JSON, ``Nothing to save.`` for none."""
    if not operations:
        return NOTHING_TO_SAVE
    return json.dumps({"operations": [operation_to_dict(op) for op in operations]}, ensure_ascii=False)


# --- the two accepted forms -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["Nothing to save.", "  Nothing to save.\n", "\n\tNothing to save. \n"])
def test_nothing_to_save(text: str) -> None:
    assert parse_reviewer_answer(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "Nothing to save",
        "nothing to save.",
        "NOTHING TO SAVE.",
        "Nothing to save!",
        "Nothing to save. Have a nice day.",
        "'Nothing to save.'",
        "`Nothing to save.`",
        "```\nNothing to save.\n```",
        "Nothing  to save.",
    ],
)
def test_other_spellings_of_nothing_are_refused(text: str) -> None:
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer(text)


def test_spec_example() -> None:
    assert parse_reviewer_answer(SPEC_EXAMPLE) == SPEC_OPERATIONS


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{SPEC_EXAMPLE}\n```",
        f"```JSON\n{SPEC_EXAMPLE}\n```",
        f"```\n{SPEC_EXAMPLE}\n```",
        f"\n  ```json  \n{SPEC_EXAMPLE}```  \n",
        f"```json\r\n{SPEC_EXAMPLE}\r\n```",
    ],
)
def test_one_fenced_block(text: str) -> None:
    assert parse_reviewer_answer(text) == SPEC_OPERATIONS


INDENTED_EXAMPLE = textwrap.indent(json.dumps(json.loads(SPEC_EXAMPLE), indent=2), "    ")


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n\n{SPEC_EXAMPLE}\n```",  # a blank line after the opening fence
        f"```json\n{INDENTED_EXAMPLE}\n```",  # the JSON indented inside the block
        f"```json\n\n{INDENTED_EXAMPLE}\n\n```",
        f"```\n \n\t{SPEC_EXAMPLE}\n```",
        f"```json\r\n\r\n  {SPEC_EXAMPLE}\r\n```",
    ],
)
def test_a_fenced_answer_may_indent_its_json_or_start_after_a_blank_line(text: str) -> None:
    assert parse_reviewer_answer(text) == SPEC_OPERATIONS


def test_fence_inside_a_json_string_does_not_end_the_block() -> None:
    text = "```json\n" + answer({"op": "archive", "id": 3, "reason": "a ``` b"}) + "\n```"
    assert parse_reviewer_answer(text) == [ArchiveOperation(id=3, reason="a ``` b")]


def test_empty_operations_list_is_nothing() -> None:
    assert parse_reviewer_answer('{"operations": []}') == []


def test_defaults() -> None:
    ops = parse_reviewer_answer(
        answer({"op": "add", "category": "goal", "key": "k", "value": "v"}, {"op": "archive", "id": 1})
    )
    assert ops == [AddOperation(category="goal", key="k", value="v", confidence=1.0), ArchiveOperation(id=1)]


def test_replace_may_change_each_field() -> None:
    ops = parse_reviewer_answer(
        answer(
            {"op": "replace", "id": 1, "category": "interest"},
            {"op": "replace", "id": 2, "key": "k2"},
            {"op": "replace", "id": 3, "confidence": 0.5},
            {"op": "replace", "id": 4, "value": "v", "category": "goal", "key": "k", "confidence": 1},
        )
    )
    assert ops == [
        ReplaceOperation(id=1, category="interest"),
        ReplaceOperation(id=2, key="k2"),
        ReplaceOperation(id=3, confidence=0.5),
        ReplaceOperation(id=4, value="v", category="goal", key="k", confidence=1),
    ]


def test_content_problems_are_left_for_admission() -> None:
    text = answer(
        {"op": "add", "category": "hobby", "key": "", "value": "x" * 5000, "confidence": 7},
        {"op": "replace", "id": 2, "confidence": -0.5},
        {"op": "add", "category": "goal", "key": "k", "value": "v", "confidence": 12345},
    ).replace("12345", "1e400")  # a number literal too large for a float becomes inf
    ops = parse_reviewer_answer(text)
    assert ops[0] == AddOperation(category="hobby", key="", value="x" * 5000, confidence=7)
    assert ops[1] == ReplaceOperation(id=2, confidence=-0.5)
    assert isinstance(ops[2], AddOperation) and ops[2].confidence == float("inf")


# --- refusals ---------------------------------------------------------------------------------


def refused(text: str, *fragments: str) -> None:
    with pytest.raises(ReviewerAnswerError) as info:
        parse_reviewer_answer(text)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        f"Here are the operations:\n{SPEC_EXAMPLE}",
        f"{SPEC_EXAMPLE}\nLet me know if you need more.",
        f"Sure!\n```json\n{SPEC_EXAMPLE}\n```",
        f"```json\n{SPEC_EXAMPLE}\n```\nDone.",
        f"```json\n{SPEC_EXAMPLE}\n```\n```json\n{SPEC_EXAMPLE}\n```",
        f"{SPEC_EXAMPLE}\n{SPEC_EXAMPLE}",
        f"```python\n{SPEC_EXAMPLE}\n```",
        f"```json {SPEC_EXAMPLE}```",
        f"```json\n{SPEC_EXAMPLE}",
        "",
        "   ",
        "[]",
        '"Nothing to save."',
        "null",
        "{",
    ],
)
def test_anything_else_around_the_json_is_refused(text: str) -> None:
    refused(text)


def test_top_level_shape() -> None:
    refused("{}", "operations")
    refused('{"ops": []}', "unknown top-level keys", "'ops'")
    refused('{"operations": [], "note": "hi"}', "'note'")
    refused('{"operations": {}}', "array")
    refused('{"operations": "none"}', "array")


def test_duplicate_keys() -> None:
    refused('{"operations": [], "operations": []}', "duplicate key")
    refused('{"operations": [{"op": "archive", "id": 1, "id": 2}]}', "duplicate key")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_constants(constant: str) -> None:
    text = f'{{"operations": [{{"op": "replace", "id": 1, "confidence": {constant}}}]}}'
    refused(text, "not a JSON number")


def test_huge_input() -> None:
    big = answer({"op": "add", "category": "goal", "key": "k", "value": "x" * MAX_ANSWER_BYTES})
    refused(big, "longer than")
    refused("Nothing to save." + " " * MAX_ANSWER_BYTES, "longer than")
    # Multi-byte text counts in bytes, not characters.
    refused(answer({"op": "add", "category": "goal", "key": "k", "value": "é" * 40_000}), "bytes")


def test_deep_nesting_and_huge_numbers_do_not_crash() -> None:
    refused("{" + '"a":[' * 20_000 + "]" * 20_000 + "}")
    refused('{"operations": [' + "[" * 30_000 + "]" * 30_000 + "]}")
    refused('{"operations": [{"op": "archive", "id": ' + "9" * 5000 + "}]}")
    refused('{"operations": [{"op": "archive", "id": ' + "9" * 30 + "}]}", "operations[0]", "row id")


def test_too_many_operations() -> None:
    ops = [{"op": "archive", "id": i + 1} for i in range(MAX_OPERATIONS)]
    assert len(parse_reviewer_answer(answer(*ops))) == MAX_OPERATIONS
    refused(answer(*ops, {"op": "archive", "id": 99}), "limit 50")


@pytest.mark.parametrize(
    ("op", "fragments"),
    [
        ("not an object", ("operations[1]", "JSON object")),
        ({"category": "goal"}, ("operations[1]", '"op"')),
        ({"op": "delete", "id": 1}, ("operations[1]", "'delete'")),
        ({"op": "ADD", "category": "goal", "key": "k", "value": "v"}, ("operations[1]",)),
        ({"op": "add", "category": "goal", "key": "k"}, ("operations[1]", "missing", "'value'")),
        ({"op": "add", "category": "goal", "value": "v"}, ("missing", "'key'")),
        ({"op": "add", "key": "k", "value": "v"}, ("missing", "'category'")),
        ({"op": "replace", "value": "v"}, ("missing", "'id'")),
        ({"op": "replace", "id": 3}, ("operations[1]", "at least one")),
        ({"op": "archive"}, ("missing", "'id'")),
        (
            {"op": "add", "category": "goal", "key": "k", "value": "v", "scope": "x"},
            ("unknown fields", "'scope'"),
        ),
        ({"op": "replace", "id": 1, "value": "v", "reason": "r"}, ("unknown fields", "'reason'")),
        ({"op": "archive", "id": 1, "value": "v"}, ("unknown fields", "'value'")),
        ({"op": "archive", "id": "7"}, ("operations[1]", '"id"', "a string")),
        ({"op": "archive", "id": True}, ('"id"', "a boolean")),
        ({"op": "archive", "id": 7.0}, ('"id"', "integer")),
        ({"op": "archive", "id": 0}, ('"id"', "positive")),
        ({"op": "archive", "id": -3}, ('"id"', "positive")),
        ({"op": "archive", "id": None}, ('"id"', "null")),
        ({"op": "archive", "id": 1, "reason": 5}, ('"reason"', "string")),
        ({"op": "add", "category": 1, "key": "k", "value": "v"}, ('"category"', "a number")),
        ({"op": "add", "category": "goal", "key": ["k"], "value": "v"}, ('"key"', "an array")),
        ({"op": "add", "category": "goal", "key": "k", "value": {"a": 1}}, ('"value"', "an object")),
        ({"op": "add", "category": "goal", "key": "k", "value": "v", "confidence": "0.9"}, ('"confidence"',)),
        ({"op": "add", "category": "goal", "key": "k", "value": "v", "confidence": True}, ('"confidence"',)),
        ({"op": "replace", "id": 1, "value": None}, ('"value"', "null")),
    ],
)
def test_structural_problems_name_the_operation(op: object, fragments: tuple[str, ...]) -> None:
    valid = {"op": "archive", "id": 1}
    refused(json.dumps({"operations": [valid, op]}), *fragments)


def test_lone_surrogate_in_a_string_is_refused() -> None:
    refused('{"operations": [{"op": "archive", "id": 1, "reason": "\\ud800"}]}', "operations[0]", "Unicode")


def test_non_text_input() -> None:
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer(b"Nothing to save.")  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------------

texts = st.text(max_size=80)
ids = st.integers(min_value=1, max_value=2**63 - 1)
confidences = st.one_of(
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(allow_nan=False, allow_infinity=False),  # out of range: admission's business
    st.integers(min_value=-5, max_value=5),
)

add_ops = st.builds(AddOperation, category=texts, key=texts, value=texts, confidence=confidences)
replace_ops = st.builds(
    ReplaceOperation,
    id=ids,
    value=st.none() | texts,
    category=st.none() | texts,
    key=st.none() | texts,
    confidence=st.none() | confidences,
).filter(lambda op: any(v is not None for v in (op.value, op.category, op.key, op.confidence)))
archive_ops = st.builds(ArchiveOperation, id=ids, reason=texts)
operation_lists = st.lists(st.one_of(add_ops, replace_ops, archive_ops), max_size=MAX_OPERATIONS)


@given(operation_lists, st.sampled_from(["plain", "json_fence", "bare_fence", "indented"]))
@settings(max_examples=150)
def test_round_trip(operations: list[Operation], form: str) -> None:
    if form == "indented":
        text = json.dumps({"operations": [operation_to_dict(op) for op in operations]}, indent=2)
    else:
        text = answer_of(operations)
        if form == "json_fence" and operations:
            text = f"```json\n{text}\n```"
        elif form == "bare_fence" and operations:
            text = f"```\n{text}\n```"
    assert parse_reviewer_answer(text) == operations


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("utf-8", "replace"))))
@settings(max_examples=400)
def test_any_text_parses_or_raises_reviewer_answer_error(text: str) -> None:
    try:
        result = parse_reviewer_answer(text)
    except ReviewerAnswerError:
        return
    assert isinstance(result, list)


@given(st.dictionaries(st.sampled_from(["operations", "op", "x"]), json_values, max_size=3))
@settings(max_examples=150)
def test_any_json_object_parses_or_raises_reviewer_answer_error(document: dict[str, Any]) -> None:
    try:
        result = parse_reviewer_answer(json.dumps(document))
    except ReviewerAnswerError:
        return
    assert isinstance(result, list)


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["op", "id", "category", "key", "value", "confidence", "reason", "extra"]),
            st.sampled_from(["add", "replace", "archive"]) | json_values,
            max_size=6,
        ),
        max_size=5,
    )
)
@settings(max_examples=150)
def test_any_operation_objects_parse_or_raise_reviewer_answer_error(ops: list[dict[str, Any]]) -> None:
    try:
        result = parse_reviewer_answer(json.dumps({"operations": ops}))
    except ReviewerAnswerError:
        return
    assert len(result) == len(ops)


# --- weak-model answers: conservative repairs ----------------------------------------------------------


@pytest.mark.parametrize("name", list(WEAK_MODEL_ANSWERS))
def test_weak_model_answers_are_repaired_or_refused_never_misread(name: str) -> None:
    text, repaired = WEAK_MODEL_ANSWERS[name]
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer(text)  # the strict contract refuses every one of them
    if not repaired:
        with pytest.raises(ReviewerAnswerError):
            parse_reviewer_answer_tolerant(text)
        return
    operations, repairs = parse_reviewer_answer_tolerant(text)
    if name == "think-block":
        assert repairs == ("thinking dropped",)
    assert repairs
    assert [operation_to_dict(op) for op in operations] == [{**WEAK_MODEL_OPERATION, "confidence": 1.0}]


def test_weak_model_repairs_measured() -> None:
    # The measurement the ADR quotes: of 15 typical weak answers, strict parsing used none,
    # the repairs use 6, and the other 9 still fail (then get a repair turn, then the next provider).
    usable = sum(repaired for _, repaired in WEAK_MODEL_ANSWERS.values())
    assert (len(WEAK_MODEL_ANSWERS), usable) == (15, 6)


def test_tolerant_parse_of_a_strict_answer_reports_no_repair() -> None:
    assert parse_reviewer_answer_tolerant(SPEC_EXAMPLE) == (SPEC_OPERATIONS, ())
    assert parse_reviewer_answer_tolerant("Nothing to save.") == ([], ())


@pytest.mark.parametrize(
    "text",
    [
        # a comma inside a string is data, never "repaired"
        '{"operations": [{"op": "add", "category": "context", "key": "k", "value": "a ,}"}]}',
    ],
)
def test_repairs_never_change_string_content(text: str) -> None:
    [op] = parse_reviewer_answer_tolerant(text)[0]
    assert isinstance(op, AddOperation) and op.value == "a ,}"


def test_trailing_comma_repair_keeps_commas_inside_strings() -> None:
    text = '{"operations": [{"op": "add", "category": "context", "key": "k", "value": "x, ]",},]}'
    operations, repairs = parse_reviewer_answer_tolerant(text)
    assert repairs == ("trailing commas dropped",)
    assert [op.value for op in operations] == ["x, ]"]  # type: ignore[union-attr]


def test_python_literal_with_a_repeated_key_is_refused() -> None:
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer_tolerant("{'operations': [{'op': 'add', 'op': 'archive', 'id': 3}]}")


def test_python_literal_is_never_evaluated() -> None:
    with pytest.raises(ReviewerAnswerError):
        parse_reviewer_answer_tolerant("{'operations': [__import__('os').getcwd()]}")


def test_operations_schema_matches_the_parser_fields() -> None:
    variants = OPERATIONS_SCHEMA["properties"]["operations"]["items"]["anyOf"]  # type: ignore[index]
    fields = {v["properties"]["op"]["const"]: (set(v["required"]), set(v["properties"]) - set(v["required"]))
              for v in variants}
    assert fields == {op: (set(req), set(opt)) for op, (req, opt) in _FIELDS.items()}


@pytest.mark.parametrize("text", [
    "Secretword7731 is what you said",  # prose
    "```secretword7731\n{}\n```",  # fence tag
    '{"operations": [], "Secretword7731": 1}',  # top-level key
    '{"operations": [{"op": "Secretword7731"}]}',  # op
    '{"operations": [{"op": "archive", "id": 1, "Secretword7731": 1}]}',  # field
    '{"operations": [], "operations": [], "Secretword7731": 1, "Secretword7731": 2}',  # duplicate key
    '{"Secretword7731": 1, "Secretword7731": 2}',
])
def test_an_error_names_the_answer_words_but_its_answer_free_form_does_not(text: str) -> None:
    for parse in (parse_reviewer_answer, parse_reviewer_answer_tolerant):
        with pytest.raises(ReviewerAnswerError) as info:
            parse(text)
        assert "7731" in str(info.value) or "operations" in str(info.value)
        assert "7731" not in info.value.without_answer
        assert info.value.without_answer.startswith(str(info.value)[:20])


BYTES_LIMIT = 65536  # 64 KiB
ONE_ADD = '{"operations": [{"op": "add", "category": "goal", "key": "k", "value": "v"}]}'


def padded(body: str, size: int, pad: str = " ") -> str:
    """``body`` followed by whitespace up to ``size`` characters."""
    return body + pad * (size - len(body))


def test_an_answer_of_exactly_64_kib_is_parsed_and_one_byte_more_refused() -> None:
    assert parse_reviewer_answer(padded(ONE_ADD, BYTES_LIMIT)) == [AddOperation(category="goal", key="k", value="v")]
    with pytest.raises(ReviewerAnswerError, match="65536 bytes"):
        parse_reviewer_answer(padded(ONE_ADD, BYTES_LIMIT + 1))


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    # "é" is two bytes: the value makes the text 64 KiB in bytes while shorter in characters.
    head = '{"operations": [{"op": "add", "category": "goal", "key": "k", "value": "'
    tail = '"}]}'
    room = BYTES_LIMIT - len(head) - len(tail)
    exact = head + "\u00e9" * (room // 2) + "x" * (room % 2) + tail
    assert len(exact.encode("utf-8")) == BYTES_LIMIT and len(exact) < BYTES_LIMIT
    assert len(parse_reviewer_answer(exact)) == 1
    over = head + "\u00e9" * (room // 2) + "x" * (room % 2) + "\u00e9" + tail
    assert len(over) < BYTES_LIMIT
    with pytest.raises(ReviewerAnswerError, match="bytes"):
        parse_reviewer_answer(over)


def test_a_lone_surrogate_counts_three_bytes_towards_the_limit() -> None:
    text = padded(ONE_ADD, BYTES_LIMIT - 2) + "\ud800"
    assert len(text) == BYTES_LIMIT - 1
    with pytest.raises(ReviewerAnswerError, match="bytes"):
        parse_reviewer_answer(text)


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
def test_structural_problems_name_the_operation_in_exact_words(op: dict[str, object], message: str) -> None:
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


def test_an_answer_round_trips_and_leaves_unset_fields_out() -> None:
    ops = [AddOperation(category="goal", key="k", value="v\u00e9", confidence=0.5),
           ReplaceOperation(id=3, key="k2"), ArchiveOperation(id=4), ArchiveOperation(id=5, reason="r")]
    text = answer_of(ops)
    assert "\u00e9" in text  # not escaped
    assert parse_reviewer_answer(text) == ops
    assert operation_to_dict(ReplaceOperation(id=3, key="k2")) == {"op": "replace", "id": 3, "key": "k2"}
    assert operation_to_dict(ArchiveOperation(id=4)) == {"op": "archive", "id": 4}
    assert operation_to_dict(ArchiveOperation(id=5, reason="r")) == {"op": "archive", "id": 5, "reason": "r"}


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
_EXPIRES = {"type": "string", "description": "ISO 8601 time with a zone when the fact is to be erased, or 'never'"}


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
                                           "source_message_ids": _SOURCES, "expires_at": _EXPIRES},
                            "required": ["op", "category", "key", "value"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {"op": {"const": "replace"}, "id": {"type": "integer", "minimum": 1},
                                           "value": {"type": "string"}, "category": _CATEGORY,
                                           "key": {"type": "string"}, "confidence": _CONFIDENCE,
                                           "source_message_ids": _SOURCES, "expires_at": _EXPIRES},
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
    text = thinking(BYTES_LIMIT)
    assert len(text) == BYTES_LIMIT
    assert parse_reviewer_answer_tolerant(text) == (
        [AddOperation(category="goal", key="k", value="v")],
        ("thinking dropped",),
    )


def test_tolerant_parse_never_repairs_an_answer_over_64_kib() -> None:
    # The answer left after the thinking is small, but the answer as given is too long.
    with pytest.raises(ReviewerAnswerError, match="65536 bytes"):
        parse_reviewer_answer_tolerant(thinking(BYTES_LIMIT + 1))


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
    assert len(text) < BYTES_LIMIT < len(text.encode("utf-8"))
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


SOURCE_IDS_LIMIT = 50


def test_the_source_id_limit_is_50() -> None:
    assert MAX_SOURCE_IDS == SOURCE_IDS_LIMIT


def test_exactly_50_source_ids_are_accepted_and_51_refused() -> None:
    ids = list(range(1, SOURCE_IDS_LIMIT + 1))
    assert parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": ids})) == [
        ArchiveOperation(id=1, source_message_ids=tuple(ids))]
    add = {"op": "add", "category": "goal", "key": "k", "value": "v"}
    assert parse_reviewer_answer(answer({**add, "source_message_ids": ids})) == [
        AddOperation(category="goal", key="k", value="v", source_message_ids=tuple(ids))]
    with pytest.raises(ReviewerAnswerError, match='"source_message_ids" has more than 50 ids'):
        parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": [*ids, SOURCE_IDS_LIMIT + 1]}))


def test_51_ids_are_refused_even_when_duplicates_fold_to_fewer() -> None:
    # The limit is on what the model wrote, before duplicates are folded.
    with pytest.raises(ReviewerAnswerError, match="more than 50 ids"):
        parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": [7] * (SOURCE_IDS_LIMIT + 1)}))
    assert parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": [7] * SOURCE_IDS_LIMIT})) == [
        ArchiveOperation(id=1, source_message_ids=(7,))]


def test_every_operation_of_the_schema_allows_50_source_ids_and_50_operations() -> None:
    properties: Any = OPERATIONS_SCHEMA["properties"]
    operations = properties["operations"]
    assert operations["maxItems"] == 50
    limits = [op["properties"]["source_message_ids"]["maxItems"] for op in operations["items"]["anyOf"]]
    assert limits == [50, 50, 50]


def test_a_refused_answer_is_quoted_for_the_model_and_left_out_of_the_record() -> None:
    quoting = ReviewerAnswerError("not JSON: ", "my address is 1 Main St")
    assert str(quoting) == "not JSON: my address is 1 Main St"
    assert quoting.without_answer == "not JSON: (the answer's text is left out)"
    plain = ReviewerAnswerError("too long")
    assert (str(plain), plain.without_answer) == ("too long", "too long")
