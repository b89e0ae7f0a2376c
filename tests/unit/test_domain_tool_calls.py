"""A model's tool calls as a message records them: what a host may give, the stored form, and how
a stored message reads back. Expected values are written out as literals."""

from __future__ import annotations

import math

import pytest

from fermix_memory.domain.tool_calls import (
    MAX_TOOL_CALLS,
    TOOL_CALL_ID_KEY,
    TOOL_CALLS_KEY,
    ToolCall,
    as_text,
    check_tool_metadata,
    stored_tool_calls,
    tool_call_id_of,
    tool_calls_of,
)
from fermix_memory.domain.values import Role


def calls(n: int) -> list[dict[str, str]]:
    return [{"id": f"c{i}", "name": "f", "arguments": "{}"} for i in range(n)]


def test_the_metadata_keys_and_the_cap_are_the_documented_ones() -> None:
    assert (TOOL_CALLS_KEY, TOOL_CALL_ID_KEY, MAX_TOOL_CALLS) == ("tool_calls", "tool_call_id", 128)


# --- what a host may give -----------------------------------------------------------------------


def test_exactly_128_calls_are_accepted_and_129_refused() -> None:
    assert len(stored_tool_calls(calls(128))) == 128
    with pytest.raises(ValueError, match="at most 128 tool calls"):
        stored_tool_calls(calls(129))


@pytest.mark.parametrize("value", [[], (), None, "c1", {"id": "c1", "name": "f"}])
def test_calls_are_a_non_empty_list(value: object) -> None:
    with pytest.raises(ValueError, match="non-empty list"):
        stored_tool_calls(value)


def test_a_tuple_of_calls_is_a_list_too() -> None:
    assert stored_tool_calls(({"id": "c1", "name": "f", "arguments": "{}"},)) == [
        {"id": "c1", "name": "f", "arguments": "{}"}]


def test_the_three_shapes_give_the_same_stored_call() -> None:
    stored = {"id": "c1", "name": "weather", "arguments": '{"city":"Paris"}'}
    openai = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}
    anthropic = {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}}
    assert stored_tool_calls([stored]) == stored_tool_calls([openai]) == stored_tool_calls([anthropic]) == [stored]


def test_a_call_named_outside_the_function_object_is_not_openais_shape() -> None:
    # "type": "function" alone does not make the call OpenAI's: without a function object the
    # name and arguments are read at the top, as the stored form has them.
    assert stored_tool_calls([{"id": "c1", "type": "function", "name": "f", "arguments": "{}"}]) == [
        {"id": "c1", "name": "f", "arguments": "{}"}]
    with pytest.raises(ValueError, match="name must be text"):
        stored_tool_calls([{"id": "c1", "type": "tool_choice", "name": None, "input": {"a": 1}}])


def test_non_json_arguments_are_kept_as_the_model_wrote_them() -> None:
    [call] = stored_tool_calls([{"id": "c1", "name": "f", "arguments": "city=Paris"}])
    assert call == {"id": "c1", "name": "f", "arguments": "city=Paris"}
    assert ToolCall("c1", "f", "city=Paris").input() == {"arguments": "city=Paris"}
    assert ToolCall("c1", "f", "[1, 2]").input() == {"arguments": "[1, 2]"}, "JSON, but no object"
    assert ToolCall("c1", "f", '{"a": [1]}').input() == {"a": [1]}


def test_missing_arguments_are_an_empty_object() -> None:
    assert stored_tool_calls([{"id": "c1", "name": "f"}]) == [{"id": "c1", "name": "f", "arguments": "{}"}]


def test_non_ascii_arguments_are_stored_unescaped_and_compact() -> None:
    [call] = stored_tool_calls([{"id": "c1", "name": "f", "arguments": {"city": "Zürich", "n": 1}}])
    assert call["arguments"] == '{"city":"Zürich","n":1}'


def test_arguments_that_are_no_json_are_refused() -> None:
    with pytest.raises(ValueError, match="JSON-serialisable"):
        stored_tool_calls([{"id": "c1", "name": "f", "arguments": {"x": math.nan}}])
    with pytest.raises(ValueError, match="JSON-serialisable"):
        stored_tool_calls([{"id": "c1", "name": "f", "arguments": {"x": object()}}])
    with pytest.raises(ValueError, match="a JSON object or JSON text, got int"):
        stored_tool_calls([{"id": "c1", "name": "f", "arguments": 3}])


def test_a_call_must_be_an_object() -> None:
    with pytest.raises(ValueError, match="must be an object with id, name and arguments, got str"):
        stored_tool_calls(["c1"])


@pytest.mark.parametrize(("call", "message"), [
    ({"id": "", "name": "f"}, "a tool call's id must not be empty"),
    ({"id": "c\x001", "name": "f"}, "a tool call's id must not contain control characters"),
    ({"id": "c1", "name": 7}, "a tool call's name must be text, got int"),
])
def test_a_bad_id_or_name_is_a_plain_value_error(call: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        stored_tool_calls([call])
    assert type(raised.value) is ValueError and str(raised.value) == message


def test_the_calls_of_one_message_have_different_ids() -> None:
    with pytest.raises(ValueError, match="different ids"):
        stored_tool_calls([{"id": "c1", "name": "f"}, {"id": "c1", "name": "g"}])


# --- the metadata of a message ------------------------------------------------------------------


def test_calls_belong_on_an_assistant_message_and_a_call_id_on_a_tool_result() -> None:
    given = {TOOL_CALLS_KEY: [{"id": "c1", "name": "f", "arguments": {"a": "é"}}], "other": 1}
    assert check_tool_metadata(Role.ASSISTANT, given) == {
        "tool_calls": [{"id": "c1", "name": "f", "arguments": '{"a":"é"}'}], "other": 1}
    assert check_tool_metadata(Role.TOOL, {TOOL_CALL_ID_KEY: "c1"}) == {"tool_call_id": "c1"}
    assert check_tool_metadata(Role.USER, {"other": 1}) == {"other": 1}
    with pytest.raises(ValueError, match="only an assistant message can carry tool_calls"):
        check_tool_metadata(Role.USER, given)
    with pytest.raises(ValueError, match="only a tool message can carry a tool_call_id"):
        check_tool_metadata(Role.ASSISTANT, {TOOL_CALL_ID_KEY: "c1"})
    with pytest.raises(ValueError, match="tool_call_id must not be empty"):
        check_tool_metadata(Role.TOOL, {TOOL_CALL_ID_KEY: ""})


def test_a_stored_message_reads_back_its_calls_and_never_raises() -> None:
    stored = {TOOL_CALLS_KEY: [{"id": "c1", "name": "f", "arguments": "{}"}]}
    assert tool_calls_of(stored) == (ToolCall("c1", "f", "{}"),)
    assert tool_calls_of({}) == ()
    assert tool_calls_of({TOOL_CALLS_KEY: []}) == ()
    assert tool_calls_of({TOOL_CALLS_KEY: "garbled"}) == ()
    assert tool_calls_of({TOOL_CALLS_KEY: calls(129)}) == ()


def test_a_stored_tool_message_reads_back_the_id_it_answers() -> None:
    assert tool_call_id_of({TOOL_CALL_ID_KEY: "c1"}) == "c1"
    assert tool_call_id_of({TOOL_CALL_ID_KEY: ""}) is None
    assert tool_call_id_of({TOOL_CALL_ID_KEY: 7}) is None
    assert tool_call_id_of({}) is None


# --- as plain text ------------------------------------------------------------------------------


def test_a_call_as_one_line_of_text() -> None:
    assert ToolCall("c1", "weather", '{"city":"Paris"}').describe() == (
        '[called tool weather (id c1) with {"city":"Paris"}]')


def test_a_whitespace_only_reply_leaves_only_its_calls() -> None:
    call = ToolCall("c1", "f", "{}")
    assert as_text(" \n\t ", [call]) == "[called tool f (id c1) with {}]"
    assert as_text(" \n ", []) == ""
    assert as_text(" hi ", [call, ToolCall("c2", "g", "x")]) == (
        "hi\n[called tool f (id c1) with {}]\n[called tool g (id c2) with x]")
