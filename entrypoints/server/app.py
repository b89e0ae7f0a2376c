"""The ASGI application of ``fermix serve`` (ADR-0073): ``/v1`` and its OpenAPI document."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.server.auth import Tokens
from fermix_memory.entrypoints.server.catalog import OPERATIONS
from fermix_memory.entrypoints.server.endpoints import Call, Endpoint
from fermix_memory.entrypoints.server.errors import error_body, error_response
from fermix_memory.entrypoints.server.openapi import body_fields, build_document
from fermix_memory.entrypoints.server.requests import (
    MAX_BODY_BYTES,
    body_bytes,
    json_object,
    json_response,
    query_values,
)

OPENAPI_PATH = "/v1/openapi.json"
# What a mounted application (the MCP endpoint) answers: its endpoint and its OAuth metadata.
MOUNTED_PATHS = ("/mcp", "/.well-known/")


def _route(endpoint: Endpoint, memory: AsyncMemorySystem, tokens: Tokens, document: dict[str, Any],
           max_body: int) -> Route:
    allowed, required = body_fields(document, endpoint) if endpoint.method == "POST" else (frozenset(), ())

    async def serve(request: Request) -> Response:
        try:
            caller = tokens.caller(request.headers.get("authorization"))
            caller.require(endpoint.reach)
            body = {}
            if endpoint.method == "POST":
                body = json_object(await body_bytes(request, max_body), allowed, required)
            query = query_values(request.query_params, endpoint.query)
            result = await endpoint.handler(Call(memory, caller, body, query, request.path_params))
            return json_response(result, endpoint.status)
        except Exception as exc:  # every failure is one typed body (errors.py)
            return error_response(exc)

    return Route(endpoint.path, serve, methods=[endpoint.method], name=endpoint.name)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    detail = exc.detail if isinstance(exc, HTTPException) else "the server failed to answer this request"
    return error_body(status, code, str(detail))


def _within(prefixes: tuple[str, ...], app: Starlette) -> ASGIApp:
    """``app`` for the paths under ``prefixes``; any other is this server's typed 404."""

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "lifespan" or path == "/mcp" or path.startswith(prefixes):
            await app(scope, receive, send)
            return
        response = error_body(404, "not_found", "Not Found")
        await response(scope, receive, send)

    return route


def build_app(memory: AsyncMemorySystem, tokens: Tokens, *, max_body: int = MAX_BODY_BYTES,
              mounted: Sequence[Starlette] = (), console: Sequence[BaseRoute] = ()) -> Starlette:
    """The application serving ``memory`` to the holders of ``tokens``; ``console``: the operator
    console's routes (at ``/``); ``mounted`` applications (the MCP endpoint at ``/mcp``) answer
    the paths these routes do not, and run their lifespans inside this one's."""
    document = build_document()

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for sub in mounted:
                await stack.enter_async_context(sub.router.lifespan_context(sub))
            yield

    routes: list[BaseRoute] = [_route(e, memory, tokens, document, max_body) for e in OPERATIONS]
    routes.append(Route(OPENAPI_PATH, openapi, methods=["GET"], name="openapi"))
    routes += console
    routes += [Mount("", app=_within(MOUNTED_PATHS, sub)) for sub in mounted]
    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={HTTPException: _http_error, Exception: _http_error})
