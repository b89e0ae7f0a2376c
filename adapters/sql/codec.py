"""The one cattrs converter for event payloads, and payload upcasting.

Payloads are canonical JSON (sorted keys, no spaces, UTF-8) so that their SHA-256 digest is
stable. The event's ``kind`` and ``schema`` live in their own columns, not in the payload.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import attrs
import cattrs
import cattrs.gen

from fermix_memory.adapters.sql.memory_payload import memory_added_payload
from fermix_memory.application.errors import IntegrityError
from fermix_memory.domain.conversation_events import MessageAppended
from fermix_memory.domain.event_base import DomainEvent, Provenance
from fermix_memory.domain.events import EVENTS_BY_KIND
from fermix_memory.domain.memory_events import MemoryAdded, MemoryReplaced
from fermix_memory.domain.message_metadata import CheckedMetadata

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

# (kind, from_schema) -> function giving the payload of schema from_schema + 1.
UPCASTERS: dict[tuple[str, int], Upcaster] = {
    # Schema-1 erasure records gave only how many events they redacted, not which.
    ("owner.forgotten", 1): lambda data: {**data, "redacted_positions": None, "conversations": []},
    # Schema 2 of the row events may name the exact source messages in their provenance
    # (ADR-0034); a schema-1 payload has none, which the fields' defaults already say.
    ("memory.added", 1): lambda data: data,
    ("memory.replaced", 1): lambda data: data,
    ("memory.archived", 1): lambda data: data,
    # Schema 3 of a row's add and replace may give the row's own expiry (ADR-0082); a schema-2
    # payload has none, which the field's default already says.
    ("memory.added", 2): lambda data: data,
    ("memory.replaced", 2): lambda data: data,
}

# Provenance fields left out of a payload while unset, so that events without them are stored
# byte for byte as before they existed.
_OMITTED_WHEN_UNSET = {"source_message_ids": None, "dropped_source_message_ids": ()}


# The canonical payload encoder, made once (``json.dumps`` with options builds one per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# The last datetime formatted and its text: an event's time is written into its payload, its log
# row and its projection, the same object each time (immutable, held here, so never reused).
_last_formatted: tuple[datetime | None, str] = (None, "")


def isoformat(moment: datetime) -> str:
    """``moment.isoformat()``, not formatted again when the same object was formatted last."""
    global _last_formatted
    last = _last_formatted
    if last[0] is moment:
        return last[1]
    text = moment.isoformat()
    _last_formatted = (moment, text)
    return text


def canonical_json(data: Any) -> str:
    """Sorted keys, no spaces, UTF-8 text as it is: what payload digests are taken of."""
    return _CANONICAL.encode(data)


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_unstructure_hook(datetime, isoformat)
    conv.register_structure_hook(datetime, lambda value, _: datetime.fromisoformat(value))
    provenance = cattrs.gen.make_dict_unstructure_fn(Provenance, conv)

    def unstructure_provenance(p: Provenance) -> dict[str, Any]:
        data = provenance(p)
        for name, unset in _OMITTED_WHEN_UNSET.items():
            if getattr(p, name) == unset:
                del data[name]
        return data

    conv.register_unstructure_hook(Provenance, unstructure_provenance)
    # A row's expiry is left out while it has none: such an event is stored as before it existed.
    for cls in (MemoryAdded, MemoryReplaced):
        conv.register_unstructure_hook(cls, cattrs.gen.make_dict_unstructure_fn(
            cls, conv, expires_at=cattrs.gen.override(omit_if_default=True)))
    return conv


CONVERTER = _make_converter()


def encode_payload(event: DomainEvent) -> str:
    if type(event) is MessageAppended and MESSAGE_FIELDS_KNOWN:
        return _message_payload(event)
    if type(event) is MemoryAdded and (text := memory_added_payload(event, isoformat)) is not None:
        return text  # the same text, written field by field (``sql.memory_payload``)
    return _CANONICAL.encode(CONVERTER.unstructure(event))


# The most frequent payload, a message, written field by field: the same text, byte for byte, as
# the canonical JSON of its unstructured event (the string encoder is the one the canonical
# encoder uses), in a fraction of the time. Only while the event has exactly these fields, and
# only for metadata whose canonical JSON is at hand: the text its checks made (``CheckedMetadata``:
# every message checked on its way in) or a mapping of text to text, written directly (an event
# read back from the log, an import key alone); other metadata takes the general path, which is
# what the converter's hooks would make of it.
_MESSAGE_FIELDS = ("agent_id", "at", "content", "conversation", "created_at", "message_kind", "metadata",
                   "owner_id", "quoted_owners", "role", "sender", "trust")
MESSAGE_FIELDS_KNOWN = tuple(sorted(f.name for f in attrs.fields(MessageAppended))) == _MESSAGE_FIELDS
_text = json.encoder.encode_basestring


def text_map_json(mapping: dict[Any, Any]) -> str | None:
    """The canonical JSON of a mapping of text to text (a message's usual metadata), written
    directly; ``None`` for any other mapping."""
    if len(mapping) == 1:
        [(key, value)] = mapping.items()
        return f"{{{_text(key)}:{_text(value)}}}" if type(key) is str and type(value) is str else None
    if not mapping:
        return "{}"
    if all(type(k) is str and type(v) is str for k, v in mapping.items()):
        return "{" + ",".join(f"{_text(k)}:{_text(v)}" for k, v in sorted(mapping.items())) + "}"
    return None


def metadata_json(metadata: dict[Any, Any]) -> str:
    """The canonical JSON of a message's metadata (what its row keeps): the text its checks made
    (:class:`CheckedMetadata`), else written directly for text values, else encoded."""
    if type(metadata) is CheckedMetadata:
        return metadata.json
    return text_map_json(metadata) or _CANONICAL.encode(metadata)


def _message_payload(e: MessageAppended) -> str:
    meta = e.metadata.json if type(e.metadata) is CheckedMetadata else text_map_json(e.metadata)
    if meta is None:
        return _CANONICAL.encode(CONVERTER.unstructure(e))
    c = e.conversation
    owners = ",".join(map(_text, e.quoted_owners)) if e.quoted_owners else ""
    # The event's time through the one-entry cache (its log row writes it next, and the events
    # of one decision share it); the message's own time too when it is that same object (a
    # message stamped when it arrived), else directly (different for each, e.g. an import's).
    at = isoformat(e.at)
    created = at if e.created_at is e.at else e.created_at.isoformat()
    # Role and trust are text enums: the string encoder writes a member as its value.
    return (f'{{"agent_id":{_text(e.agent_id)},"at":{_text(at)},"content":{_text(e.content)},'
            f'"conversation":{{"channel":{_text(c.channel)},"chat_id":{_text(c.chat_id)},'
            f'"thread_scope":{_text(c.thread_scope)}}},"created_at":{_text(created)},'
            f'"message_kind":{_text(e.message_kind)},"metadata":{meta},"owner_id":{_text(e.owner_id)},'
            f'"quoted_owners":[{owners}],"role":{_text(e.role)},"sender":{_text(e.sender)},'
            f'"trust":{_text(e.trust)}}}')


def encoded_text(text: str) -> str:
    """How a string value appears inside an encoded payload (quotes included)."""
    return json.dumps(text, ensure_ascii=False)


def decode_payload(kind: str, schema: int, payload: str) -> DomainEvent:
    """Structure a stored payload into its event class, upcasting older schemas first."""
    cls = EVENTS_BY_KIND.get(kind)
    if cls is None:
        raise IntegrityError(f"unknown event kind {kind!r}")
    data = json.loads(payload)
    while schema < cls.schema:
        upcast = UPCASTERS.get((kind, schema))
        if upcast is None:
            raise IntegrityError(f"no upcaster for {kind} schema {schema}")
        data = upcast(data)
        schema += 1
    if schema > cls.schema:
        raise IntegrityError(f"{kind} schema {schema} is newer than this code ({cls.schema})")
    try:
        return CONVERTER.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        raise IntegrityError(f"payload of {kind} does not match its schema: {exc}") from exc
