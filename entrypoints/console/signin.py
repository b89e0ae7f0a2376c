"""Who is signed in to the console (ADR-0074).

An operator or reader signs in once with a token (a form POST: never in a URL, never logged). The
console then keeps a signed cookie (``itsdangerous``; HttpOnly, SameSite=Strict, Secure over
HTTPS) naming the token's holder and role and carrying a random CSRF token that every form must
send back. The signing key is made at start, so a restart signs everyone out.
"""

from __future__ import annotations

import hmac
import secrets

import attrs
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from fermix_memory.entrypoints.server.auth import OPERATOR, READER, Caller, Tokens
from fermix_memory.entrypoints.server.errors import HttpRefusal, forbidden

COOKIE = "fermix_console"
MAX_AGE_S = 12 * 3600


@attrs.frozen
class Signed:
    """The holder of a console session: who, which role, and the session's CSRF token."""

    caller: Caller
    csrf: str

    @property
    def may_change(self) -> bool:
        return self.caller.role == OPERATOR


class ConsoleSessions:
    def __init__(self, tokens: Tokens, *, secure: bool, key: bytes | None = None) -> None:
        self._tokens, self._secure = tokens, secure
        self._serializer = URLSafeTimedSerializer(key or secrets.token_bytes(32), salt="fermix-console")

    def sign_in(self, token: str, response: Response) -> Caller:
        """The token's holder, now signed in on ``response`` (401 for an unknown token, 403 for a host's)."""
        caller = self._tokens.caller(f"Bearer {token}")
        if caller.role not in (OPERATOR, READER):
            raise forbidden("the console is for operator and reader tokens; a host token speaks for an agent")
        value = self._serializer.dumps([caller.name, caller.role, caller.agent_id, secrets.token_urlsafe(24)])
        response.set_cookie(COOKIE, value, max_age=MAX_AGE_S, httponly=True, samesite="strict", secure=self._secure,
                            path="/")
        return caller

    @staticmethod
    def sign_out(response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")

    def signed(self, request: Request) -> Signed | None:
        """Who the request's cookie names, or ``None`` (no cookie, a forged or expired one)."""
        value = request.cookies.get(COOKIE)
        if value is None:
            return None
        try:
            name, role, agent, csrf = self._serializer.loads(value, max_age=MAX_AGE_S)
        except (BadSignature, ValueError, TypeError):
            return None
        return Signed(Caller(name, role, agent), csrf)

    @staticmethod
    def check_form(signed: Signed, sent: object, *, changes: bool = True) -> None:
        """A form's CSRF token must be the session's (403 otherwise); ``changes``: only an operator may."""
        if not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), signed.csrf.encode()):
            raise HttpRefusal(403, "csrf", "this form is not from this console session; reload the page")
        if changes and not signed.may_change:
            raise forbidden("a reader may not change anything")
