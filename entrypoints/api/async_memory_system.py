"""The embedding API for asyncio: what a host running an event loop imports
(``fermix_memory.AsyncMemorySystem``, ADR-0026).

::

    async with AsyncMemorySystem.open("~/.fermix") as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="discord:42")
        await s.append("user", "I live in Paris")

Every method is the sync :class:`MemorySystem`'s of the same name and arguments, awaited: it runs
on the worker lane (api/lane.py), so the loop never blocks, and returns the same types or raises
the same typed errors. Cancelling a task that awaits a write never leaves half of it: the write
commits whole or does not happen. Methods that compute without touching the store
(:meth:`session`, :meth:`tool_definitions`, :meth:`prompt_file`, :attr:`settings`, :attr:`home`)
are plain calls. The iterators of the sync API (:meth:`events`, :meth:`log_entries`) are async
iterators here, read page by page on the lane; :meth:`export_history` and :meth:`export_events`
give a list.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, ParamSpec, TypeVar, overload

from fermix_memory.adapters.sql import audit
from fermix_memory.application.commands import Style, StyleName, TrustName
from fermix_memory.application.settings import Settings
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.application.write_at_once import is_brief
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.entrypoints.api.async_session import AsyncSession
from fermix_memory.entrypoints.api.lane import Lane, OnLane, awaitable, awaitable_write, detach, run_sync
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.api.turns import AnthropicPrompt, OpenAIPrompt, Prompt, ToolDefinitions

PAGE = 500  # events read per lane call by the async iterators
E = TypeVar("E", RecordedEvent, audit.LogEntry)
P = ParamSpec("P")
T = TypeVar("T")


def _page(read: Callable[..., Iterator[E]], **arguments: Any) -> list[E]:
    """At most :data:`PAGE` items of a fresh read, its cursor closed before the thread moves on."""
    items = read(**arguments)
    try:
        return list(itertools.islice(items, PAGE))
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()


def opening(open_memory: Callable[P, MemorySystem]) -> Callable[P, OpeningMemory]:
    """``open_memory``'s parameters, opening on the lane: what ``AsyncMemorySystem.open`` is."""

    @functools.wraps(open_memory)
    def open(*args: P.args, **kwargs: P.kwargs) -> OpeningMemory:
        return OpeningMemory(functools.partial(open_memory, *args, **kwargs))

    return open


class OpeningMemory:
    """What :meth:`AsyncMemorySystem.open` returns: await it, or use it with ``async with``."""

    def __init__(self, opener: Callable[[], MemorySystem]) -> None:
        self._opener = opener
        self._opened: AsyncMemorySystem | None = None

    async def _open(self) -> AsyncMemorySystem:
        opening = asyncio.ensure_future(run_sync(self._opener))
        try:
            return AsyncMemorySystem(await asyncio.shield(opening))
        except asyncio.CancelledError:
            # The open goes on on its thread: close what it opens, since nobody will.
            opening.add_done_callback(_close_opened)
            raise

    def __await__(self) -> Generator[Any, None, AsyncMemorySystem]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMemorySystem:
        self._opened = await self._open()
        return self._opened

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._opened is not None:
            await self._opened.close()


def _appends_one_at_once(memory: MemorySystem, *_arguments: Any, agent_id: object = None, owner_id: object = None,
                         **_options: Any) -> bool:
    """Whether :meth:`MemorySystem.append_message`'s message may be appended at once on the awaiting
    thread (ADR-0110): the owner's messages may be (text ids; anything else is checked on the lane)."""
    return type(agent_id) is str and type(owner_id) is str and memory._open_app().appends_at_once(agent_id, owner_id)


def _appends_many_at_once(memory: MemorySystem, messages: object, *_arguments: Any, **_options: Any) -> bool:
    """The same for :meth:`MemorySystem.append_messages`: a few plain messages, each of an owner
    whose messages may be."""
    return is_brief(messages) and all(
        type(m) is dict and _appends_one_at_once(memory, agent_id=m.get("agent_id"), owner_id=m.get("owner_id"))
        for m in messages)


class AsyncMemorySystem(OnLane[MemorySystem]):
    """Durable, auditable memory for one home folder, for asyncio hosts. Open with :meth:`open`
    (``async with``, or ``await`` then :meth:`close`); or wrap a :class:`MemorySystem` the host
    opened (closing this one closes it)."""

    def __init__(self, memory: MemorySystem) -> None:
        if not isinstance(memory, MemorySystem):
            raise InvalidArgument(f"AsyncMemorySystem wraps a MemorySystem, got {type(memory).__name__}")
        self._sync = memory
        self._lane = Lane("this AsyncMemorySystem")

    #: Open the memory at ``home`` on the lane: ``async with AsyncMemorySystem.open(home) as memory``
    #: (closed at the block's end), or ``memory = await AsyncMemorySystem.open(home)``. The
    #: arguments, defaults and errors are :meth:`MemorySystem.open`'s.
    open = staticmethod(opening(MemorySystem.open))

    @property
    def sync(self) -> MemorySystem:
        """The sync :class:`MemorySystem` behind this one (for code that runs on a thread of its own)."""
        return self._sync

    async def _together(self, work: Callable[[MemorySystem], T]) -> T:
        """Internal (the server's turn in one request, ADR-0089): ``work(memory)`` as ONE call on
        the lane, so that several calls of the sync API cross to a lane thread once, not once each.
        Cancelling the awaiting task drops it only if it has not started, as any lane call."""
        return await self._lane.run(work, self._sync)

    def session(self, *, agent_id: str, owner_id: str, conversation: Any, trust: TrustName = "guest",
                context_window: int | None = None) -> AsyncSession:
        """A handle on one conversation with one owner whose calls are awaited: see
        :meth:`MemorySystem.session` (the arguments are checked here, at once)."""
        return AsyncSession(self._sync.session(agent_id=agent_id, owner_id=owner_id, conversation=conversation,
                                               trust=trust, context_window=context_window), self._lane)

    # --- records ---------------------------------------------------------------------------------

    append_message = awaitable_write(MemorySystem.append_message, _appends_one_at_once)
    append_messages = awaitable_write(MemorySystem.append_messages, _appends_many_at_once)
    history = awaitable(MemorySystem.history)
    history_rows = awaitable(MemorySystem.history_rows)
    messages = awaitable(MemorySystem.messages)
    message_page = awaitable(MemorySystem.message_page)
    clear_window = awaitable(MemorySystem.clear_window)
    retract_newest_message = awaitable(MemorySystem.retract_newest_message)
    import_history = awaitable(MemorySystem.import_history)
    write_memory = awaitable(MemorySystem.write_memory)
    write_memories = awaitable(MemorySystem.write_memories)
    memory_by_key = awaitable(MemorySystem.memory_by_key)
    memory_value_by_key = awaitable(MemorySystem.memory_value_by_key)
    conversation_memories = awaitable(MemorySystem.conversation_memories)
    conversation_chat_ids = awaitable(MemorySystem.conversation_chat_ids)
    restore = awaitable(MemorySystem.restore)
    memory = awaitable(MemorySystem.memory)
    explain = awaitable(MemorySystem.explain)
    memories = awaitable(MemorySystem.memories)
    erased_memories = awaitable(MemorySystem.erased_memories)
    owners = awaitable(MemorySystem.owners)
    recall = awaitable(MemorySystem.recall)
    fill_vectors = awaitable(MemorySystem.fill_vectors)
    embed_waiting = awaitable(MemorySystem.embed_waiting)  # progress is called on the memory's thread
    vectors_waiting = awaitable(MemorySystem.vectors_waiting)
    register_memory_source = awaitable(MemorySystem.register_memory_source)
    save_job = awaitable(MemorySystem.save_job)
    claim_job_run = awaitable(MemorySystem.claim_job_run)
    record_job_run = awaitable(MemorySystem.record_job_run)
    memory_source = awaitable(MemorySystem.memory_source)
    memory_sources = awaitable(MemorySystem.memory_sources)
    job = awaitable(MemorySystem.job)
    jobs = awaitable(MemorySystem.jobs)
    job_run = awaitable(MemorySystem.job_run)
    job_runs = awaitable(MemorySystem.job_runs)

    async def export_history(self, *, agent_id: str | None = None) -> list[str]:
        """Every stored message as JSON Lines (the import format), in log order."""
        return await self._lane.run(lambda: list(self._sync.export_history(agent_id=agent_id)))

    # --- turns -----------------------------------------------------------------------------------

    before_turn = awaitable(MemorySystem.before_turn)
    after_turn = awaitable(MemorySystem.after_turn)
    wait_for_background = awaitable(MemorySystem.wait_for_background)
    handle_command = awaitable(MemorySystem.handle_command)
    compact = awaitable(MemorySystem.compact)
    record_transcript = awaitable(MemorySystem.record_transcript)
    reviewed_up_to = awaitable(MemorySystem.reviewed_up_to)
    awaiting_review = awaitable(MemorySystem.awaiting_review)
    conversation_state = awaitable(MemorySystem.conversation_state)
    review_now = awaitable(MemorySystem.review_now)
    dispatch_tool = awaitable(MemorySystem.dispatch_tool)
    tool_definitions = ToolDefinitions()

    @overload
    async def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                             style: Literal["openai", Style.OPENAI] = "openai",
                             as_of: datetime | str | None = None) -> OpenAIPrompt: ...

    @overload
    async def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                             style: Literal["anthropic", Style.ANTHROPIC],
                             as_of: datetime | str | None = None) -> AnthropicPrompt: ...

    @overload
    async def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                             style: StyleName, as_of: datetime | str | None = None) -> Prompt: ...

    async def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                             style: StyleName = "openai", as_of: datetime | str | None = None) -> Prompt:
        """The prompt of a turn; see :meth:`MemorySystem.compose_prompt`."""
        return await self._lane.run(self._sync.compose_prompt, agent_id, owner_id, conversation, system=system,
                                    style=style, as_of=as_of)

    # --- files, erasure, audit -------------------------------------------------------------------

    @property
    def home(self) -> Path:
        return self._sync.home

    @property
    def settings(self) -> Settings:
        return self._sync.settings

    @property
    def recalls_by_meaning(self) -> bool:
        """Whether :meth:`recall` is hybrid by default (ADR-0044)."""
        return self._sync.recalls_by_meaning

    def prompt_file(self, agent_id: str, owner_id: str, name: str = "user_md") -> Path:
        """Where ``USER.md`` (``user_md``) or ``MEMORY.md`` (``memory_md``) of an owner lives."""
        return self._sync.prompt_file(agent_id, owner_id, name)

    rebuild_prompt_files = awaitable(MemorySystem.rebuild_prompt_files)
    resources = awaitable(MemorySystem.resources)
    resource_history = awaitable(MemorySystem.resource_history)
    resource_revision = awaitable(MemorySystem.resource_revision)
    resource_as_of = awaitable(MemorySystem.resource_as_of)
    resource_diff = awaitable(MemorySystem.resource_diff)
    resource_rollback = awaitable(MemorySystem.resource_rollback)
    roll_back = awaitable(MemorySystem.roll_back)
    forget_owner = awaitable(MemorySystem.forget_owner)
    forget_memory = awaitable(MemorySystem.forget_memory)
    forget_conversation = awaitable(MemorySystem.forget_conversation)
    retention_status = awaitable(MemorySystem.retention_status)
    run_retention = awaitable(MemorySystem.run_retention)
    head = awaitable(MemorySystem.head)
    public_key = awaitable(MemorySystem.public_key)
    receipt = awaitable(MemorySystem.receipt)
    verify_receipt = awaitable(MemorySystem.verify_receipt)
    verify = awaitable(MemorySystem.verify)
    replay_into = awaitable(MemorySystem.replay_into)
    import_events = awaitable(MemorySystem.import_events)

    async def export_events(self, *, encrypted: bool = False) -> list[str]:
        """The log as an event file's lines (see :meth:`MemorySystem.export_events`; ``encrypted``:
        each owner's payloads sealed under their key); a list, held whole: for a large home,
        export with the sync API or ``fermix events export``."""
        return await self._lane.run(lambda: list(self._sync.export_events(encrypted=encrypted)))

    async def events(self, *, after: int = 0, stream: str | None = None) -> AsyncIterator[RecordedEvent]:
        """The event log in log order, after position ``after`` (see :meth:`MemorySystem.events`)."""
        while page := await self._lane.run(_page, self._sync.events, after=after, stream=stream):
            for event in page:
                yield event
            after = page[-1].position

    async def log_entries(self, *, after: int = 0, kind: str | None = None) -> AsyncIterator[audit.LogEntry]:
        """Every log entry after ``after`` as the audit shows it (see :meth:`MemorySystem.log_entries`)."""
        while page := await self._lane.run(_page, self._sync.log_entries, after=after, kind=kind):
            for entry in page:
                yield entry
            after = page[-1].position

    # --- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Refuse new calls, let those in flight finish (the loop keeps running), then close the
        memory on the lane (a running review is waited for there). Closing twice is harmless."""
        await self._lane.drain()
        await run_sync(self._sync.close)

    async def __aenter__(self) -> AsyncMemorySystem:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncMemorySystem(home='{self.home}')"


def _close_opened(opening: asyncio.Future[MemorySystem]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        detach(opening.result().close)
