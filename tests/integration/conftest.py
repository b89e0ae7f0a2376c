"""Shared fixtures for integration tests: loopback model servers and an HTTP client."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from fermix_memory.adapters.postgres.connection import PgCursor
from tests.integration.homes_on_stores import store_of  # noqa: F401 (a fixture of homes on either store)
from tests.integration.loopback_models import LoopbackModelServer
from tests.integration.sqlite_homes import home, storage  # noqa: F401 (a home made as a host makes it, its storage)


@pytest.fixture
def model_servers() -> Iterator[Callable[[str], LoopbackModelServer]]:
    """A factory for loopback model servers (``"openai"`` or ``"anthropic"``), all closed afterwards."""
    started: list[LoopbackModelServer] = []

    def start(protocol: str) -> LoopbackModelServer:
        server = LoopbackModelServer(protocol)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def openai_server(model_servers: Callable[[str], LoopbackModelServer]) -> LoopbackModelServer:
    return model_servers("openai")


@pytest.fixture
def anthropic_server(model_servers: Callable[[str], LoopbackModelServer]) -> LoopbackModelServer:
    return model_servers("anthropic")


@pytest.fixture
def http_client() -> Iterator[httpx.Client]:
    """An httpx client that ignores proxy environment variables, so loopback stays loopback."""
    with httpx.Client(trust_env=False) as client:
        yield client


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements this thread sends to a PostgreSQL server from now on."""
    statements: list[str] = []
    thread = threading.get_ident()
    execute = PgCursor.execute

    def counted(self: PgCursor, sql: str, params: Any = ()) -> PgCursor:
        if threading.get_ident() == thread:
            statements.append(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(PgCursor, "execute", counted)
    return statements
