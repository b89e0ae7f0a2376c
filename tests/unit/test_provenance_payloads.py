"""The stored form of a provenance naming its source messages (schema 2 of the row events), and
the schema-1 payloads of logs written before it, which still decode."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from fermix_memory.adapters.sql.codec import decode_payload, encode_payload
from fermix_memory.domain import events as ev
from fermix_memory.domain.operations import AddOperation, sourced
from fermix_memory.domain.values import Category, ScopeType

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def added(provenance: ev.Provenance) -> ev.MemoryAdded:
    return ev.MemoryAdded(at=AT, agent_id="ada", owner_id="alice", scope_type=ScopeType.OWNER, scope_id="alice",
                          category=Category.GOAL, key="k", value="v", provenance=provenance)


def test_unset_source_ids_are_left_out_so_other_payloads_are_stored_as_before() -> None:
    plain = ev.Provenance(agent_id="ada", owner_id="alice", source_message_id=7)
    data = json.loads(encode_payload(added(plain)))
    assert "source_message_ids" not in data["provenance"] and "dropped_source_message_ids" not in data["provenance"]
    named = ev.Provenance(agent_id="ada", owner_id="alice", source_message_ids=(3, 7),
                          dropped_source_message_ids=(99,))
    payload = encode_payload(added(named))
    assert json.loads(payload)["provenance"]["source_message_ids"] == [3, 7]
    assert decode_payload("memory.added", 2, payload) == added(named)


def test_a_schema_1_row_event_decodes_without_source_ids() -> None:
    old = encode_payload(added(ev.Provenance(agent_id="ada", owner_id="alice", source_message_id=7)))
    for kind in ("memory.added",):
        event = decode_payload(kind, 1, old)
        assert event.provenance.source_message_ids is None and event.provenance.source_message_id == 7
    archived = ev.MemoryArchived(at=AT, memory_id=4, archived_by="x", reason="r",
                                 provenance=ev.Provenance(agent_id="ada", owner_id="alice"))
    assert decode_payload("memory.archived", 1, encode_payload(archived)) == archived


def test_ids_not_shown_are_dropped_and_the_newest_kept_is_the_source() -> None:
    base = ev.Provenance(agent_id="ada", owner_id="alice", source_message_id=50)
    op = AddOperation(category="goal", key="k", value="v", source_message_ids=(42, 9, 41, 8))
    p = sourced(base, op, frozenset({40, 41, 42}))
    assert (p.source_message_ids, p.source_message_id, p.dropped_source_message_ids) == ((41, 42), 42, (9, 8))
    none_kept = sourced(base, AddOperation(category="goal", key="k", value="v", source_message_ids=(9,)),
                        frozenset({40}))
    assert (none_kept.source_message_ids, none_kept.source_message_id) == (None, 50)
    assert sourced(base, AddOperation(category="goal", key="k", value="v"), frozenset({40})) is base
