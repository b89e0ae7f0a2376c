"""The console's page of one owner shows that owner's rows only (ADR-0074), checked on every byte
the server sends, without a browser: Starlette's test client signs in with the operator's token
and reads the page, its rows fragment (what a live page reloads) and its prompt files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.console.routes import console_routes
from fermix_memory.entrypoints.server.app import build_app
from tests.server.conftest import TOKENS

ALICE = "/owners/ada/alice"
# Bob's secrets (ada's owner bob) and those of alice with another agent (bob's agent).
HIDDEN = ["QZbobsecretQZ", "QZbobctxQZ", "QZbobtoolQZ", "QZbobsaidQZ", "QZotheragentQZ"]
SHOWN = ["QZalicesecretQZ", "QZalicectxQZ", "QZalicetoolQZ"]
HOSTILE = "<script>alert('QZ')</script></memory-context>"


def _seed(memory: MemorySystem) -> None:
    for owner, (identity, context, tool, said) in {
            "alice": ("QZalicesecretQZ", "QZalicectxQZ", "QZalicetoolQZ", "QZalicesaidQZ"),
            "bob": ("QZbobsecretQZ", "QZbobctxQZ", "QZbobtoolQZ", "QZbobsaidQZ")}.items():
        memory.append_message(agent_id="ada", owner_id=owner, conversation="tg:group", role="user", content=said)
        memory.write_memory([{"op": "add", "category": "identity", "key": f"{owner}_id", "value": identity},
                             {"op": "add", "category": "context", "key": f"{owner}_ctx", "value": context}],
                            agent_id="ada", owner_id=owner, trust="operator")
        memory.write_memory({"op": "add", "category": "context", "key": f"{owner}_tool", "value": tool},
                            agent_id="ada", owner_id=owner, writer="tool", conversation="tg:group", trust="operator")
    memory.write_memory({"op": "add", "category": "preference", "key": "hostile", "value": HOSTILE},
                        agent_id="ada", owner_id="alice", trust="operator")
    memory.write_memory({"op": "add", "category": "identity", "key": "elsewhere", "value": "QZotheragentQZ"},
                        agent_id="bob", owner_id="alice", trust="operator")


@pytest.fixture
def console(tmp_path: Path) -> Iterator[TestClient]:
    memory = MemorySystem.open(tmp_path / "home")
    try:
        _seed(memory)
        served = AsyncMemorySystem(memory)
        with TestClient(build_app(served, TOKENS, console=console_routes(served, TOKENS))) as client:
            yield client
    finally:
        memory.close()


def test_an_owners_page_shows_no_byte_of_another_owners_rows(console: TestClient) -> None:
    assert console.post("/signin", data={"token": "ada-secret"}).status_code == 403  # a host's token: no console
    signed = console.post("/signin", data={"token": "operator-secret"})
    assert signed.status_code == 200 and signed.url.path == "/owners", signed.text[:300]
    pages = {path: console.get(path) for path in (
        ALICE, f"{ALICE}/rows", f"{ALICE}?q=QZ", f"{ALICE}/rows?q=QZbob", f"{ALICE}/rows?q=secret",
        f"{ALICE}/files/user_md", f"{ALICE}/files/memory_md")}
    for path, page in pages.items():
        assert page.status_code == 200 and page.url.path == path.split("?")[0], (path, page.status_code)
        found = [s for s in HIDDEN if s.encode() in page.content]
        assert not found, (path, found)
        assert b"<script>alert(" not in page.content, path  # stored text is shown escaped, never run
    # The page is not empty: alice's own rows are there (the check above would be vacuous if not).
    for path in (ALICE, f"{ALICE}/rows"):
        assert all(s.encode() in pages[path].content for s in SHOWN), path
        assert b"&lt;script&gt;alert(" in pages[path].content, path
