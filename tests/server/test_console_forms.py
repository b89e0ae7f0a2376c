"""The console's forget forms at the HTTP level (ADR-0074): a wrong confirmation erases nothing,
a reader is refused, a form without the session's CSRF token is refused; and the history search
shows each hit with its conversation and the reply it got."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("itsdangerous")

from starlette.testclient import TestClient

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.console.routes import console_routes
from fermix_memory.entrypoints.server.app import build_app
from tests.server.conftest import TOKENS

CONVERSATION = "telegram:42/a b"  # a key with a slash and a space: quoted in every link
FORGET_CONVERSATION = "/owners/ada/alice/forget-conversation/telegram%3A42%2Fa%20b"


class Console:
    def __init__(self, memory: MemorySystem, client: TestClient, fact: int) -> None:
        self.memory, self.client, self.fact = memory, client, fact

    def sign_in(self, token: str) -> None:
        self.client.cookies.clear()
        answer = self.client.post("/signin", data={"token": token}, follow_redirects=False)
        assert answer.status_code == 303

    def csrf(self, path: str = "/owners") -> str:
        found = re.search(r'name="csrf" value="([^"]+)"', self.client.get(path).text)
        assert found is not None
        return found.group(1)

    def untouched(self) -> bool:
        return (any(r.id == self.fact for r in self.memory.memories(agent_id="ada", owner_id="alice"))
                and len(self.memory.messages("ada", CONVERSATION)) == 2)


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    memory = MemorySystem.open(tmp_path / "home")
    try:
        s = memory.session(agent_id="ada", owner_id="alice", conversation=CONVERSATION)
        s.append("user", "Which bakery sells the best pastel de nata?", sender="alice")
        s.append("assistant", "Manteigaria, near the Camoes square.")
        row = memory.write_memory({"op": "add", "category": "preference", "key": "coffee",
                                   "value": "Prefers flat whites"}, agent_id="ada", owner_id="alice", trust="operator")
        served = AsyncMemorySystem(memory)
        with TestClient(build_app(served, TOKENS, console=console_routes(served, TOKENS))) as client:
            yield Console(memory, client, row[0].memory_id)
    finally:
        memory.close()


FORGETS = [(FORGET_CONVERSATION, "messages"), ("/memories/{fact}/forget", "would erase memory")]


@pytest.mark.parametrize(("path", "preview"), FORGETS)
def test_a_wrong_confirmation_forgets_nothing(console: Console, path: str, preview: str) -> None:
    console.sign_in("operator-secret")
    path = path.format(fact=console.fact)
    page = console.client.get(path)
    assert page.status_code == 200 and preview in page.text and 'id="confirm"' in page.text
    answer = console.client.post(path, data={"csrf": console.csrf(path), "confirm": "alic"})
    assert answer.status_code == 400 and "did not match" in answer.text and "forget-result" not in answer.text
    assert console.untouched()


@pytest.mark.parametrize(("path", "preview"), FORGETS)
def test_a_reader_may_not_forget(console: Console, path: str, preview: str) -> None:
    console.sign_in("reader-secret")
    path = path.format(fact=console.fact)
    assert console.client.get(path).status_code == 403
    assert console.client.post(path, data={"csrf": console.csrf(), "confirm": "alice"}).status_code == 403
    story = console.client.get(f"/memories/{console.fact}").text
    assert "Prefers flat whites" in story and "Forget this fact" not in story
    assert console.untouched()


@pytest.mark.parametrize(("path", "preview"), FORGETS)
def test_a_form_without_the_sessions_csrf_token_is_refused(console: Console, path: str, preview: str) -> None:
    console.sign_in("operator-secret")
    path = path.format(fact=console.fact)
    for fields in ({"confirm": "alice"}, {"confirm": "alice", "csrf": console.csrf() + "x"}):
        answer = console.client.post(path, data=fields)
        assert answer.status_code == 403 and "not from this console session" in answer.text
    assert console.untouched()


def test_the_history_search_shows_the_conversation_and_the_reply(console: Console) -> None:
    console.sign_in("reader-secret")
    page = console.client.get("/owners/ada/alice/history", params={"q": "bakery"})
    assert page.status_code == 200
    assert "/owners/ada/alice/conversations/telegram%3A42%2Fa%20b" in page.text
    assert "Manteigaria" in page.text and "replied by ada" in page.text
    window = console.client.get("/owners/ada/alice/conversations/telegram%3A42%2Fa%20b")
    assert window.status_code == 200 and "Manteigaria" in window.text
    assert "Forget this conversation" not in window.text  # a reader gets no forms
    assert console.client.get("/owners/ada/bob/conversations/telegram%3A42%2Fa%20b").status_code == 404
