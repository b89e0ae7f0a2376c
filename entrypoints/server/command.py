"""``fermix serve``: the memory server on one port (ADR-0073; needs the ``[server]`` extra).

It binds 127.0.0.1 unless told otherwise; another address needs TLS files (``--tls-cert``,
``--tls-key``) or ``--insecure-bind``. It never starts without a token: the
``[[fermix_core.server_tokens]]`` of config.toml, or one operator token from ``--token-env VAR``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable

from fermix_memory.entrypoints.extras import require

require("server", "starlette")
require("server", "uvicorn")

import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402

from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem  # noqa: E402
from fermix_memory.entrypoints.api.memory_system import MemorySystem  # noqa: E402
from fermix_memory.entrypoints.console.routes import console_routes  # noqa: E402
from fermix_memory.entrypoints.listening import CannotListen, is_loopback, listen  # noqa: E402
from fermix_memory.entrypoints.server.app import build_app  # noqa: E402
from fermix_memory.entrypoints.server.auth import configured_tokens  # noqa: E402
from fermix_memory.entrypoints.server.openapi import build_document  # noqa: E402
from fermix_memory.entrypoints.server.requests import MAX_BODY_BYTES  # noqa: E402

__all__ = ["ServeRefused", "cmd_serve", "event_loop_factory"]
SHUTDOWN_GRACE_S = 2


class ServeRefused(CannotListen):
    """``fermix serve`` will not serve as asked (no token, a public address without TLS)."""


def _check_bind(host: str, tls: bool, insecure: bool) -> None:
    if not (tls or insecure or is_loopback(host)):
        raise ServeRefused(f"refusing to serve on {host}, a non-loopback address, without TLS: tokens and memory"
                           " would cross the network unencrypted; give --tls-cert and --tls-key, serve on 127.0.0.1"
                           " behind a TLS-terminating proxy, or pass --insecure-bind on a network you trust")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (it comes with the extra ``[server]``, ADR-0094),
    else ``None``: asyncio's own. The same choice uvicorn's ``loop="auto"`` makes."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _mcp_app(memory: MemorySystem, host: str, url: str) -> Starlette | None:
    """The MCP endpoint of ``fermix mcp --http``, with its own tokens (``[[fermix_core.mcp_tokens]]``),
    when any is configured; ``None`` otherwise."""
    if not memory.settings.mcp_tokens:
        return None
    require("mcp", "mcp.server")
    from fermix_memory.entrypoints.mcp.command import token_sessions
    from fermix_memory.entrypoints.mcp.server import BearerTokens, build_server

    sessions = token_sessions(memory, memory.settings.mcp_tokens, os.environ)
    app: Starlette = build_server(memory, BearerTokens(sessions), issuer_url=url).streamable_http_app(host=host)
    return app


def cmd_serve(args: argparse.Namespace, out: object) -> int:
    """Serve until interrupted; ``--print-openapi`` prints the API's OpenAPI document and exits."""
    if args.print_openapi:
        sys.stdout.write(json.dumps(build_document(), indent=2, ensure_ascii=False) + "\n")
        return 0
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ServeRefused("give both --tls-cert and --tls-key, or neither")
    tls = args.tls_cert is not None
    _check_bind(args.host, tls, args.insecure_bind)
    with MemorySystem.open(args.home) as memory:
        tokens = configured_tokens(memory.settings.server_tokens, os.environ, args.token_env)
        if not len(tokens):
            raise ServeRefused("refusing to serve without tokens: add a [[fermix_core.server_tokens]] entry to"
                               " config.toml, or pass --token-env VAR naming a variable that holds an operator token")
        scheme = "https" if tls else "http"
        shown = f"[{args.host}]" if ":" in args.host else args.host
        with listen(args.host, args.port) as sock:
            port = sock.getsockname()[1]
            mcp = _mcp_app(memory, args.host, f"{scheme}://{shown}:{port}")
            served = AsyncMemorySystem(memory)
            app = build_app(served, tokens, max_body=args.max_body or MAX_BODY_BYTES,
                            mounted=[] if mcp is None else [mcp], console=console_routes(served, tokens, secure=tls))
            also = "" if mcp is None else f", MCP at /mcp ({len(memory.settings.mcp_tokens)} token(s))"
            sys.stderr.write(f"fermix: serving on {scheme}://{shown}:{port}/v1 ({len(tokens)} token(s)){also}\n")
            sys.stderr.flush()
            # A console page's live stream never ends by itself: at shutdown, requests still open
            # after SHUTDOWN_GRACE_S are cancelled (a write they started still commits whole).
            # No ``server`` header (ADR-0094): a header line less for every client to parse.
            config = uvicorn.Config(app, log_level="warning", ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key,
                                    access_log=False, timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                                    server_header=False)
            with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
                runner.run(uvicorn.Server(config).serve(sockets=[sock]))
    return 0
