"""Who asks: bearer tokens and the roles they carry (ADR-0073).

A token is never stored: ``[[fermix_core.server_tokens]]`` holds its SHA-256 (or the name of a
variable holding it, hashed at start), and every entry is compared in constant time, so a wrong
token costs as long as a right one. A token's role says what it may do:

- ``host``: the turn operations of ONE agent (``agent_id`` of the entry), for any owner;
- ``operator``: everything, naming the agent in each call;
- ``reader``: the reads only.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings import ServerTokenSettings
from fermix_memory.entrypoints.server.errors import HttpRefusal, forbidden, unauthenticated

HOST, OPERATOR, READER = "host", "operator", "reader"
# What each role may reach: turn operations (host), reads (reader), everything (operator).
TURNS, READS, ADMIN = "turns", "reads", "admin"
_MAY: Final = {HOST: frozenset({TURNS}), READER: frozenset({READS}), OPERATOR: frozenset({TURNS, READS, ADMIN})}


def token_sha256(token: str) -> str:
    """What config.toml stores of a token: its SHA-256 in lowercase hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@attrs.frozen
class Caller:
    """The holder of a verified token: its entry's name (recorded as who asked), role and agent."""

    name: str
    role: str
    agent_id: str = ""

    def require(self, reach: str) -> None:
        """Refuse (403) what this role may not do."""
        if reach not in _MAY[self.role]:
            raise forbidden(f"a {self.role} token may not do this")

    def agent(self, named: object) -> str:
        """The agent a turn operation acts for: a host token's own (naming another is 403), else
        the one named."""
        if self.role != HOST:
            return named  # type: ignore[return-value]  # checked by the use case as any host input
        if named is not None and named != self.agent_id:
            raise forbidden("a host token speaks for its own agent only")
        return self.agent_id


@attrs.frozen
class _Entry:
    digest: bytes
    caller: Caller


class Tokens:
    """The server's tokens; :meth:`caller` turns an ``Authorization`` header into who asks."""

    def __init__(self, entries: Iterable[tuple[str, Caller]]) -> None:
        """``entries``: (a token's SHA-256 hex, who holds it)."""
        self._entries = tuple(_Entry(bytes.fromhex(digest), caller) for digest, caller in entries)

    def __len__(self) -> int:
        return len(self._entries)

    def caller(self, authorization: str | None) -> Caller:
        """Who holds the bearer token of ``authorization``, or 401."""
        if authorization is None:
            raise unauthenticated()
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise unauthenticated()
        digest = hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).digest()
        found = None
        for entry in self._entries:  # every entry compared, in constant time
            if hmac.compare_digest(digest, entry.digest):
                found = entry.caller
        if found is None:
            raise unauthenticated()
        return found


def configured_tokens(tokens: tuple[ServerTokenSettings, ...], environ: Mapping[str, str],
                      operator_env: str | None = None) -> Tokens:
    """The tokens of config.toml, plus one operator token read from the variable ``operator_env``
    (``fermix serve --token-env``). A variable that is unset or empty is a :class:`ConfigError`."""
    entries: list[tuple[str, Caller]] = []
    for token in tokens:
        digest = token.sha256
        if token.token_env is not None:
            digest = token_sha256(_secret(environ, token.token_env, f"server_tokens {token.name}"))
        entries.append((digest, Caller(token.name, token.role, token.agent_id)))
    if operator_env is not None:
        secret = _secret(environ, operator_env, "--token-env")
        entries.append((token_sha256(secret), Caller(operator_env.lower(), OPERATOR)))
    return Tokens(entries)


def _secret(environ: Mapping[str, str], name: str, where: str) -> str:
    secret = environ.get(name, "")
    if not secret:
        raise ConfigError(f"{where}: the variable {name} is not set or empty")
    return secret


__all__ = ["ADMIN", "HOST", "OPERATOR", "READER", "READS", "TURNS", "Caller", "HttpRefusal", "Tokens",
           "configured_tokens", "token_sha256"]
