"""A memory served over HTTP in the test's process: the server's ASGI application on a memory in a
temp home, reached through Starlette's test client (httpx), with one token of each role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.server.app import build_app
from fermix_memory.entrypoints.server.auth import Caller, Tokens, token_sha256

# The bearer header of each token the served memory knows.
ADA = {"Authorization": "Bearer ada-secret"}  # host token of agent ada
BOB = {"Authorization": "Bearer bob-secret"}  # host token of agent bob
OPERATOR = {"Authorization": "Bearer operator-secret"}
READER = {"Authorization": "Bearer reader-secret"}
TOKENS = Tokens([
    (token_sha256("ada-secret"), Caller("ada-bot", "host", "ada")),
    (token_sha256("bob-secret"), Caller("bob-bot", "host", "bob")),
    (token_sha256("operator-secret"), Caller("admin", "operator")),
    (token_sha256("reader-secret"), Caller("auditor", "reader")),
])


class Served:
    """The client, and the memory behind it (to check what a request stored, or did not)."""

    def __init__(self, client: TestClient, memory: MemorySystem) -> None:
        self.client, self.memory = client, memory

    def post(self, path: str, headers: dict[str, str], body: Any = None, **kwargs: Any) -> Any:
        return self.client.post(path, headers=headers, json=body, **kwargs)

    def get(self, path: str, headers: dict[str, str], **params: Any) -> Any:
        return self.client.get(path, headers=headers, params=params)

    def position(self) -> int:
        return self.memory.head().position


def served(home: Path, **options: Any) -> Iterator[Served]:
    memory = MemorySystem.open(home)
    try:
        with TestClient(build_app(AsyncMemorySystem(memory), TOKENS, **options)) as client:
            yield Served(client, memory)
    finally:
        memory.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Served]:
    yield from served(tmp_path / "home")
