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
    Endpoint("GET", "/v1/history/search", "search_history", "An owner's conversation history by words or"
             " meaning, with the replies to questions it finds", READS, _search,
             query={"agent_id": _IDENTIFIER, "owner_id": _IDENTIFIER, "q": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 0},
                    "mode": {"type": "string", "enum": ["keyword", "semantic", "hybrid"]}},
             result=RecallResult),
)
