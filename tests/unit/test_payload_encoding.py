"""Payloads are encoded once, canonically, and times are written as ``isoformat`` writes them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.adapters.sql import codec
from fermix_memory.adapters.sql.codec import CONVERTER, encode_payload, isoformat
from fermix_memory.domain.conversation_events import MessageAppended
from fermix_memory.domain.values import ConversationKey, Role, Trust
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


# A message's payload is written field by field (the most frequent payload): byte for byte the
# canonical JSON of its unstructured event, for any text, metadata, times and quoted owners.
_texts = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\\x00\x1f\u2028\ud800\U0001f600'), max_size=12)
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _texts,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
                     max_leaves=6)
_times = st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))]))


def _generic(event: MessageAppended) -> str:
    return json.dumps(CONVERTER.unstructure(event), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=150, deadline=None)
@given(agent=_texts, owner=_texts, sender=_texts, content=_texts, kind=_texts,
       metadata=st.dictionaries(_texts, _texts, max_size=4) | st.dictionaries(_texts, _json, max_size=3),
       chat=st.sampled_from(["c1", "chat \u00e9", "a%b:c"]), thread=st.sampled_from(["", "t:1", "\u2713"]),
       role=st.sampled_from(list(Role)), trust=st.sampled_from(list(Trust)),
       quoted=st.lists(_texts, max_size=3).map(tuple), at=_times, created=_times)
def test_a_message_payload_is_byte_for_byte_the_canonical_json_of_its_event(
        agent: str, owner: str, sender: str, content: str, kind: str, metadata: dict[str, Any], chat: str,
        thread: str, role: Role, trust: Trust, quoted: tuple[str, ...], at: datetime, created: datetime) -> None:
    event = MessageAppended(at=at, agent_id=agent, owner_id=owner, conversation=ConversationKey("slack", chat, thread),
                            sender=sender, role=role, message_kind=kind, content=content, metadata=metadata,
                            trust=trust, created_at=created, quoted_owners=quoted)
    assert encode_payload(event) == _generic(event)
    assert encode_payload(event) == _generic(event)  # the time's cache warm


def test_the_field_by_field_message_payload_knows_every_field_of_a_message() -> None:
    """A field added to messages would be left out of the field-by-field payload: it is used only
    while the fields are the ones it writes."""
    assert codec.MESSAGE_FIELDS_KNOWN


@given(metadata=st.dictionaries(_texts, _texts, max_size=4) | st.dictionaries(_texts, _json, max_size=3))
def test_a_message_row_keeps_the_canonical_json_of_its_metadata(metadata: dict[str, Any]) -> None:
    direct = codec.text_map_json(metadata)
    assert direct is None or direct == codec.canonical_json(metadata)
    assert (direct is None) == (not all(isinstance(v, str) for v in metadata.values()))


@settings(max_examples=100, deadline=None)
@given(at=_times, content=_texts, role=st.sampled_from(list(Role)), trust=st.sampled_from(list(Trust)))
def test_a_message_stamped_when_it_arrived_is_encoded_as_any_other(at: datetime, content: str, role: Role,
                                                                    trust: Trust) -> None:
    """A message without a time of its own has the event's time object as ``created_at`` (the
    payload then formats it once): the same text as the canonical JSON of the event."""
    event = MessageAppended(at=at, agent_id="a", owner_id="o", conversation=ConversationKey("slack", "c"),
                            sender="s", role=role, content=content, trust=trust, created_at=at)
    assert event.created_at is event.at
    assert encode_payload(event) == _generic(event)
    assert encode_payload(event) == _generic(event)  # the time's cache warm
