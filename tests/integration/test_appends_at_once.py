"""ADR-0110: an async caller's brief write (``AsyncSession.append`` / ``append_many``, the Agents
session's ``add_items``, a LangGraph batch of puts only) commits on the awaiting thread when the
store can commit it at once, without waiting for anything, and goes to the lane otherwise: another
writer ahead, the write lock held by another connection, commits that sync (``durability =
"full"``), a server's store, an owner whose first message here may render their files. Either way
it records the same.

Whether a call went to the lane shows in the loop: a callback scheduled before the call runs
while a call on the lane is awaited, not while one commits at once on the loop's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import PutOp

from fermix_memory import AsyncMemorySystem, MemorySystem
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.application.message_input import InvalidMessage
from fermix_memory.application.write_at_once import BRIEF_WRITE_MOST
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.entrypoints.api import lane
from fermix_memory.langgraph import FermixStore
from fermix_memory.openai_agents import FermixAgentsSession
from tests.integration.held_store import memory_on_held_store, wait_for_locks_past_any_hold, write_lock_held
from tests.integration.test_asyncio_api import writer_held
from tests.waits import HANG_GUARD_S

AGENT, OWNER, CONV = "ada", "alice", "t:1"


async def on_lane(call: Callable[[], Awaitable[Any]]) -> bool:
    """Whether awaiting ``call()`` gave the loop a turn (it went to the lane), after it succeeded."""
    turned = False

    def turn() -> None:
        nonlocal turned
        turned = True

    asyncio.get_running_loop().call_soon(turn)
    await call()
    at_once = not turned
    await asyncio.sleep(0)
    assert turned
    return not at_once


async def let_go(release: threading.Event) -> None:
    """Set ``release`` once the loop runs this task: while another awaits the lane."""
    release.set()


def texts(memory: MemorySystem, conversation: str = CONV) -> list[str]:
    return [m.content for m in memory.history(AGENT, conversation)]


def item(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"item {n}"}


@pytest.mark.usefixtures("every_store")
def test_a_known_owners_appends_commit_on_the_awaiting_thread_on_sqlite_only(tmp_path: Path,
                                                                             every_store: str) -> None:
    at_once = every_store == "sqlite"

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", config={}) as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            assert await on_lane(lambda: s.append("user", "first: the owner is new here"))
            assert await on_lane(lambda: s.append("user", "second")) is not at_once
            assert await on_lane(lambda: s.append_many([{"role": "user", "content": "third"},
                                                        {"role": "assistant", "content": "fourth"}])) is not at_once
            agents = FermixAgentsSession.open(memory.sync, "s1", agent_id=AGENT, owner_id=OWNER, review=False)
            assert await on_lane(lambda: agents.add_items([item(1), item(2)])) is not at_once
            assert await agents.get_items() == [item(1), item(2)]
            assert texts(memory.sync) == ["first: the owner is new here", "second", "third", "fourth"]
            store = FermixStore(memory.sync, agent_id=AGENT)  # an item's row renders no file: at once
            assert await on_lane(lambda: store.aput(("memories", OWNER), "k", {"n": 1})) is not at_once
            assert await on_lane(lambda: store.aget(("memories", OWNER), "k"))  # a read: on the lane
            assert (await store.aget(("memories", OWNER), "k")).value == {"n": 1}  # type: ignore[union-attr]

    asyncio.run(main())


@pytest.mark.sqlite_only("the failure of a commit made on the loop's own thread")
def test_a_refused_append_made_at_once_records_nothing_and_the_next_commits(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", config={}) as memory:
            agents = FermixAgentsSession.open(memory.sync, "s1", agent_id=AGENT, owner_id=OWNER, review=False)
            await agents.add_items([item(0)])
            with pytest.raises(InvalidMessage):
                await agents.add_items([item(1), {"role": "user", "content": "bad \ud800"}])
            with pytest.raises(InvalidMessage):
                await agents.add_items("not a list")  # type: ignore[arg-type]
            assert not await on_lane(lambda: agents.add_items([item(2)]))
            assert await agents.get_items() == [item(0), item(2)]

    asyncio.run(main())


def test_a_write_lock_held_elsewhere_sends_the_append_to_the_lane_and_the_loop_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Made at once, the append would wait on the loop's thread for the lock (here, until its
    holder gives up); on the lane it waits there, and the loop goes on until the lock is let go."""
    home = tmp_path / "home"
    wait_for_locks_past_any_hold(monkeypatch)

    async def main() -> None:
        async with AsyncMemorySystem.open(home, config={}) as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            await s.append("user", "before")
            with write_lock_held(home / "memory.db") as holder:
                # Let go of the lock as soon as the loop runs again: while the append waits on the
                # lane; never, if it waited here (then only once the holder gives up).
                releaser = asyncio.ensure_future(let_go(holder.release))
                await s.append("user", "while the lock was held")  # the task that wrote "before"
                await releaser
            assert not holder.gave_up, "the loop waited for the lock"
            assert not await on_lane(lambda: s.append("user", "after"))
            assert texts(memory.sync) == ["before", "while the lock was held", "after"]

    asyncio.run(main())


def test_another_writer_ahead_sends_the_append_to_the_lane(tmp_path: Path) -> None:
    with memory_on_held_store(tmp_path / "home") as (sync, store):
        async def main() -> None:
            memory = AsyncMemorySystem(sync)
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            await s.append("user", "before")
            with writer_held(store) as release:
                refused = store.at_once_refused
                releaser = asyncio.ensure_future(let_go(release))
                await s.append("user", "behind the other writer")  # the task that wrote "before"
                await releaser
                assert store.at_once_refused == refused + 1
            written = store.at_once_written
            await s.append("user", "after")
            assert store.at_once_written == written + 1
            assert texts(sync) == ["before", "behind the other writer", "after"]

        asyncio.run(main())


def test_commits_that_sync_are_never_made_on_the_awaiting_thread(tmp_path: Path) -> None:
    async def main() -> None:
        config = {"fermix_core": {"memory": {"durability": "full"}}}
        async with AsyncMemorySystem.open(tmp_path / "home", config=config) as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            for n in range(3):
                assert await on_lane(lambda n=n: s.append("user", f"message {n}"))  # type: ignore[misc]
            assert texts(memory.sync) == ["message 0", "message 1", "message 2"]

    asyncio.run(main())


def test_appends_at_once_and_writers_on_other_threads_all_commit(tmp_path: Path) -> None:
    """The loop's appends at once among writes of other threads sharing group commits: every one
    recorded once, each conversation in its own order."""
    with memory_on_held_store(tmp_path / "home") as (sync, store):
        def writes(thread: int) -> None:
            s = sync.session(agent_id=AGENT, owner_id=OWNER, conversation=f"t:other-{thread}")
            for n in range(60):
                s.append("user", f"{thread}-{n}")

        async def main() -> None:
            memory = AsyncMemorySystem(sync)
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            await s.append("user", "first")
            others = [threading.Thread(target=writes, args=(t,)) for t in range(3)]
            for t in others:
                t.start()
            for n in range(150):
                await s.append("user", f"loop-{n}")
            for t in others:
                t.join(HANG_GUARD_S)
            written = store.at_once_written
            await s.append("user", "last")  # the other writers gone: at once again
            assert store.at_once_written == written + 1

        asyncio.run(main())
        assert texts(sync) == ["first"] + [f"loop-{n}" for n in range(150)] + ["last"]
        for t in range(3):
            assert texts(sync, f"t:other-{t}") == [f"{t}-{n}" for n in range(60)]


def test_the_store_says_which_commits_may_be_made_at_once(tmp_path: Path) -> None:
    for durability, at_once in (("normal", True), ("full", False)):
        store = SqliteEventStore(tmp_path / f"{durability}.db", durability=durability)
        try:
            assert store.writes_at_once is at_once
        finally:
            store.close()
    store = SqliteEventStore(tmp_path / "normal.db", readonly=True)
    try:
        assert store.writes_at_once is False
    finally:
        store.close()


def test_tasks_taking_turns_at_appending_go_to_the_lane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another task, still running, began a write a moment ago: the tasks take turns, and their
    appends go to the lane (where they share commits); a task whose write came after one of a
    task that ended (a task per call) commits at once."""
    monkeypatch.setattr(lane, "TURNS_S", 3600.0)  # "a moment": however slow the machine

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", config={}) as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            await s.append("user", "first")
            assert not await on_lane(lambda: s.append("user", "main, again"))

            async def other() -> bool:
                return await on_lane(lambda: s.append("user", "another task, main still running"))

            assert await asyncio.create_task(other())
            assert not await on_lane(lambda: s.append("user", "main, the other task ended"))
            assert texts(memory.sync) == ["first", "main, again", "another task, main still running",
                                          "main, the other task ended"]

    asyncio.run(main())


def test_a_bulk_write_stays_on_the_lane(tmp_path: Path) -> None:
    """More than a turn's few messages or items: the loop is not held for a bulk write's Python,
    which the lane's thread gives up to the loop between its switch intervals."""
    most = BRIEF_WRITE_MOST

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", config={}) as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            await s.append("user", "first")
            few = [{"role": "user", "content": f"few {n}"} for n in range(most)]
            assert not await on_lane(lambda: s.append_many(few))
            assert await on_lane(lambda: s.append_many([*few, {"role": "user", "content": "one more"}]))
            agents = FermixAgentsSession.open(memory.sync, "s1", agent_id=AGENT, owner_id=OWNER, review=False)
            assert not await on_lane(lambda: agents.add_items([item(n) for n in range(most)]))
            assert await on_lane(lambda: agents.add_items([item(n) for n in range(most + 1)]))
            store = FermixStore(memory.sync, agent_id=AGENT)
            puts = [PutOp(("memories", OWNER), f"k{n}", {"n": n}) for n in range(most + 1)]
            assert not await on_lane(lambda: store.abatch(puts[:most]))
            assert await on_lane(lambda: store.abatch(puts))
            assert len(texts(memory.sync)) == 1 + most + most + 1

    asyncio.run(main())


def test_the_flat_async_api_appends_a_known_owners_messages_at_once(tmp_path: Path) -> None:
    """``AsyncMemorySystem.append_message(s)``: the same rule, the owner read from the arguments
    (text ids only; anything else is checked, and refused, on the lane as before)."""
    said = {"agent_id": AGENT, "owner_id": OWNER, "conversation": CONV, "role": "user"}

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", config={}) as memory:
            assert await on_lane(lambda: memory.append_message(**said, content="first"))
            assert not await on_lane(lambda: memory.append_message(**said, content="second"))
            assert not await on_lane(lambda: memory.append_messages([{**said, "content": "third"}]))
            other = {**said, "owner_id": "bob", "conversation": "t:2"}
            assert await on_lane(lambda: memory.append_messages([{**said, "content": "fourth"},
                                                                 {**other, "content": "bob's first"}]))
            assert await on_lane(lambda: memory.append_messages([{**said, "content": f"bulk {n}"}
                                                                 for n in range(BRIEF_WRITE_MOST + 1)]))
            with pytest.raises(InvalidIdentifier):
                await memory.append_message(**{**said, "owner_id": 7}, content="refused")  # type: ignore[arg-type]
            assert texts(memory.sync)[:4] == ["first", "second", "third", "fourth"]

    asyncio.run(main())
