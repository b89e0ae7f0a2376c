"""A message's metadata is walked once and encoded once: the checks refuse and accept exactly what
the plain measure (``json.dumps`` with its defaults) refuses and accepts, and the canonical text
they make is what the payload and the message's row write."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.adapters.sql import codec
from fermix_memory.adapters.sql.projections import message_row
from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.message_input import (
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    InvalidMessage,
    build_message_event,
)
from fermix_memory.domain.message_metadata import CheckedMetadata
from fermix_memory.domain.tool_calls import TOOL_CALL_ID_KEY, TOOL_CALLS_KEY, check_tool_metadata
from fermix_memory.domain.values import Role

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def reference(meta: Mapping[str, Any], role: Role) -> dict[str, Any]:
    """The checks as plainly written: a depth walk, then ``json.dumps`` with its defaults measured."""
    stack: list[tuple[object, int]] = [(meta, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, list | tuple) else ()
        for child in children:
            if isinstance(child, Mapping | list | tuple):
                if depth >= MAX_METADATA_DEPTH:
                    raise InvalidMessage(f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep")
                stack.append((child, depth + 1))
    try:
        plain = check_tool_metadata(role, meta) if TOOL_CALLS_KEY in meta or TOOL_CALL_ID_KEY in meta else dict(meta)
    except ValueError as exc:
        raise InvalidMessage(str(exc)) from None
    try:
        encoded = json.dumps(plain, allow_nan=False)
        json.dumps(plain, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"metadata must be JSON-serialisable: {exc}") from None
    if len(encoded.encode()) > MAX_METADATA_BYTES:
        raise InvalidMessage(f"metadata is larger than {MAX_METADATA_BYTES} bytes")
    stored: dict[str, Any] = json.loads(encoded)
    return stored


def checked(metadata: Any, role: Role = Role.USER, **fields: Any) -> Any:
    return build_message_event(AppendMessage(agent_id="ada", owner_id="alice", conversation=("tg", "1"),
                                             role=role.value, content="hi", metadata=metadata, **fields), AT)


def outcome(run: Any) -> tuple[str, Any]:
    try:
        return "kept", run()
    except InvalidMessage as exc:
        return "refused", str(exc).split(":")[0]


def assert_as_reference(meta: dict[str, Any], role: Role = Role.USER) -> None:
    expected = outcome(lambda: reference(meta, role))
    got = outcome(lambda: checked(meta, role).metadata)
    assert got == expected
    if got[0] == "kept" and isinstance(got[1], CheckedMetadata):
        assert got[1].json == codec.canonical_json(got[1])


_texts = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\\x00\x1f\x7f:,\u2028\ud800\U0001f600é'),
                 max_size=8)
_keys = _texts | st.integers(-5, 12) | st.booleans() | st.none() | st.floats(allow_nan=False, width=16)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(width=32) | _texts,
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(_texts, inner, max_size=3) | st.dictionaries(_keys, inner, max_size=2),
    max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(meta=st.dictionaries(_texts, _json, max_size=4))
def test_metadata_is_kept_or_refused_as_the_plain_checks_do(meta: dict[str, Any]) -> None:
    assert_as_reference(meta)


@pytest.mark.parametrize("filler", ["x", "é", "\U0001f600", "\x7f", "\n", '"', "\\", ":", ",", "a:b,c"])
@pytest.mark.parametrize("nested", [False, True])
def test_the_size_limit_is_measured_to_the_byte_as_json_dumps_writes_it(filler: str, nested: bool) -> None:
    """At the limit, one byte under and one over: text beyond ASCII, DEL, escapes, and ':' and ','
    inside text (which are no separators) included."""
    def meta(n: int) -> dict[str, Any]:
        value = filler * n
        return {"a": [{"b": value, "c": [1, "x"]}, 2]} if nested else {"a": value, "b": 1}

    base = len(json.dumps(meta(0)))
    step = len(json.dumps(meta(1))) - base
    n = (MAX_METADATA_BYTES - base) // step
    for count in (n - 1, n, n + 1):
        assert_as_reference(meta(count))
        if len(json.dumps(meta(count))) <= MAX_METADATA_BYTES:
            assert checked(meta(count)).metadata == meta(count)
        else:
            with pytest.raises(InvalidMessage, match="larger than"):
                checked(meta(count))


def test_the_spaces_after_separators_decide_at_the_limit() -> None:
    """A compact text within the limit whose spaced form is over it is refused; one whose ':' and
    ',' are all inside text (no separators) is kept."""
    spaced = {"l": [1] * (MAX_METADATA_BYTES * 2 // 5)}
    assert len(json.dumps(spaced, separators=(",", ":"))) <= MAX_METADATA_BYTES < len(json.dumps(spaced))
    with pytest.raises(InvalidMessage, match="larger than"):
        checked(spaced)
    commas = {"s": ",:" * (MAX_METADATA_BYTES // 2 - 10)}
    assert len(json.dumps(commas)) <= MAX_METADATA_BYTES
    assert checked(commas).metadata == commas


def test_a_huge_metadata_is_refused_before_it_is_encoded() -> None:
    with pytest.raises(InvalidMessage, match="larger than"):
        checked({"many": [[]] * 1_000_000})
    with pytest.raises(InvalidMessage, match="larger than"):
        checked({"many": {str(i): {} for i in range(20_000)}})


def test_tool_calls_count_in_their_stored_form() -> None:
    """A call's fields that are not kept (here a big one) take no room in the stored metadata."""
    big = "x" * (MAX_METADATA_BYTES * 2)
    calls = [{"id": "c1", "name": "weather", "arguments": "{}", "extra": big}]
    event = checked({"note": "n"}, Role.ASSISTANT, tool_calls=calls)
    assert event.metadata == {"note": "n", TOOL_CALLS_KEY: [{"id": "c1", "name": "weather", "arguments": "{}"}]}
    assert_as_reference({"note": "n", TOOL_CALLS_KEY: calls}, Role.ASSISTANT)
    openai_shape = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": [1, {"b": "é"}]}}}]
    assert_as_reference({TOOL_CALLS_KEY: openai_shape}, Role.ASSISTANT)
    assert_as_reference({TOOL_CALL_ID_KEY: "c1", "k": {"v": 1}}, Role.TOOL)


@pytest.mark.parametrize("where", ["plain", "tool_calls"])
def test_nesting_is_checked_everywhere_even_in_tool_calls(where: str) -> None:
    deep: Any = 1
    for _ in range(MAX_METADATA_DEPTH):
        deep = {"x": deep}
    meta = {"x": deep} if where == "plain" else {TOOL_CALLS_KEY: [{"id": "c", "name": "f", "arguments": deep}]}
    with pytest.raises(InvalidMessage, match="nested more than"):
        checked(meta, Role.ASSISTANT)
    ok: Any = [1]
    for _ in range(MAX_METADATA_DEPTH - 1):
        ok = {"x": ok}
    assert checked(ok).metadata == ok
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(InvalidMessage, match="nested more than"):
        checked({"loop": loop})


@pytest.mark.parametrize("meta", [{"k": float("nan")}, {"k": float("inf")}, {"k": object()}, {"k": {(1, 2): 1}},
                                  {"k": "a\ud800"}, {"\udfff": 1}, {"k": {1: "a", "b": 2}}, {"k": {2: "a", 10: "b"}},
                                  {"k": {"a": 1}.keys()}, {"k": b"bytes"}])
def test_odd_metadata_is_refused_or_kept_as_before(meta: dict[str, Any]) -> None:
    assert_as_reference(meta)


@settings(max_examples=200, deadline=None)
@given(meta=st.dictionaries(_texts, _json, max_size=4))
def test_the_payload_and_the_row_write_the_text_the_checks_made(meta: dict[str, Any]) -> None:
    try:
        event = checked(meta)
    except InvalidMessage:
        return
    generic = json.loads(codec.canonical_json(codec.CONVERTER.unstructure(event)))
    assert json.loads(codec.encode_payload(event)) == generic
    assert codec.encode_payload(event) == codec.canonical_json(codec.CONVERTER.unstructure(event))
    assert message_row(1, event)[10] == codec.canonical_json(dict(event.metadata))
    if isinstance(event.metadata, CheckedMetadata):
        assert event.metadata.json in codec.encode_payload(event)


def test_checked_metadata_is_a_plain_copy_of_what_the_host_gave() -> None:
    inner = {"b": [1, 2]}
    host = {"a": inner, "t": (1, "x")}
    event = checked(host)
    assert isinstance(event.metadata, CheckedMetadata)
    inner["b"].append(3)
    assert event.metadata == {"a": {"b": [1, 2]}, "t": [1, "x"]}
    assert event.metadata.json == '{"a":{"b":[1,2]},"t":[1,"x"]}'
