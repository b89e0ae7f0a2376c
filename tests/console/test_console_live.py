"""An owner's live stream (ADR-0090) tells that owner's writes and no other's, whoever writes them,
on each store: the shared listener of a memory in the test's process, then the server-sent events
of a real ``fermix serve`` read over HTTP while another process writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.api.changes import owner_changes, owner_of
from tests.server.test_serve_process import TOKEN, serving
from tests.waits import HANG_GUARD_S, until

OPERATOR_TOKEN = TOKEN["FERMIX_TEST_OPERATOR"]


def _fact(memory: MemorySystem, owner: str, key: str, *, agent: str = "ada") -> int:
    memory.write_memory({"op": "add", "category": "preference", "key": key, "value": f"{key} of {owner}"},
                        agent_id=agent, owner_id=owner, trust="operator")
    return memory.head().position


def test_the_streams_of_an_owners_page() -> None:
    assert owner_of("memory/ada/alice") == ("ada", "alice")
    assert owner_of("memory/a%2Fb/al%20ice") == ("a/b", "al ice")
    assert owner_of("resource/ada/alice/user_md") == ("ada", "alice")
    assert owner_of("owner/ada/alice") == ("ada", "alice")
    for other in ("conversation/ada/telegram:42", "review/ada/alice/x", "job/j", "rules/ada", "resource/ada/alice",
                  "memory/ada", "privacy/receipts", "trace/model-calls"):
        assert owner_of(other) is None, other


def test_the_shared_listener_tells_each_owner_its_own_writes_only(tmp_path: Path, every_store: str) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as served, MemorySystem.open(home) as other:
        hub = owner_changes(served)
        assert owner_changes(served) is hub  # one per memory
        alice: list[int] = []
        bob: list[int] = []
        carol: list[int] = []
        stops = [hub.listen("ada", "alice", alice.append), hub.listen("ada", "bob", bob.append),
                 hub.listen("ada", "carol", carol.append)]
        # This process's writes are told as they commit, before the write returns.
        _fact(served, "bob", "tea")
        _fact(served, "alice", "tea", agent="zed")  # another agent's alice
        assert alice == [] and bob and carol == []
        _fact(served, "alice", "coffee")
        assert alice and all(position > 0 for position in alice)
        # Another memory's writes (another process's, as the store sees them) come through one
        # shared watcher, in order: once carol's is told, bob's were told, and none to alice.
        told_alice, told_bob = len(alice), len(bob)
        _fact(other, "bob", "skis")
        _fact(other, "carol", "skis")
        until(lambda: len(carol) > 0 and len(bob) > told_bob, "the other memory's writes told")
        assert len(alice) == told_alice
        _fact(other, "alice", "skis")
        until(lambda: len(alice) > told_alice, "alice's write from the other memory told")
        assert hub.listening() == 3
        for stop in stops:
            stop()
        assert hub.listening() == 0  # a closed page frees its slot
        told_alice = len(alice)
        _fact(served, "alice", "cello")
        assert len(alice) == told_alice


class _Stream:
    """An owner's live stream read on a thread of its own: the (event, data) pairs received."""

    def __init__(self, url: str, cookies: httpx.Cookies, path: str) -> None:
        self.events: list[tuple[str, str]] = []
        self._client = httpx.Client(base_url=url, cookies=cookies, trust_env=False, timeout=HANG_GUARD_S)
        self._thread = threading.Thread(target=self._read, args=(path,), daemon=True)
        self._thread.start()

    def _read(self, path: str) -> None:
        kind = ""
        try:
            with self._client.stream("GET", path) as answer:
                for line in answer.iter_lines():
                    if line.startswith("event: "):
                        kind = line.removeprefix("event: ")
                    elif line.startswith("data: ") and kind:
                        self.events.append((kind, line.removeprefix("data: ")))
                        kind = ""
        except httpx.HTTPError:
            pass  # the server stopped

    def changed(self) -> int:
        return sum(kind == "changed" for kind, _ in self.events)

    def close(self) -> None:
        self._client.close()


@pytest.fixture
def signed_in(tmp_path: Path, every_store: str) -> Iterator[tuple[str, httpx.Cookies, Path]]:
    """A real server on each store (``every_store`` first: the server opens the store it names),
    its operator signed in."""
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        _fact(memory, "alice", "tea")
        _fact(memory, "bob", "tea")
    with serving(home) as (_, url), httpx.Client(base_url=url, trust_env=False, timeout=HANG_GUARD_S,
                                                 follow_redirects=True) as http:
        signed = http.post("/signin", data={"token": OPERATOR_TOKEN})
        assert signed.status_code == 200 and signed.url.path == "/owners", signed.text[:300]
        yield url, http.cookies, home


def test_another_owners_writes_send_nothing_to_this_owners_stream(
        signed_in: tuple[str, httpx.Cookies, Path]) -> None:
    url, cookies, home = signed_in
    alice, bob, carol = (_Stream(url, cookies, f"/owners/ada/{owner}/live") for owner in ("alice", "bob", "carol"))
    try:
        until(lambda: all(("listening", "yes") in s.events for s in (alice, bob, carol)), "the streams listening")
        with MemorySystem.open(home) as host:  # another process writes, as a host does
            for n in range(3):
                told = bob.changed()
                _fact(host, "bob", f"sport{n}")
                until(lambda told=told: bob.changed() > told, f"bob's write {n} on bob's stream")
            _fact(host, "carol", "chess")
            until(lambda: carol.changed() > 0, "carol's write on carol's stream")
            # Bob's and carol's writes reached their streams before alice's was made: none reached hers.
            assert alice.changed() == 0, alice.events
            _fact(host, "alice", "cello")
            until(lambda: alice.changed() > 0, "alice's write on alice's stream")
    finally:
        for stream in (alice, bob, carol):
            stream.close()
