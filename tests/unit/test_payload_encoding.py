"""Payloads are encoded once, canonically, and times are written as ``isoformat`` writes them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from fermix_memory.adapters.sqlite.codec import CONVERTER, encode_payload, isoformat
from tests.contract.conftest import message


def test_the_payload_is_the_canonical_json_of_the_event() -> None:
    event = message("caf\u00e9 \u2713 \"quoted\"")
    expected = json.dumps(CONVERTER.unstructure(event), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert encode_payload(event) == expected


def test_isoformat_gives_each_moment_its_own_text() -> None:
    moment = datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC)
    same_instant_elsewhere = moment.astimezone(timezone(timedelta(hours=2)))
    assert moment == same_instant_elsewhere
    for value in (moment, moment, same_instant_elsewhere, moment.replace(microsecond=0), moment):
        assert isoformat(value) == value.isoformat()
