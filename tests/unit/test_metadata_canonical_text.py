"""The canonical text of checked metadata is the standard encoder's, byte for byte, whichever
encoder wrote it: values orjson writes natively but the standard encoder refuses (an enum member,
a UUID, a moment, a dataclass) are refused, and those it writes otherwise (a float's exponent, an
integer past 64 bits) are written as the standard encoder writes them."""

from __future__ import annotations

import dataclasses
import enum
import json
import uuid
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

import pytest

from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.message_input import InvalidMessage, build_message_event
from fermix_memory.domain.message_metadata import CheckedMetadata

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Colour(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


class Mood(enum.StrEnum):
    CALM = "calm"


class Tag(str):
    pass


class Count(int):
    pass


@dataclasses.dataclass
class Point:
    x: int


def checked(metadata: Any) -> Any:
    return build_message_event(AppendMessage(agent_id="ada", owner_id="alice", conversation=("tg", "1"), role="user",
                                             content="hi", metadata=metadata), AT).metadata


@pytest.mark.parametrize("value", [
    1.5, 1e16, 1e-7, -0.0, 123456789012345680.0, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30, True, None,
    (1, "x"), [1.0, {"b": 2e20}], OrderedDict([("b", 1), ("a", 2)]), Size.BIG, Mood.CALM, Tag("t"), Count(7),
    {"z": 1, "a": {"é": "\x01\x7f\u2028", "A": "😀"}}, "\\\"",
])
def test_kept_values_are_written_as_the_standard_encoder_writes_them(value: Any) -> None:
    meta = {"k": value}
    got = checked(meta)
    assert isinstance(got, CheckedMetadata)
    assert got.json == CANONICAL.encode(meta)
    assert got == json.loads(CANONICAL.encode(meta))


@pytest.mark.parametrize("value", [
    Colour.RED, uuid.UUID(int=7), datetime(2026, 1, 1, tzinfo=UTC), Point(1), float("nan"), float("-inf"),
    {"a": [Colour.RED]}, "a\ud800",
])
def test_values_the_standard_encoder_refuses_are_refused(value: Any) -> None:
    with pytest.raises(InvalidMessage, match="JSON-serialisable"):
        checked({"k": value})


def test_the_kept_copy_shares_nothing_with_the_hosts_value() -> None:
    host = {"item": {"content": [{"type": "output_text", "annotations": []}]}}
    got = checked(host)
    host["item"]["content"][0]["annotations"].append("later")
    assert got == {"item": {"content": [{"type": "output_text", "annotations": []}]}}
