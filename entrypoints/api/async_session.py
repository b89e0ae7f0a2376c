"""The session API for asyncio: :class:`AsyncSession` is a :class:`Session` whose calls are
awaited (ADR-0026).

::

    s = memory.session(agent_id="ada", owner_id="alice", conversation="discord:42")
    await s.append("user", "I live in Paris")
    messages = await s.compose_prompt(system="You are Ada.")

Each method is the sync :class:`Session`'s of the same name, run on the memory's worker lane
(api/lane.py): same parameters, results and typed errors, and the event loop never waits on
the database or a model.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal, overload

from fermix_memory.application.commands import Style, StyleName
from fermix_memory.domain.values import ConversationKey, Trust
from fermix_memory.entrypoints.api.lane import Lane, OnLane, awaitable, awaitable_write
from fermix_memory.entrypoints.api.session import Session

if TYPE_CHECKING:
    from fermix_memory.entrypoints.api.turns import AnthropicPrompt, OpenAIPrompt, Prompt


class AsyncSession(OnLane[Session]):
    """Who talks where, bound once; see :meth:`AsyncMemorySystem.session`."""

    def __init__(self, session: Session, lane: Lane) -> None:
        self._sync = session
        self._lane = lane

    @property
    def sync(self) -> Session:
        """The sync :class:`Session` behind this one (for code that runs on a thread of its own)."""
        return self._sync

    @property
    def agent_id(self) -> str:
        return self._sync.agent_id

    @property
    def owner_id(self) -> str:
        return self._sync.owner_id

    @property
    def conversation(self) -> ConversationKey:
        return self._sync.conversation

    @property
    def trust(self) -> Trust:
        return self._sync.trust

    append = awaitable_write(Session.append, Session._appends_at_once)
    append_many = awaitable_write(Session.append_many, Session._appends_many_at_once)
    retract_newest = awaitable(Session.retract_newest)
    history = awaitable(Session.history)
    history_rows = awaitable(Session.history_rows)
    recall = awaitable(Session.recall)
    before_turn = awaitable(Session.before_turn)
    after_turn = awaitable(Session.after_turn)
    handle_command = awaitable(Session.handle_command)
    compact = awaitable(Session.compact)
    dispatch_tool = awaitable(Session.dispatch_tool)

    @overload
    async def compose_prompt(self, system: str = "", *,
                             style: Literal["openai", Style.OPENAI] = "openai",
                             as_of: datetime | str | None = None) -> OpenAIPrompt: ...

    @overload
    async def compose_prompt(self, system: str = "", *,
                             style: Literal["anthropic", Style.ANTHROPIC],
                             as_of: datetime | str | None = None) -> AnthropicPrompt: ...

    @overload
    async def compose_prompt(self, system: str = "", *, style: StyleName,
                             as_of: datetime | str | None = None) -> Prompt: ...

    async def compose_prompt(self, system: str = "", *, style: StyleName = "openai",
                             as_of: datetime | str | None = None) -> Prompt:
        """One system message (``system`` + memory block + checkpoint) then the window;
        ``style="anthropic"`` returns ``(system, messages)``; ``as_of``: the prompt as it was at
        that moment (see :meth:`MemorySystem.compose_prompt`)."""
        return await self._lane.run(self._sync.compose_prompt, system, style=style, as_of=as_of)

    def __repr__(self) -> str:
        return f"Async{self._sync!r}"
