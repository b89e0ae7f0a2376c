"""A row's add is written field by field (``sql.memory_payload``): byte for byte the canonical JSON
of its unstructured event, for any text, scope, category, confidence, provenance and time; an
event of another shape (an expiry, named source messages, a value of another type) takes the
general path, which writes the same text it always did."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.adapters.sql import memory_payload
from fermix_memory.adapters.sql.codec import CONVERTER, decode_payload, encode_payload, isoformat
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.memory_events import MemoryAdded
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType, Trust

_texts = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\\x00\x1f\x7f\u2028\ud800\U0001f600'), max_size=12)
_times = st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))]))
# Mostly what admission lets through, and now and then what only the general path writes.
_confidences = st.floats(0.0, 1.0) | st.sampled_from([0.0, 1.0, 0.5, 1e-300, 1 / 3]) \
    | st.sampled_from([1, 0, True, float("nan"), float("inf"), 2.5, -0.0])
_sources = st.none() | st.integers(-(2**63), 2**63 - 1) | st.sampled_from([True, 7.0])
_provenances = st.builds(
    Provenance, agent_id=_texts, owner_id=_texts, trust=st.sampled_from(list(Trust)), source_type=_texts,
    source_id=_texts, session_id=_texts, run_id=_texts, source_message_id=_sources, reason=_texts,
    source_message_ids=st.none() | st.none() | st.lists(st.integers(1, 99), max_size=2).map(tuple),
    dropped_source_message_ids=st.just(()) | st.just(()) | st.lists(st.integers(1, 99), max_size=2).map(tuple))
_expiries = st.none() | st.none() | st.none() | _times


def _generic(event: MemoryAdded) -> str:
    return json.dumps(CONVERTER.unstructure(event), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=250, deadline=None)
@given(at=_times, agent=_texts, owner=_texts, scope_type=st.sampled_from(list(ScopeType)), scope_id=_texts,
       category=st.sampled_from(list(Category)), key=_texts, value=_texts, confidence=_confidences,
       target=st.none() | st.sampled_from(list(PromoteTarget)), name=_texts, description=_texts,
       provenance=_provenances, expires_at=_expiries)
def test_a_row_added_is_byte_for_byte_the_canonical_json_of_its_event(
        at: datetime, agent: str, owner: str, scope_type: ScopeType, scope_id: str, category: Category, key: str,
        value: str, confidence: Any, target: PromoteTarget | None, name: str, description: str,
        provenance: Provenance, expires_at: datetime | None) -> None:
    event = MemoryAdded(at=at, agent_id=agent, owner_id=owner, scope_type=scope_type, scope_id=scope_id,
                        category=category, key=key, value=value, confidence=confidence, promote_target=target,
                        source_name=name, source_description=description, provenance=provenance,
                        expires_at=expires_at)
    expected = _generic(event)
    assert encode_payload(event) == expected
    assert encode_payload(event) == expected  # the time's cache warm
    fast = memory_payload.memory_added_payload(event, isoformat)
    assert fast is None or fast == expected


def test_the_usual_row_takes_the_field_by_field_path_and_reads_back_as_it_was() -> None:
    event = MemoryAdded(at=datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC), agent_id="bench", owner_id="alice",
                        scope_type=ScopeType.CONVERSATION, scope_id="langgraph-store:alice.memories:",
                        category=Category.CONTEXT, key="k1", value='{"key":"k1","value":{"text":"caf\u00e9 \\"x\\""}}',
                        provenance=Provenance(agent_id="bench", owner_id="alice", source_type="langgraph"))
    fast = memory_payload.memory_added_payload(event, isoformat)
    assert fast is not None and fast == _generic(event)
    assert decode_payload(MemoryAdded.kind, MemoryAdded.schema, fast) == event


def test_other_shapes_are_left_to_the_general_path() -> None:
    base = MemoryAdded(at=datetime(2026, 3, 1, tzinfo=UTC), agent_id="a", owner_id="o", scope_type=ScopeType.OWNER,
                       scope_id="o", category=Category.PREFERENCE, key="k", value="v",
                       provenance=Provenance(agent_id="a", owner_id="o"))
    assert memory_payload.memory_added_payload(base, isoformat) is not None
    for changed in (attrs.evolve(base, expires_at=datetime(2027, 1, 1, tzinfo=UTC)), attrs.evolve(base, confidence=1),
                    attrs.evolve(base, confidence=float("nan")),
                    attrs.evolve(base, provenance=attrs.evolve(base.provenance, source_message_ids=(3,))),
                    attrs.evolve(base, provenance=attrs.evolve(base.provenance, source_message_id=True))):
        assert memory_payload.memory_added_payload(changed, isoformat) is None
        assert encode_payload(changed) == _generic(changed)


def test_the_field_by_field_payload_knows_every_field_of_a_row_added() -> None:
    """A field added to the event or its provenance would be left out: the fast path is used only
    while the fields are the ones it writes."""
    assert memory_payload.FIELDS_KNOWN
