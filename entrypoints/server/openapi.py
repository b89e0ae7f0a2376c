"""The OpenAPI 3.1 document of ``/v1``, built from the endpoints and the Python API's types
(ADR-0073). The server checks each body against the same document it serves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fermix_memory.entrypoints.server.auth import READS, TURNS
from fermix_memory.entrypoints.server.catalog import OPERATIONS
from fermix_memory.entrypoints.server.endpoints import Endpoint
from fermix_memory.entrypoints.server.schema import REF, Schema, Schemas

API_VERSION = "1"
_ERROR: Schema = {
    "type": "object", "additionalProperties": False, "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["code", "message"], "additionalProperties": False,
                             "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}},
}
_WHO = {TURNS: "host or operator token", READS: "reader or operator token"}
# A body's agent: a host token's own when not given (operator tokens name it).
_FILLED = ("agent_id",)


def body_name(endpoint: Endpoint) -> str:
    """The component a body's schema is kept under: the command's name, else the operation's."""
    if endpoint.body is not None:
        return f"{endpoint.body.__name__}Body"
    return "".join(part.title() for part in endpoint.name.split("_")) + "Body"


def body_schema(schemas: Schemas, endpoint: Endpoint) -> Schema:
    if endpoint.body is None:
        schema: Schema = {"type": "object", "additionalProperties": False, "properties": dict(endpoint.extra)}
        if endpoint.needs:
            schema["required"] = list(endpoint.needs)
        return schema
    return schemas.body(endpoint.body, optional=_FILLED, extra=endpoint.extra)


def _result(schemas: Schemas, result: Any) -> Schema:
    if isinstance(result, dict):
        resolved: Schema = _resolved(schemas, result)
        return resolved
    return schemas.of(result)


def _resolved(schemas: Schemas, schema: Any) -> Any:
    """``schema`` with any Python type inside it (``anyOf: [CommandResult, ...]``) as its schema."""
    if isinstance(schema, dict):
        return {k: _resolved(schemas, v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_resolved(schemas, v) for v in schema]
    if isinstance(schema, type):
        return schemas.of(schema)
    return schema


def _parameters(endpoint: Endpoint) -> list[Schema]:
    names = [part[1:-1] for part in endpoint.path.split("/") if part.startswith("{")]
    found: list[Schema] = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names]
    found += [{"name": n, "in": "query", "required": False, "schema": s} for n, s in endpoint.query.items()]
    return found


def _operation(schemas: Schemas, endpoint: Endpoint) -> Schema:
    operation: Schema = {
        "operationId": endpoint.name, "summary": endpoint.summary, "tags": [endpoint.reach],
        "description": f"Needs a {_WHO[endpoint.reach]}.",
        "responses": {
            str(endpoint.status): {"description": "done",
                                   "content": {"application/json": {"schema": _result(schemas, endpoint.result)}}},
            "default": {"description": "a typed error",
                        "content": {"application/json": {"schema": {"$ref": REF + "Error"}}}},
        },
    }
    parameters = _parameters(endpoint)
    if parameters:
        operation["parameters"] = parameters
    if endpoint.method == "POST":
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": REF + body_name(endpoint)}}}}
    return operation


def build_document(endpoints: Iterable[Endpoint] = OPERATIONS) -> dict[str, Any]:
    """The whole document (plain JSON data, keys in a stable order)."""
    schemas = Schemas()
    paths: dict[str, dict[str, Schema]] = {}
    bodies: dict[str, Schema] = {}
    for endpoint in endpoints:
        if endpoint.method == "POST":
            bodies[body_name(endpoint)] = body_schema(schemas, endpoint)
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(schemas, endpoint)
    components = {**schemas.components, **bodies, "Error": _ERROR}
    return {
        "openapi": "3.1.0",
        "info": {"title": "fermix-memory", "version": API_VERSION,
                 "description": "The memory server's HTTP API (ADR-0073): every turn operation and the"
                                " operator's reads. Bodies take the keyword arguments of the Python call"
                                " of the same name."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {"schemas": dict(sorted(components.items())),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def body_fields(document: Mapping[str, Any], endpoint: Endpoint) -> tuple[frozenset[str], tuple[str, ...]]:
    """The keys a body of ``endpoint`` may have, and those it must (the agent aside)."""
    schema = document["components"]["schemas"][body_name(endpoint)]
    required = tuple(n for n in schema.get("required", ()) if n not in _FILLED)
    return frozenset(schema["properties"]), required
