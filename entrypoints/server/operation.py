"""One operation of ``/v1`` as a bare ASGI application (ADR-0073, "The cost of a request").

A turn crosses the server once or twice (an append asking for the prompt, ADR-0089; or an
append, then a prompt), so what a request costs beside the memory's own work is paid each time.
An operation therefore reads its scope, its body and its headers as they come, and answers with
pre-encoded header lines: no request or response object, no middleware. The operations at
fixed paths (every turn operation) are found by one dictionary look-up before any routing
(app.py); those with path parameters are ordinary routes of the application.

A short call (``Endpoint.short``: an append, a prompt) runs on the event loop itself while one
client has the server to itself (none of the server's calls waits on the worker lane and the
last request came on the same connection): a lone client's turn is spared two thread hops per
request. Once several clients take turns, their calls go to the lane, as every async way in
does, and share its threads and its group commit while the loop reads the next requests.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import QueryParams
from starlette.types import Receive, Scope, Send

from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.server.auth import Tokens
from fermix_memory.entrypoints.server.endpoints import Call, Endpoint
from fermix_memory.entrypoints.server.errors import error_response
from fermix_memory.entrypoints.server.requests import encode_json, json_object, query_values, receive_body

_JSON_HEADER = (b"content-type", b"application/json")
_NO_PATH: dict[str, str] = {}


class Waiting:
    """How many of the server's calls wait on the worker lane right now, and which connection
    the last request came on."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last: object = None

    def alone(self, scope: Scope) -> bool:
        """Whether a request on this connection may run on the loop: no call waits on the lane and
        the last request came on the same connection (a lone client, not several taking turns)."""
        client = scope.get("client")
        alone = not self.count and client is not None and client == self.last
        self.last = client
        return alone


class Operation:
    """``endpoint`` served to the holders of ``tokens``: the ASGI application of one route."""

    __slots__ = ("_allowed", "_endpoint", "_max_body", "_memory", "_required", "_tokens", "_waiting")

    def __init__(self, endpoint: Endpoint, memory: AsyncMemorySystem, tokens: Tokens, max_body: int,
                 fields: tuple[frozenset[str], tuple[str, ...]], waiting: Waiting) -> None:
        self._endpoint, self._memory, self._tokens, self._max_body = endpoint, memory, tokens, max_body
        self._allowed, self._required = fields
        self._waiting = waiting

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._endpoint
        try:
            authorization = length = None
            for name, value in scope["headers"]:
                if name == b"authorization":
                    authorization = value.decode("latin-1")
                elif name == b"content-length":
                    length = value
            caller = self._tokens.caller(authorization)
            caller.require(endpoint.reach)
            body: dict[str, Any] = {}
            if endpoint.method == "POST":
                body = json_object(await receive_body(receive, length, self._max_body), self._allowed, self._required)
            raw_query = scope.get("query_string", b"")
            query = query_values(QueryParams(raw_query), endpoint.query) if raw_query else {}
            call = Call(self._memory, caller, body, query, scope.get("path_params", _NO_PATH),
                        inline=endpoint.short and self._waiting.alone(scope))
            result = await self._call(call)
            data = encode_json(result)
        except Exception as exc:  # every failure is one typed body (errors.py)
            await error_response(exc)(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": endpoint.status,
                    "headers": [_JSON_HEADER, (b"content-length", b"%d" % len(data))]})
        await send({"type": "http.response.body", "body": data})

    async def _call(self, call: Call) -> Any:
        if call.inline:
            return await self._endpoint.handler(call)
        self._waiting.count += 1
        try:
            return await self._endpoint.handler(call)
        finally:
            self._waiting.count -= 1


__all__ = ["Operation", "Waiting"]
