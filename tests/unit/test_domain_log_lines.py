"""The event file format, line by line and without any store: the exact bytes written and every
line that is refused. Expected lines are written out as literals."""

from __future__ import annotations

import json

import attrs
import pytest

from fermix_memory.domain.log_chain import GENESIS_HASH, Head, LoggedEvent
from fermix_memory.domain.log_lines import (
    FORMAT,
    FORMAT_VERSION,
    BadEventLine,
    event_line,
    header_line,
    parse_event,
    parse_header,
)

A, B, C, D = "a" * 64, "b" * 64, "c" * 64, "d" * 64
EVENT = LoggedEvent(position=1, stream="conversation/é", version=1, kind="k", schema=1, recorded_at="t",
                    payload='{"a":"é"}', payload_sha256=C, hash=D)
EVENT_LINE = ('{"at":"t","hash":"' + D + '","kind":"k","payload":"{\\"a\\":\\"é\\"}","payload_sha256":"' + C
              + '","position":1,"schema":1,"stream":"conversation/é","version":1}\n')
REDACTED_LINE = ('{"at":"t","hash":"' + D + '","kind":"k","payload_sha256":"' + C
                 + '","position":1,"redacted":true,"schema":1,"stream":"conversation/é","version":1}\n')


def header(**changes: object) -> str:
    item: dict[str, object] = {"format": "fermix-events", "format_version": 1, "head": {"position": 3, "hash": A}}
    item.update(changes)
    return json.dumps(item)


def line(**changes: object) -> str:
    item = json.loads(EVENT_LINE)
    item.update(changes)
    return json.dumps({k: v for k, v in item.items() if v is not ...})


# --- writing ------------------------------------------------------------------------------------


def test_the_format_is_named_and_numbered() -> None:
    assert (FORMAT, FORMAT_VERSION) == ("fermix-events", 1)


def test_a_header_is_sorted_compact_json_on_one_line() -> None:
    assert header_line(Head(3, A)) == (
        '{"format":"fermix-events","format_version":1,"head":{"hash":"' + A + '","position":3}}\n')
    assert header_line(Head(5, B, (5, 0))) == (
        '{"chains":[5,0],"format":"fermix-events","format_version":1,"head":{"hash":"' + B + '","position":5}}\n')


def test_an_event_line_keeps_its_payload_verbatim_and_non_ascii_unescaped() -> None:
    assert event_line(EVENT) == EVENT_LINE


def test_a_redacted_event_line_says_so_instead_of_a_payload() -> None:
    assert event_line(attrs.evolve(EVENT, payload=None)) == REDACTED_LINE


# --- reading headers ----------------------------------------------------------------------------


def test_a_header_reads_back_as_the_head_it_names() -> None:
    assert parse_header(header_line(Head(3, A))) == Head(3, A)
    assert parse_header(header_line(Head(0, GENESIS_HASH))) == Head(0, GENESIS_HASH), "an empty log"
    assert parse_header(header_line(Head(5, B, (5, 0)))) == Head(5, B, (5, 0))


def test_a_two_chain_header_whose_head_is_not_its_chains_last_is_refused() -> None:
    with pytest.raises(BadEventLine, match=r"the head position 4 is not the last of its chains' \(5\)"):
        parse_header(header(head={"position": 4, "hash": A}, chains=[5, 0]))
    with pytest.raises(BadEventLine, match=r"the head position 6 is not the last of its chains' \(5\)"):
        parse_header(header(head={"position": 6, "hash": A}, chains=[0, 5]))


def test_a_header_holds_2_to_1024_chains() -> None:
    assert parse_header(header(chains=[3, 0])).chains == (3, 0)
    assert parse_header(header(chains=[3] + [0] * 1023)).chains == (3,) + (0,) * 1023
    for chains in ([3], [], [3] + [0] * 1024, "3,0", {"0": 3}):
        with pytest.raises(BadEventLine, match="chains is a list of 2 to 1024 positions"):
            parse_header(header(chains=chains))


@pytest.mark.parametrize("position", [-1, True, 1.0, "3", None])
def test_a_chain_position_is_a_whole_number_from_0(position: object) -> None:
    with pytest.raises(BadEventLine, match="chain position must be a whole number from 0"):
        parse_header(header(chains=[3, position]))


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON"),
    ("[]", "not a JSON object"),
    (header(format="other"), "not an event file"),
    (header(format=None), "not an event file"),
    (header(format_version=2), "format version 2 is not 1"),
    (header(head=[3, A]), "the header holds format"),
    (header(head={"position": 3}), "the header holds format"),
    (header(head={"position": 3, "hash": A, "x": 1}), "the header holds format"),
    (header(extra=1), "the header holds format"),
    (header(head={"position": -1, "hash": A}), "head position must be a whole number from 0"),
    (header(head={"position": False, "hash": A}), "head position must be a whole number from 0"),
    (header(head={"position": 3, "hash": "A" * 64}), "head hash must be 64 lower-case hex digits"),
    (header(head={"position": 3, "hash": "a" * 63}), "head hash must be 64 lower-case hex digits"),
    (header(head={"position": 3, "hash": "a" * 65}), "head hash must be 64 lower-case hex digits"),
    (header(head={"position": 3, "hash": "g" * 64}), "head hash must be 64 lower-case hex digits"),
    (header(head={"position": 3, "hash": 7}), "head hash must be text"),
])
def test_a_bad_header_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(BadEventLine, match=message):
        parse_header(text)


def test_a_header_without_its_format_keys_is_refused() -> None:
    for missing in ("format", "format_version"):
        item = json.loads(header())
        del item[missing]
        with pytest.raises(BadEventLine):
            parse_header(json.dumps(item))
    with pytest.raises(BadEventLine, match="the header holds format"):
        parse_header(json.dumps({"format": "fermix-events", "format_version": 1}))


def test_a_hash_of_any_hex_digits_is_read() -> None:
    hex_hash = "0123456789abcdef" * 4
    assert parse_header(header(head={"position": 3, "hash": hex_hash})) == Head(3, hex_hash)


# --- reading events -----------------------------------------------------------------------------


def test_an_event_line_reads_back_as_the_event() -> None:
    assert parse_event(EVENT_LINE) == EVENT
    assert parse_event(REDACTED_LINE) == attrs.evolve(EVENT, payload=None)


def test_an_event_line_names_the_keys_it_misses_and_those_it_should_not_have() -> None:
    with pytest.raises(BadEventLine, match=r"; missing payload$"):
        parse_event(line(payload=...))
    with pytest.raises(BadEventLine, match=r"; missing at, hash; unexpected extra$"):
        parse_event(line(at=..., hash=..., extra=1))
    with pytest.raises(BadEventLine, match=r"; unexpected redacted$"):
        parse_event(line(redacted=False))
    with pytest.raises(BadEventLine, match=r"; unexpected payload$"):
        parse_event(line(redacted=True))
    with pytest.raises(BadEventLine, match=r"^an event line holds at, hash, kind, payload_sha256, position, schema,"
                                           r" stream, version and payload \(or redacted: true\); missing payload$"):
        parse_event(line(payload=...))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("position", 0, "position must be a whole number from 1"),
    ("version", 0, "version must be a whole number from 1"),
    ("schema", 0, "schema must be a whole number from 1"),
    ("position", True, "position must be a whole number from 1"),
    ("stream", 1, "stream must be text"),
    ("kind", None, "kind must be text"),
    ("at", 1, "at must be text"),
    ("payload", {"a": 1}, "payload must be text"),
    ("payload_sha256", "C" * 64, "payload_sha256 must be 64 lower-case hex digits"),
    ("hash", "x", "hash must be 64 lower-case hex digits"),
])
def test_a_bad_event_field_is_refused_with_the_reason(field: str, value: object, message: str) -> None:
    with pytest.raises(BadEventLine, match=message):
        parse_event(line(**{field: value}))


def test_the_smallest_numbers_an_event_line_may_hold_are_1() -> None:
    assert parse_event(line(position=1, version=1, schema=1)) == EVENT
    assert parse_event(line(position=2, version=3, schema=4)) == attrs.evolve(EVENT, position=2, version=3, schema=4)
