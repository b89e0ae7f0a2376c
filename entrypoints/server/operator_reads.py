"""The operator's reads beyond the rows and files (ADR-0073): the event log page by page and a
search over an owner's conversation history, for reader and operator tokens."""

from __future__ import annotations

from typing import Any

from fermix_memory.adapters.sql.codec import CONVERTER
from fermix_memory.application.query_ports import OwnerSummary
from fermix_memory.application.recall import RecallResult
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.entrypoints.server.auth import READS
from fermix_memory.entrypoints.server.endpoints import Call, Endpoint
from fermix_memory.entrypoints.server.schema import Schema

LOG_PAGE = 100  # entries of one log page when the request says no limit
LOG_PAGE_MAX = 1_000
_IDENTIFIER: Schema = {"type": "string", "minLength": 1, "maxLength": 256}
_LOG_ENTRY: Schema = {
    "type": "object", "required": ["position", "stream", "kind", "recorded_at", "payload_sha256", "redacted"],
    "properties": {"position": {"type": "integer"}, "stream": {"type": "string"}, "kind": {"type": "string"},
                   "recorded_at": {"type": "string"}, "payload_sha256": {"type": "string"},
                   "redacted": {"type": "boolean"},
                   "event": {"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}]}},
}


async def _log(call: Call) -> Any:
    query = dict(call.query)
    limit = query.pop("limit", LOG_PAGE)
    if not 1 <= limit <= LOG_PAGE_MAX:
        raise InvalidArgument(f"limit must be from 1 to {LOG_PAGE_MAX}")
    entries: list[dict[str, Any]] = []
    found = call.memory.log_entries(**query)
    try:
        async for entry in found:
            entries.append({"position": entry.position, "stream": entry.stream, "kind": entry.kind,
                            "recorded_at": entry.recorded_at, "payload_sha256": entry.payload_sha256,
                            "redacted": entry.event is None, "event": CONVERTER.unstructure(entry.event)})
            if len(entries) == limit:
                break
    finally:
        await found.aclose()  # type: ignore[attr-defined]
    return {"entries": entries, "next_after": entries[-1]["position"] if len(entries) == limit else None}


async def _search(call: Call) -> Any:
    query = dict(call.query)
    return await call.memory.recall(query.pop("q", ""), source="history", scope="all", **query)


async def _owners(call: Call) -> Any:
    return await call.memory.owners(**call.query)


_ERASED_ROW: Schema = {
    "type": "object", "required": ["memory_id", "agent_id", "owner_id", "recorded_at", "erased_at", "erased_by"],
    "properties": {"memory_id": {"type": "integer"}, "agent_id": {"type": "string"}, "owner_id": {"type": "string"},
                   "recorded_at": {"type": "string"}, "erased_at": {"type": ["string", "null"]},
                   "erased_by": {"type": "string"}, "record": {"type": ["integer", "null"]},
                   "record_kind": {"type": "string"}, "source_type": {"type": "string"},
                   "source_id": {"type": "string"}, "receipt": {"type": ["integer", "null"]}},
}


async def _erased(call: Call) -> Any:
    if "as_of" not in call.query:
        raise InvalidArgument("as_of is required: the moment the erased rows stood at")
    rows = await call.memory.erased_memories(**call.query)
    return [{**CONVERTER.unstructure(r), "erased_by": r.erased_by} for r in rows]


OPERATOR_READS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/v1/owners", "owners", "Every agent and owner holding memory rows, with how many are live"
             " and archived", READS, _owners, query={"agent_id": _IDENTIFIER}, result=list[OwnerSummary]),
    Endpoint("GET", "/v1/events/log", "log_entries", "The event log in order, a page at a time: each entry's"
             " position, stream, kind, time, digest, and its event unless redacted", READS, _log,
             query={"after": {"type": "integer", "minimum": 0}, "kind": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": LOG_PAGE_MAX}},
             result={"type": "object", "required": ["entries", "next_after"],
                     "properties": {"entries": {"type": "array", "items": _LOG_ENTRY},
                                    "next_after": {"type": ["integer", "null"]}}}),
    Endpoint("GET", "/v1/memories-erased", "erased_memories", "The rows that stood at a moment and were erased"
             " since: ids, times, by what, receipts; never what they said (ADR-0083)", READS, _erased,
             query={"agent_id": _IDENTIFIER, "owner_id": _IDENTIFIER,
                    "as_of": {"type": "string", "format": "date-time",
                              "description": "ISO 8601 with a time zone: the moment the rows stood at"}},
             result={"type": "array", "items": _ERASED_ROW}),
    Endpoint("GET", "/v1/history/search", "search_history", "An owner's conversation history by words or"
             " meaning, with the replies to questions it finds", READS, _search,
             query={"agent_id": _IDENTIFIER, "owner_id": _IDENTIFIER, "q": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 0},
                    "mode": {"type": "string", "enum": ["keyword", "semantic", "hybrid"]}},
             result=RecallResult),
)
