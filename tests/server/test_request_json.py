"""A request's JSON is read as the standard library reads it, each object's pairs checked: the
fast reading (orjson, ADR-0089) is taken only when it surely agrees, a repeated key included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.entrypoints.server.errors import HttpRefusal
from fermix_memory.entrypoints.server.requests import json_object


def _standard(data: bytes) -> Any:
    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in pairs}) != len(pairs):
            raise ValueError("repeated key")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise ValueError(name)

    return json.loads(data.decode("utf-8"), object_pairs_hook=no_repeats, parse_constant=no_constant)


def _read(data: bytes) -> tuple[str, Any]:
    try:
        value = json_object(data, frozenset({"a", "b", "a:", "\"", ""}), ())
    except HttpRefusal as refused:
        return "refused", refused.code
    return "read", value


def _expected(data: bytes) -> tuple[str, Any]:
    try:
        value = _standard(data)
    except (ValueError, RecursionError):
        return "refused", "malformed_json"
    if not isinstance(value, dict):
        return "refused", "malformed_json"
    if any(key not in {"a", "b", "a:", "\"", ""} for key in value):
        return "refused", "unknown_field"
    return "read", value


@pytest.mark.parametrize("data", [
    b'{"a":1,"a":2}', b'{"a":{"b":1,"b":2}}', b'{"a":[{"b":1},{"b":1,"b":3}]}', b'{"a":"x:y","b":"\\":"}',
    b'{"a":"\\u003a","a":"\\u003a"}', b'{"\\u0061":1,"a":2}', b'{"a":NaN}', b'{"a":-Infinity}',
    b'{"a":123456789012345678901234567890}', b'{"a":1e999}', b'{"a":"\\ud800"}', b'\xef\xbb\xbf{"a":1}',
    b'{"a":"\xff"}', b'{"a":1,}', b'{"a" : 1 , "b" : [1, 2.5, {"a:": null}]}', b'{"":1,"":2}', b'[1]',
    b'{"a":' * 5000 + b'1' + b'}' * 5000,
])
def test_a_body_is_read_as_the_standard_library_reads_it(data: bytes) -> None:
    assert _read(data) == _expected(data)


_TOKENS = st.sampled_from([b"{", b"}", b"[", b"]", b'"a"', b'"b"', b'"a:"', b'"\\""', b'"\\u003a"', b":", b",",
                           b" ", b"1", b"2.5", b"123456789012345678901234", b"null", b"NaN", b'"a":', b'"a:":'])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_TOKENS, min_size=1, max_size=16))
def test_any_text_is_read_or_refused_as_the_standard_library_does(tokens: list[bytes]) -> None:
    data = b"".join(tokens)
    assert _read(data) == _expected(data)
