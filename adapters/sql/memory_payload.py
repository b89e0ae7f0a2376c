"""The payload of a memory row's add, written field by field.

A row added (``memory.added``) is, after a message, the event written most often: every put of
a framework's store is one. Its canonical JSON (sorted keys, no spaces, text as it is) is the
same text, byte for byte, as :func:`~fermix_memory.adapters.sql.codec.encode_payload` makes of
the unstructured event, written here without building the dictionaries first. Only for the
usual shape: exactly these fields, no expiry, a provenance without named source messages, and
values of exactly the declared types (a confidence from 0 to 1); anything else is ``None`` and
takes the general path. Checked against the general path by
tests/unit/test_memory_payload.py over many events.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime

import attrs

from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.memory_events import MemoryAdded
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType, Trust

_ADDED_FIELDS = ("agent_id", "at", "category", "confidence", "expires_at", "key", "owner_id", "promote_target",
                 "provenance", "scope_id", "scope_type", "source_description", "source_name", "value")
_PROVENANCE_FIELDS = ("agent_id", "dropped_source_message_ids", "owner_id", "reason", "run_id", "session_id",
                      "source_id", "source_message_id", "source_message_ids", "source_type", "trust")
# The fast path holds only while the classes have exactly the fields it writes.
FIELDS_KNOWN = (tuple(sorted(f.name for f in attrs.fields(MemoryAdded))) == _ADDED_FIELDS
                and tuple(sorted(f.name for f in attrs.fields(Provenance))) == _PROVENANCE_FIELDS)
# The canonical encoder's own string encoder: text enums are written as their value.
_text = json.encoder.encode_basestring
_TEXT = {str}


# The last provenance written and its JSON: the events of one writer's run of puts share one
# provenance object (a frozen value), written once.
_last_provenance: tuple[object, str | None] = (None, None)


def _provenance(p: Provenance) -> str | None:
    """:func:`_provenance_json`, kept for the very same (immutable) object."""
    global _last_provenance
    last = _last_provenance
    if last[0] is p:
        return last[1]
    text = _provenance_json(p)
    _last_provenance = (p, text)
    return text


def _provenance_json(p: Provenance) -> str | None:
    if type(p) is not Provenance or p.source_message_ids is not None or p.dropped_source_message_ids != ():
        return None
    if set(map(type, (p.agent_id, p.owner_id, p.reason, p.run_id, p.session_id, p.source_id, p.source_type))) \
            != _TEXT or type(p.trust) is not Trust:
        return None
    source = p.source_message_id
    if source is None:
        source_json = "null"
    elif type(source) is int:
        source_json = int.__repr__(source)
    else:
        return None
    return (f'{{"agent_id":{_text(p.agent_id)},"owner_id":{_text(p.owner_id)},"reason":{_text(p.reason)},'
            f'"run_id":{_text(p.run_id)},"session_id":{_text(p.session_id)},"source_id":{_text(p.source_id)},'
            f'"source_message_id":{source_json},"source_type":{_text(p.source_type)},"trust":{_text(p.trust)}}}')


def memory_added_payload(e: MemoryAdded, isoformat: Callable[[datetime], str]) -> str | None:
    """The canonical payload of ``e`` (``isoformat``: how the codec writes its time), or ``None``
    when ``e`` is not of the usual shape (the general path then writes it)."""
    if not FIELDS_KNOWN or e.expires_at is not None or type(e.at) is not datetime:
        return None
    if not (type(e.agent_id) is str and type(e.owner_id) is str and type(e.scope_id) is str
            and type(e.key) is str and type(e.value) is str and type(e.source_name) is str
            and type(e.source_description) is str) \
            or type(e.scope_type) is not ScopeType or type(e.category) is not Category:
        return None
    confidence = e.confidence
    if type(confidence) is not float or not 0.0 <= confidence <= 1.0:
        return None
    target = e.promote_target
    if target is None:
        target_json = "null"
    elif type(target) is PromoteTarget:
        target_json = _text(target)
    else:
        return None
    provenance = _provenance(e.provenance)
    if provenance is None:
        return None
    return (f'{{"agent_id":{_text(e.agent_id)},"at":{_text(isoformat(e.at))},"category":{_text(e.category)},'
            f'"confidence":{float.__repr__(confidence)},"key":{_text(e.key)},"owner_id":{_text(e.owner_id)},'
            f'"promote_target":{target_json},"provenance":{provenance},"scope_id":{_text(e.scope_id)},'
            f'"scope_type":{_text(e.scope_type)},"source_description":{_text(e.source_description)},'
            f'"source_name":{_text(e.source_name)},"value":{_text(e.value)}}}')
