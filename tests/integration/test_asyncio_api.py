"""The asyncio API (ADR-0026): the sync API's calls, types and errors, awaited on the worker lane;
the loop keeps running while a write waits; cancelled writes leave the log whole; 50 tasks at once."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

import fermix_memory
from fermix_memory import (
    AsyncMemorySystem,
    AsyncSession,
    ChatRequest,
    ChatResponse,
    CommandResult,
    HomeNotFound,
    InvalidArgument,
    MemoryClosed,
    MemorySystem,
    RecallResult,
    ReviewResult,
    Session,
)
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.application.message_input import InvalidMessage
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.entrypoints.api import async_memory_system
from fermix_memory.entrypoints.api.lane import WORKERS, run_sync
from tests.integration.held_store import memory_on_held_store
from tests.waits import HANG_GUARD_S

AGENT, OWNER, CONV = "ada", "alice", "discord:42"
T = TypeVar("T")
HOLD_AT_MOST_S = 30  # only reached when the loop was blocked: the test then fails


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def wrapped() -> T:
        return await main()

    return asyncio.run(wrapped())


async def ticks_while(task: asyncio.Future[Any], ticks: int) -> int:
    """Tick every millisecond until ``ticks`` ticks have passed or ``task`` is done; the count."""
    done = 0
    while done < ticks and not task.done():
        await asyncio.sleep(0.001)
        done += 1
    return done


def test_a_session_awaits_what_the_sync_session_returns(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home") as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV, trust="operator")
            assert isinstance(s, AsyncSession) and (s.agent_id, s.owner_id, str(s.conversation)) == (AGENT, OWNER, CONV)
            asked = await s.append("user", "I keep my kayak at the north pier")
            answered = await s.append("assistant", "Noted.")
            assert [m.id for m in await s.history()] == [asked, answered]
            found = await s.recall("kayak", source="history")
            assert isinstance(found, RecallResult) and [h.message.id for h in found.messages] == [asked]
            assert (await s.dispatch_tool("memory_store", {"key": "boat", "value": "A red kayak"}))["ok"]
            assert [h.memory.value for h in (await s.recall(key="boat")).memories] == ["A red kayak"]
            bad = await s.dispatch_tool("memory_store", {"nope": 1})
            assert bad["ok"] is False and bad["code"] == "unknown_argument"
            assert (await s.before_turn()).compacted is False
            openai_prompt = await s.compose_prompt(system="You are Ada.")
            assert openai_prompt[0]["role"] == "system" and openai_prompt[0]["content"].startswith("You are Ada.")
            system, messages = await s.compose_prompt(system="You are Ada.", style="anthropic")
            assert system.startswith("You are Ada.") and messages[0]["content"] == "I keep my kayak at the north pier"
            review = await s.after_turn(peak_prompt_tokens=100)
            assert isinstance(review, Future)
            reviewed: ReviewResult = await asyncio.wrap_future(review)
            assert reviewed.agent_id == AGENT and reviewed.conversation == s.conversation
            assert await s.handle_command("hello") is None
            cleared = await s.handle_command("/clear")
            assert isinstance(cleared, CommandResult) and cleared.ok and await s.history() == []
            # The same memory, read through the sync API and through the flat awaited methods.
            assert [m.id for m in memory.sync.messages(AGENT, CONV)] == [asked, answered]
            assert [m.id for m in await memory.messages(AGENT, CONV)] == [asked, answered]
            assert (await memory.verify()).ok

    run(main)


def test_the_flat_methods_are_awaited_and_the_pure_ones_are_not(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_memory_system, "PAGE", 2)  # the async iterators read several pages

    async def main() -> None:
        memory = await AsyncMemorySystem.open(tmp_path / "home")
        async with memory:
            mid = await memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user",
                                              content="my dog is called Rex")
            row = {"op": "add", "category": "preference", "key": "dog", "value": "Has a dog called Rex"}
            [outcome] = await memory.write_memory(row, agent_id=AGENT, owner_id=OWNER, trust="operator")
            assert outcome.status == "added" and outcome.memory_id is not None
            assert (await memory.memory(outcome.memory_id)).value == "Has a dog called Rex"
            assert [h.memory.key for h in (await memory.recall("Rex", agent_id=AGENT, owner_id=OWNER)).memories] \
                == ["dog"]
            assert len(await memory.export_history()) == 1
            positions = [e.position async for e in memory.events()]
            assert positions == sorted(positions) and len(positions) == (await memory.head()).position
            assert [e.position async for e in memory.log_entries()] == positions
            assert [e.position async for e in memory.events(after=positions[-2])] == positions[-1:]
            assert await memory.review_now() != []
            await memory.wait_for_background()
            assert [m.id for m in await memory.messages(AGENT, CONV)] == [mid]
            forgotten = await memory.forget_owner(OWNER, agent_id=AGENT)
            assert forgotten.agents == [AGENT] and await memory.messages(AGENT, CONV) == []
            assert (await memory.verify()).ok
            # Computed without the store: plain calls.
            assert {d["function"]["name"] for d in memory.tool_definitions()} >= {"memory_store", "memory_recall"}
            assert memory.prompt_file(AGENT, OWNER).name == "USER.md"
            assert memory.home == tmp_path / "home"

    run(main)


def test_every_method_of_the_sync_api_has_its_awaited_twin() -> None:
    """Nothing a host calls on MemorySystem or Session is missing from the asyncio API; what reads
    or writes the store is awaited there, with the sync method's parameters."""
    computed = {"session", "tool_definitions", "prompt_file", "settings", "home", "recalls_by_meaning"}
    for sync_class, async_class in ((MemorySystem, AsyncMemorySystem), (Session, AsyncSession)):
        public = {name for name in dir(sync_class) if not name.startswith("_")}
        missing = public - set(dir(async_class))
        assert missing == set(), f"{async_class.__name__} lacks {sorted(missing)}"
        for name in sorted(public - computed - {"open", "agent_id", "owner_id", "conversation", "trust"}):
            method = getattr(async_class, name)
            assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name
            sync_params = [p for p in inspect.signature(getattr(sync_class, name)).parameters if p != "self"]
            assert [p for p in inspect.signature(method).parameters if p != "self"] == sync_params, name
    assert inspect.signature(AsyncMemorySystem.open).parameters == inspect.signature(MemorySystem.open).parameters


def test_bad_input_raises_the_sync_apis_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        AsyncMemorySystem("~/.fermix")  # type: ignore[arg-type]

    async def main() -> None:
        with pytest.raises(InvalidArgument):
            await run_sync("not a function")  # type: ignore[arg-type]
        with pytest.raises(HomeNotFound):
            await AsyncMemorySystem.open(tmp_path / "missing", create=False)
        with pytest.raises(InvalidArgument):
            async with AsyncMemorySystem.open(tmp_path / "home", create="no"):  # type: ignore[arg-type]
                pass
        async with AsyncMemorySystem.open(tmp_path / "home") as memory:
            with pytest.raises(InvalidIdentifier):
                memory.session(agent_id="", owner_id=OWNER, conversation=CONV)
            with pytest.raises(fermix_memory.DomainError):
                memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV, trust="root")  # type: ignore[arg-type]
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            with pytest.raises(InvalidMessage):
                await s.append("usr", "hello")  # type: ignore[arg-type]
            with pytest.raises(fermix_memory.FermixError):
                await s.recall("x", scope="everywhere")  # type: ignore[arg-type]
            with pytest.raises(fermix_memory.FermixError):
                await s.compose_prompt(style="gemini")  # type: ignore[call-overload]
            with pytest.raises(InvalidArgument):
                await memory.wait_for_background(timeout=-1)
            with pytest.raises(fermix_memory.NotFound):
                await memory.memory(999)
            assert await s.history() == []
        with pytest.raises(MemoryClosed):
            await s.append("user", "too late")
        with pytest.raises(MemoryClosed):
            await memory.recall("x", agent_id=AGENT, owner_id=OWNER)
        await memory.close()  # twice is harmless

    run(main)


@contextlib.contextmanager
def writer_held(store: SqliteEventStore) -> Iterator[threading.Event]:
    """The store's writer held by another thread until the event is set (or a long while has
    passed, so that a loop blocked by a write fails the test instead of hanging it)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.exclusive("held by the test"):
            held.set()
            release.wait(HOLD_AT_MOST_S)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    try:
        yield release
    finally:
        release.set()
        holder.join()


def test_the_loop_keeps_running_while_a_write_waits_for_the_database(tmp_path: Path) -> None:
    """A write held behind the store's writer: the ticker task keeps ticking, the append is still
    waiting (reads answer meanwhile); released, the append returns its id."""
    with memory_on_held_store(tmp_path / "home") as (sync, store), writer_held(store) as release:
        async def main() -> None:
            memory = AsyncMemorySystem(sync)
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            append = asyncio.ensure_future(s.append("user", "written while the writer was held"))
            assert await ticks_while(append, 50) == 50, "the loop stopped while the write waited"
            assert not append.done()
            recalled = await s.recall("held", source="history")  # reads do not wait for the writer
            assert recalled.messages == []
            release.set()
            mid = await append
            assert [m.id for m in await s.history()] == [mid]
            await memory.close()

        run(main)


class HeldModel:
    """A chat model whose answer waits until the test lets it go (or a long while has passed)."""

    name = "held"
    model = "held-1"

    def __init__(self) -> None:
        self.asked, self.answer = threading.Event(), threading.Event()

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.asked.set()
        self.answer.wait(HOLD_AT_MOST_S)
        return ChatResponse(text=json.dumps({"operations": [
            {"op": "add", "category": "preference", "key": "boat", "value": "Keeps a kayak at the north pier"}]}))


def test_the_loop_keeps_running_while_a_review_waits_for_its_model(tmp_path: Path) -> None:
    model = HeldModel()

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home", providers=[model]) as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV, trust="operator")
            await s.append("user", "I keep my kayak at the north pier")
            review = asyncio.ensure_future(memory.review_now(agent_id=AGENT))
            for _ in range(HOLD_AT_MOST_S * 1000):  # the loop runs while the review gets to its model
                if model.asked.is_set() or review.done():
                    break
                await asyncio.sleep(0.001)
            assert model.asked.is_set(), "the review never asked its model"
            assert await ticks_while(review, 50) == 50, "the loop stopped while the model was asked"
            assert not review.done()
            assert await s.append("user", "and a red paddle") > 0  # other calls go on meanwhile
            model.answer.set()
            [result] = await review
            assert result.applied == 1
            assert [h.memory.key for h in (await s.recall(key="boat")).memories] == ["boat"]

    try:
        run(main)
    finally:
        model.answer.set()


def test_a_cancelled_write_commits_whole_or_not_at_all(tmp_path: Path) -> None:
    """Tasks cancelled while their write waits behind the held writer, and others cancelled at
    once: every acknowledged id is there, every message is whole, the log verifies."""
    home = tmp_path / "home"
    acknowledged: dict[int, str] = {}
    with memory_on_held_store(home) as (sync, store):
        async def main() -> None:
            memory = AsyncMemorySystem(sync)
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)

            async def append(text: str) -> None:
                acknowledged[await s.append("user", text)] = text

            with writer_held(store):
                held = [asyncio.ensure_future(append(f"held {i} " + "word " * i)) for i in range(2 * WORKERS)]
                await ticks_while(held[0], 5)
                for task in held:
                    task.cancel()
                # A cancel takes effect on the loop's next turn (asyncio runs future callbacks
                # soon, not at once): let it, before the writer frees the lane threads, or a
                # lane thread that finished could start a call whose cancel is still queued.
                await asyncio.sleep(0)
            loose = [asyncio.ensure_future(append(f"loose {i}")) for i in range(40)]
            for i, task in enumerate(loose):
                if i % 3 == 0:
                    await asyncio.sleep(0)
                    task.cancel()
            outcomes = await asyncio.gather(*held, *loose, return_exceptions=True)
            assert all(o is None or isinstance(o, asyncio.CancelledError) for o in outcomes), outcomes
            assert any(isinstance(o, asyncio.CancelledError) for o in outcomes)
            assert (await memory.verify()).ok
            await memory.close()  # waits for the cancelled calls that had started

        run(main)
    with MemorySystem.open(home) as reopened:
        stored = {m.id: m.content for m in reopened.messages(AGENT, CONV)}
        assert reopened.verify().ok
    assert {i: stored.get(i) for i in acknowledged} == acknowledged, "an acknowledged write was lost"
    # Each write either committed whole (its text exactly) or left nothing; the held calls that
    # had not reached a lane thread (all of them were waiting on the writer) never ran.
    assert set(stored.values()) <= {f"held {i} " + "word " * i for i in range(2 * WORKERS)} | {
        f"loose {i}" for i in range(40)}
    assert sum(text.startswith("held ") for text in stored.values()) <= WORKERS


def test_fifty_tasks_append_and_recall_at_once(tmp_path: Path) -> None:
    tasks_n, per_task = 50, 6

    async def main() -> dict[int, str]:
        acknowledged: dict[int, str] = {}
        async with AsyncMemorySystem.open(tmp_path / "home") as memory:
            start = asyncio.Event()

            async def chat(n: int) -> None:
                s = memory.session(agent_id=AGENT, owner_id=f"owner-{n}",
                                   conversation="discord:shared" if n % 2 else f"discord:{n}")
                await start.wait()
                for i in range(per_task):
                    text = f"task {n} says zebra{n}x{i}"
                    acknowledged[await s.append("user", text)] = text
                    hits = await s.recall(f"zebra{n}x{i}", source="history")
                    assert [h.message.content for h in hits.messages] == [text]

            tasks = [asyncio.ensure_future(chat(n)) for n in range(tasks_n)]
            start.set()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=HANG_GUARD_S)  # a deadlock fails, not hangs
            assert len(acknowledged) == tasks_n * per_task
            stored = {m.id: m.content for c in ["discord:shared", *(f"discord:{n}" for n in range(0, tasks_n, 2))]
                      for m in await memory.messages(AGENT, c)}
            assert stored == acknowledged
            assert (await memory.verify()).ok
        return acknowledged

    assert len(run(main)) == tasks_n * per_task


def test_run_sync_runs_a_sync_session_call_off_the_loop_thread(tmp_path: Path) -> None:
    """The one way for async code to call the sync API: on a lane thread, results and errors as is."""
    with MemorySystem.open(tmp_path / "home") as memory:
        s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)

        async def main() -> None:
            loop_thread = threading.get_ident()
            assert await run_sync(threading.get_ident) != loop_thread
            mid = await run_sync(s.append, "user", "hello", kind="text")
            assert [m.id for m in await run_sync(s.history, limit=1)] == [mid]
            with pytest.raises(InvalidMessage):
                await run_sync(s.append, "usr", "x")  # type: ignore[arg-type]

        run(main)


def open_files_under(folder: Path) -> list[str]:
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd).startswith(str(folder)):
                found.append(os.readlink(fd))
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the process's open files in /proc")
def test_an_open_cancelled_midway_closes_what_it_opened(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def main() -> None:
        opening = asyncio.ensure_future(AsyncMemorySystem.open(home).__aenter__())
        await asyncio.sleep(0)  # the open has gone to the lane
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        for _ in range(1_000):  # the open finishes on its thread, then what it opened is closed
            if (home / "memory.db").exists() and not open_files_under(home):
                break
            await asyncio.sleep(0.01)
        assert open_files_under(home) == [], "the memory a cancelled open opened was left open"
        async with AsyncMemorySystem.open(home) as memory:  # the home opens again
            assert (await memory.verify()).ok

    run(main)
