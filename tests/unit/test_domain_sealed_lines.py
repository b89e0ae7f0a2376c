"""The lines of an encrypted export (ADR-0081), without any store or key: a sealed event line and
the header naming the keyring read back as written; a sealed line that is not what the format
says is refused; a plain reader refuses a sealed line."""

from __future__ import annotations

import json

import attrs
import pytest

from fermix_memory.domain.log_chain import Head, LoggedEvent
from fermix_memory.domain.log_lines import (
    BadEventLine,
    SealedPayload,
    header_line,
    parse_event,
    parse_event_line,
    parse_file_header,
    parse_header,
    position_context,
    sealed_event_line,
    sealing_context,
)

C, D, K = "c" * 64, "d" * 64, "0123456789abcdef" * 2
EVENT = LoggedEvent(position=7, stream="conversation/x", version=2, kind="k", schema=1, recorded_at="t",
                    payload='{"a":1}', payload_sha256=C, hash=D)
SEALED = SealedPayload((("ada", "alice", "k1"), ("ada", "bob", "k2")), ("aa" * 12, "bb" * 12), "AAEC")


def test_a_sealed_line_reads_back_without_its_payload() -> None:
    text = sealed_event_line(EVENT, SEALED)
    item = json.loads(text)
    assert item["payload"] is None and item["sealed"]["layers"] == [["ada", "alice", "k1"], ["ada", "bob", "k2"]]
    assert '{"a":1}' not in text
    e, sealed = parse_event_line(text)
    assert sealed == SEALED and e.payload is None and e.payload_sha256 == C and e.hash == D
    with pytest.raises(BadEventLine, match="sealed"):
        parse_event(text)


def test_the_header_names_its_keyring() -> None:
    text = header_line(Head(3, D), K)
    assert json.loads(text)["sealed"] == {"keyring": K}
    assert parse_file_header(text) == (Head(3, D), K) and parse_header(text) == Head(3, D)
    assert parse_file_header(header_line(Head(3, D))) == (Head(3, D), "")
    with pytest.raises(BadEventLine, match="keyring"):
        parse_file_header(text.replace(K, "not-hex"))


@pytest.mark.parametrize("sealed", [
    {"layers": [], "nonces": [], "data": "AA"},
    {"layers": [["ada", "alice"]], "nonces": ["aa"], "data": "AA"},
    {"layers": [["ada", "alice", "k"]], "nonces": [], "data": "AA"},
    {"layers": [["ada", "alice", "k"]], "nonces": [1], "data": "AA"},
    {"layers": [["ada", "alice", "k"]], "nonces": ["aa"], "data": 1},
    {"layers": [["ada", "alice", "k"]], "nonces": ["aa"]},
    {"layers": [["ada", "", "k"]], "nonces": ["aa"], "data": "AA"},
    "sealed",
])
def test_a_sealed_line_that_is_not_the_format_is_refused(sealed: object) -> None:
    item = json.loads(sealed_event_line(EVENT, SEALED))
    item["sealed"] = sealed
    with pytest.raises(BadEventLine, match="sealed"):
        parse_event_line(json.dumps(item))


def test_a_sealed_line_with_a_payload_or_marked_redacted_is_refused() -> None:
    item = json.loads(sealed_event_line(EVENT, SEALED))
    for change in ({"payload": "{}"}, {"redacted": True}):
        with pytest.raises(BadEventLine, match="unexpected"):
            parse_event_line(json.dumps({**item, **change}))


def test_each_layer_is_bound_to_its_keyring_position_digest_and_key() -> None:
    base = sealing_context(K, 7, C, ("ada", "alice", "k1"))
    others = [sealing_context("f" * 32, 7, C, ("ada", "alice", "k1")), sealing_context(K, 8, C, ("ada", "alice", "k1")),
              sealing_context(K, 7, D, ("ada", "alice", "k1")), sealing_context(K, 7, C, ("ada", "bob", "k1")),
              sealing_context(K, 7, C, ("ada", "alice", "k2"))]
    assert base not in others and len(set(others)) == len(others)


POSITIONED = SealedPayload((("ada", "alice", "k1"),), ("aa" * 12,), "AAEC", ("0123456789abcdef", "cc" * 12))


@pytest.mark.parametrize("sealed", [POSITIONED, SealedPayload((), (), "AAEC", ("0123456789abcdef", "cc" * 12))])
def test_a_payload_sealed_under_its_position_reads_back(sealed: SealedPayload) -> None:
    text = sealed_event_line(EVENT, sealed)
    assert json.loads(text)["sealed"]["position"] == {"tree": "0123456789abcdef", "nonce": "cc" * 12}
    assert parse_event_line(text) == (attrs.evolve(EVENT, payload=None), sealed)
    assert "position" not in json.loads(sealed_event_line(EVENT, SEALED))["sealed"]


@pytest.mark.parametrize("position", [None, {}, {"tree": "t"}, {"tree": "t", "nonce": ""}, {"tree": 1, "nonce": "a"},
                                      {"tree": "t", "nonce": "a", "more": "x"}, ["t", "a"]])
def test_a_position_layer_that_is_not_the_format_is_refused(position: object) -> None:
    item = json.loads(sealed_event_line(EVENT, POSITIONED))
    item["sealed"]["position"] = position
    with pytest.raises(BadEventLine, match="sealed"):
        parse_event_line(json.dumps(item))
    item["sealed"].update(layers=[], nonces=[])
    with pytest.raises(BadEventLine, match="sealed"):
        parse_event_line(json.dumps(item))


def test_a_sealed_line_with_a_key_the_format_does_not_know_is_refused() -> None:
    item = json.loads(sealed_event_line(EVENT, POSITIONED))
    item["sealed"]["tree"] = "t"
    with pytest.raises(BadEventLine, match="sealed"):
        parse_event_line(json.dumps(item))


def test_the_position_layer_is_bound_to_its_keyring_tree_position_and_digest() -> None:
    base = position_context(K, "t1", 7, C)
    others = [position_context("f" * 32, "t1", 7, C), position_context(K, "t2", 7, C), position_context(K, "t1", 8, C),
              position_context(K, "t1", 7, D), sealing_context(K, 7, C, ("t1", "", ""))]
    assert base not in others and len(set(others)) == len(others)
