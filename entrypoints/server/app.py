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
from fermix_memory.entrypoints.server.errors import error_body
from fermix_memory.entrypoints.server.openapi import body_fields, build_document
from fermix_memory.entrypoints.server.operation import Operation, Waiting
from fermix_memory.entrypoints.server.requests import MAX_BODY_BYTES

OPENAPI_PATH = "/v1/openapi.json"
# What a mounted application (the MCP endpoint) answers: its endpoint and its OAuth metadata.
MOUNTED_PATHS = ("/mcp", "/.well-known/")


class _Server(Starlette):
    """The application; a request for an operation at a fixed path (``fixed``: by method and
    path) goes straight to it, past the routing and middleware the other paths take."""

    fixed: dict[tuple[str, str], Operation]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            operation = self.fixed.get((scope["method"], scope["path"]))
            if operation is not None:
                await operation(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _operations(memory: AsyncMemorySystem, tokens: Tokens, document: dict[str, Any],
                max_body: int) -> tuple[dict[tuple[str, str], Operation], list[BaseRoute]]:
    """Each operation: those at fixed paths by method and path, the others as routes."""
    waiting = Waiting()
    fixed: dict[tuple[str, str], Operation] = {}
    routes: list[BaseRoute] = []
    for e in OPERATIONS:
        fields = body_fields(document, e) if e.method == "POST" else (frozenset[str](), ())
        operation = Operation(e, memory, tokens, max_body, fields, waiting)
        if "{" not in e.path:
            fixed[(e.method, e.path)] = operation
        routes.append(Route(e.path, operation, methods=[e.method], name=e.name))
    return fixed, routes


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

    fixed, routes = _operations(memory, tokens, document, max_body)
    routes.append(Route(OPENAPI_PATH, openapi, methods=["GET"], name="openapi"))
    routes += console
    routes += [Mount("", app=_within(MOUNTED_PATHS, sub)) for sub in mounted]
    app = _Server(routes=routes, lifespan=lifespan,
                  exception_handlers={HTTPException: _http_error, Exception: _http_error})
    app.fixed = fixed
    return app
