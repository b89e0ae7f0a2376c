"""``fermix mcp``: serve the memory over MCP, on stdio (desktop clients) or streamable HTTP.

The CLI imports this module only when ``fermix mcp`` runs (its command table names it), so
``fermix --help`` never loads the MCP SDK, and without the ``[mcp]`` extra the command fails
with one line naming it. Who speaks (ADR-0025): over stdio, ``--agent``, ``--owner``,
``--conversation`` and ``--trust``, else ``[fermix_core.mcp]``; over HTTP, the bearer token of
each request, looked up in ``[[fermix_core.mcp_tokens]]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings import McpTokenSettings
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.api.session import Session
from fermix_memory.entrypoints.listening import CannotListen, is_loopback, listen
from fermix_memory.entrypoints.mcp.server import BearerTokens, OneSpeaker, build_server, token_sha256

__all__ = ["McpRefused", "cmd_mcp", "is_loopback", "listen", "token_sessions"]


class McpRefused(CannotListen):
    """``fermix mcp`` will not serve as asked (an HTTP server without tokens, identity flags over HTTP)."""


def _check_bind(host: str, insecure: bool) -> None:
    """Refuse a non-loopback address unless the operator said ``--insecure-bind``: the server
    speaks plain HTTP, so bearer tokens and memory would cross the network readable by anyone
    on the path."""
    if not insecure and not is_loopback(host):
        raise McpRefused(f"refusing to serve MCP on {host}, a non-loopback address, over plain HTTP: fermix mcp has"
                         " no TLS, so bearer tokens and memory would cross the network unencrypted; serve on"
                         " 127.0.0.1 behind a TLS-terminating proxy, or pass --insecure-bind on a network you trust")


def _is_a_file(stream: object) -> bool:
    try:
        return isinstance(stream.fileno(), int)  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def token_sessions(memory: MemorySystem, tokens: tuple[McpTokenSettings, ...],
                   environ: Mapping[str, str]) -> dict[str, tuple[str, Session]]:
    """Each configured token's name mapped to (its SHA-256, the session it speaks as). A token
    read from a variable that is unset or empty is a :class:`ConfigError` naming the variable."""
    table: dict[str, tuple[str, Session]] = {}
    for token in tokens:
        digest = token.sha256
        if token.token_env is not None:
            secret = environ.get(token.token_env, "")
            if not secret:
                raise ConfigError(f"mcp_tokens {token.name}: the variable {token.token_env} is not set or empty")
            digest = token_sha256(secret)
        conversation = token.conversation or f"mcp:{token.name}"
        table[token.name] = (digest, memory.session(agent_id=token.agent_id, owner_id=token.owner_id,
                                                     conversation=conversation, trust=token.trust))  # type: ignore[arg-type]
    return table


def cmd_mcp(args: argparse.Namespace, out: object) -> int:
    """Serve until the client closes stdin (stdio) or the process is interrupted (HTTP)."""
    identity = {"agent_id": args.agent, "owner_id": args.owner, "conversation": args.conversation,
                "trust": args.trust}
    if args.http is not None and any(v is not None for v in identity.values()):
        raise McpRefused("--agent, --owner, --conversation and --trust are for stdio; over --http each token"
                         " says who speaks ([[fermix_core.mcp_tokens]] in config.toml)")
    if args.http is not None:
        _check_bind(args.http[0], args.insecure_bind)
    with MemorySystem.open(args.home) as memory:
        if args.http is None:
            config = memory.settings.mcp
            chosen = {k: getattr(config, k) if v is None else v for k, v in identity.items()}
            session = memory.session(**chosen)
            if not (_is_a_file(sys.stdin) and _is_a_file(sys.stdout)):
                raise McpRefused("fermix mcp speaks MCP on its standard input and output, which must be files or"
                                 " pipes (an MCP client starts it); use --http to serve over the network")
            sys.stderr.write(f"fermix: MCP server on stdio for agent {session.agent_id}, owner {session.owner_id}"
                             f" ({session.conversation}, {session.trust})\n")
            build_server(memory, OneSpeaker(session)).run("stdio")
            return 0
        host, port = args.http
        tokens = token_sessions(memory, memory.settings.mcp_tokens, os.environ)
        if not tokens:
            where = "on this machine" if is_loopback(host) else f"on {host}, a non-loopback address,"
            raise McpRefused(f"refusing to serve MCP over HTTP {where} without tokens: add a"
                             " [[fermix_core.mcp_tokens]] entry to config.toml (see the README, MCP)")
        shown = f"[{host}]" if ":" in host else host
        server = build_server(memory, BearerTokens(tokens), issuer_url=f"http://{shown}:{port}")
        with listen(host, port, option="--http") as sock:
            sys.stderr.write(f"fermix: MCP server on http://{shown}:{port}/mcp ({len(tokens)} token(s))\n")
            sys.stderr.flush()
            import anyio
            import uvicorn  # the [mcp] extra's HTTP server, as the SDK's own runner uses it

            http = uvicorn.Server(uvicorn.Config(server.streamable_http_app(host=host), log_level="warning"))
            anyio.run(http.serve, [sock])
    return 0
