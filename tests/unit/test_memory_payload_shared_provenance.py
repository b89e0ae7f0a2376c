"""The events of a run of puts share one provenance object, whose JSON the field-by-field path
writes once: every event still gets the canonical JSON of its own provenance, whichever came
before it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import attrs

from fermix_memory.adapters.sql import memory_payload
from fermix_memory.adapters.sql.codec import CONVERTER, encode_payload, isoformat
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.memory_events import MemoryAdded
from fermix_memory.domain.values import Category, ScopeType, Trust


def _generic(event: MemoryAdded) -> str:
    return json.dumps(CONVERTER.unstructure(event), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_events_sharing_a_provenance_and_events_changing_it_each_get_their_own() -> None:
    shared = Provenance(agent_id="bench", owner_id="alice", source_type="langgraph")
    others = [shared, attrs.evolve(shared, owner_id="bob"), attrs.evolve(shared, trust=Trust.OPERATOR), shared,
              Provenance(agent_id="bench", owner_id="alice", source_type="langgraph"),
              attrs.evolve(shared, source_message_ids=(3,)), shared, attrs.evolve(shared, source_message_id=True),
              shared, shared]
    for i, provenance in enumerate(others):
        event = MemoryAdded(at=datetime(2026, 3, 1, 9, 0, i, tzinfo=UTC), agent_id="bench", owner_id="alice",
                            scope_type=ScopeType.CONVERSATION, scope_id="langgraph-store:memories.alice:",
                            category=Category.CONTEXT, key=f"k{i}", value=f"v{i}", provenance=provenance)
        fast = memory_payload.memory_added_payload(event, isoformat)
        usual = provenance.source_message_ids is None and type(provenance.source_message_id) is not bool
        assert (fast is not None) is usual
        assert fast is None or fast == _generic(event)
        assert encode_payload(event) == _generic(event)
