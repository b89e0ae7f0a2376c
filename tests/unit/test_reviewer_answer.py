"""The strict parser of the reviewer's answer (R-OPS, SPEC §12)."""

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
    OPERATIONS_SCHEMA,
    format_reviewer_answer,
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
@settings(max_examples=300)
def test_round_trip(operations: list[Operation], form: str) -> None:
    if form == "indented":
        text = json.dumps({"operations": [operation_to_dict(op) for op in operations]}, indent=2)
    else:
        text = format_reviewer_answer(operations)
        if not operations:
            assert text == "Nothing to save."
        elif form == "json_fence":
            text = f"```json\n{text}\n```"
        elif form == "bare_fence":
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
@settings(max_examples=300)
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
@settings(max_examples=400)
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
