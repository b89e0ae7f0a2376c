"""How a failure looks over HTTP: one body ``{"error": {"code", "message"}}`` and its status (ADR-0073).

The code of a typed error is its class name in snake case (``InvalidIdentifier`` →
``invalid_identifier``), so a client can tell every failure the Python API can raise apart; the
server's own refusals (a body too large, JSON that is not an object, an unknown key, a token
that may not) have codes of their own. An error nobody typed is a 500 whose message says
nothing of its cause: the cause goes to the log, never to a client.
"""

from __future__ import annotations

import logging
import re

from starlette.responses import JSONResponse

from fermix_memory.adapters.sql.head import BadHeadAnchor
from fermix_memory.application.errors import (
    BackgroundTimeout,
    ConfigError,
    MemoryClosed,
    ModelError,
    NotFound,
    PermissionDenied,
    SemanticRecallUnavailable,
    StorageBusy,
)
from fermix_memory.domain.errors import FermixError

log = logging.getLogger("fermix_memory.server")

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class HttpRefusal(FermixError):
    """A request the server refuses before any use case runs; carries its status and code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def unauthenticated() -> HttpRefusal:
    return HttpRefusal(401, "unauthenticated", "this request carries no valid bearer token")


def forbidden(message: str) -> HttpRefusal:
    return HttpRefusal(403, "forbidden", message)


def bad_request(code: str, message: str) -> HttpRefusal:
    return HttpRefusal(400, code, message)


def error_code(exc: BaseException) -> str:
    """``InvalidIdentifier`` → ``invalid_identifier``."""
    return _CAMEL.sub("_", type(exc).__name__).lower()


# Checked in order: the first class an error is an instance of gives its status.
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (BadHeadAnchor, 400),
    (ValueError, 400),  # DomainError and every other typed error about a value the caller gave
    (NotFound, 404),
    (PermissionDenied, 403),
    (MemoryClosed, 503),
    (StorageBusy, 503),
    (BackgroundTimeout, 503),
    (ModelError, 502),
    (SemanticRecallUnavailable, 400),
    (ConfigError, 500),
)


def error_body(status: int, code: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def error_response(exc: BaseException) -> JSONResponse:
    """The response for ``exc`` raised while serving a request."""
    if isinstance(exc, HttpRefusal):
        return error_body(exc.status, exc.code, str(exc))
    if isinstance(exc, FermixError):
        for cls, status in _STATUS:
            if isinstance(exc, cls):
                return error_body(status, error_code(exc), str(exc)[:2000])
    log.error("a request failed unexpectedly", exc_info=exc)
    return error_body(500, "internal_error", "the server failed to answer this request; its log says why")
