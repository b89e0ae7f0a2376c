"""The OpenAI Agents SDK's session over fermix memory (extra ``[openai-agents]``, ADR-0027).

::

    session = FermixAgentsSession.open(memory, "support-42", agent_id="ada", owner_id="alice")
    agent = Agent(name="Ada", instructions=memory_instructions(session, "You are Ada."),
                  tools=memory_tools(session))
    result = await Runner.run(agent, "I live in Paris", session=session)

:class:`FermixAgentsSession` satisfies ``agents.memory.Session`` for one fermix conversation:
every item the SDK adds is recorded as a message of that conversation (the item's JSON kept
exactly in the message's metadata, so ``get_items`` gives back what ``add_items`` took), with
the role, text, tool call or call id that fermix's own prompt composition, search, reviewer and
compaction read. ``pop_item`` records a retraction, ``clear_session`` is ``/clear``, and an
assistant reply closing a batch runs the turn's ``after_turn`` (review in the background).
:func:`memory_tools` gives an ``Agent`` the memory tools as function tools, and
:func:`memory_instructions` its instructions with the owner's memory block.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from fermix_memory.application.errors import PermissionDenied
from fermix_memory.application.message_input import MAX_ITEM_METADATA_BYTES, InvalidMessage
from fermix_memory.application.reviewer import ReviewResult
from fermix_memory.application.tool_definitions import tool_definitions
from fermix_memory.domain.errors import FermixError
from fermix_memory.domain.fence import CLOSE_TAG, OPEN_TAG
from fermix_memory.domain.values import ConversationKey, check_identifier, check_int
from fermix_memory.entrypoints.api.lane import run_sync, run_write
from fermix_memory.entrypoints.extras import require
from fermix_memory.entrypoints.integrations.agents_items import (
    ITEM_KEY,
    OPAQUE_KIND,
    closes_turn,
    item_record,
    message_arguments,
    message_items,
    row_items,
)

_agents = require("openai-agents", "agents")

if TYPE_CHECKING:
    from agents import FunctionTool, RunContextWrapper, Tool
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

    from fermix_memory.application.commands import TrustName
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.api.session import Session


DEFAULT_CHANNEL = "openai-agents"


def session_settings_of(value: SessionSettings | Mapping[str, Any] | None) -> SessionSettings:
    """``session_settings`` as the SDK's own sessions take it: ``None`` is ``SessionSettings()``;
    a dict is its fields, an unknown one a ``TypeError`` naming it (``SessionSettings(**value)``)."""
    settings = require("openai-agents", "agents.memory.session_settings")
    if value is None:
        return cast("SessionSettings", settings.SessionSettings())
    coerce = getattr(settings, "coerce_session_settings", None)  # the SDK's own normalising, where it has one
    if coerce is not None:
        return cast("SessionSettings", coerce(value))
    if isinstance(value, settings.SessionSettings):
        return cast("SessionSettings", value)
    if isinstance(value, Mapping):
        return cast("SessionSettings", settings.SessionSettings(**value))
    raise TypeError(f"session_settings must be a SessionSettings instance or a dict, got {type(value).__name__}")


# --- the session ----------------------------------------------------------------------------------


class FermixAgentsSession:
    """An ``agents.memory.Session`` over one fermix conversation.

    Build it from a fermix session (``FermixAgentsSession(memory.session(...))``: its
    ``session_id`` is the conversation's text, e.g. ``"telegram:42"``) or with :meth:`open`
    (the conversation ``openai-agents:<session_id>``). Agent, owner and trust are the fermix
    session's, fixed for the session's life. ``review=False`` leaves out the ``after_turn`` an
    assistant reply triggers (call :meth:`after_turn` yourself, e.g. with the prompt tokens)."""

    def __init__(self, session: Session, *, session_settings: SessionSettings | Mapping[str, Any] | None = None,
                 review: bool = True) -> None:
        self._session = session
        self.session_id: str = str(session.conversation)
        self.session_settings: SessionSettings = session_settings_of(session_settings)
        self._review = review

    @classmethod
    def open(cls, memory: MemorySystem, session_id: str, *, agent_id: str, owner_id: str,
             trust: TrustName = "guest", channel: str = DEFAULT_CHANNEL, context_window: int | None = None,
             session_settings: SessionSettings | Mapping[str, Any] | None = None,
             review: bool = True) -> FermixAgentsSession:
        """The session of conversation ``channel:session_id`` of ``memory``."""
        key = ConversationKey(channel, check_identifier(session_id, "session_id"))
        return cls(memory.session(agent_id=agent_id, owner_id=owner_id, conversation=key, trust=trust,
                                  context_window=context_window),
                   session_settings=session_settings, review=review)

    @property
    def session(self) -> Session:
        """The fermix session underneath (recall, compose_prompt, dispatch_tool ...)."""
        return self._session

    def _items(self, limit: int | None) -> list[dict[str, Any]]:
        if limit is None:
            limit = self.session_settings.limit
        if limit is None:
            return [item for m in self._session.history() for item in message_items(m)]
        if check_int(limit, "limit", minimum=0) == 0:
            return []
        # A message stands for 0..n items: the newest ``limit`` messages, and further back only
        # while they give fewer items than asked and the window holds more.
        # Read as the store's rows: an item is made from its row, no ``Message`` in between.
        agent_id, conversation, take = self._session.agent_id, self._session.conversation, limit
        while True:
            rows = self._session.history_rows(take)
            items = [item for r in rows for item in row_items(r, agent_id, conversation)]
            if len(items) >= limit or len(rows) < take:
                return items[-limit:]
            take *= 2

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The window's items, oldest first (the newest ``limit`` of them; ``session_settings.limit``
        when ``None`` is given; ``0``: none). A compaction checkpoint leads as a system item."""
        return cast("list[TResponseInputItem]", await run_sync(self._items, limit))

    def _add(self, items: Sequence[object]) -> None:
        if not isinstance(items, list | tuple):
            raise InvalidMessage(f"items must be a list, got {type(items).__name__}")
        # One transaction: every item checked first, then all recorded or none. The SDK's own
        # item id, when it has one, makes a retried add_items record it once.
        # The SDK's item is the message's metadata: its images and files come as data URLs.
        self._session._append_many([message_arguments(item) for item in items], MAX_ITEM_METADATA_BYTES)
        if self._review and items and closes_turn(items[-1]):
            self._session.after_turn()

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record ``items`` in order as messages of the conversation, in one transaction: all of
        them are checked first (a bad one is an ``InvalidMessage`` and none is recorded), then all
        are recorded or none (a process killed mid-call included). Recorded on the awaiting thread
        when the store commits them at once, else on the lane (ADR-0110)."""
        await run_write(self._session._appends_many_at_once(items), self._add, items)

    def _pop(self) -> dict[str, Any] | None:
        message = self._session.retract_newest()
        if message is None:
            return None
        items = message_items(message)
        return items[-1] if items else None

    async def pop_item(self) -> TResponseInputItem | None:
        """Take back the newest item: recorded as a ``message.retracted`` event (the log keeps
        it; the window, recall and search no longer show it). ``None`` when the window holds none."""
        return cast("TResponseInputItem | None", await run_sync(self._pop))

    def _clear(self) -> None:
        result = self._session.handle_command("/clear")
        if result is not None and not result.ok:
            raise PermissionDenied(f"clear_session is /clear, an operator's command: {result.reply}")

    async def clear_session(self) -> None:
        """``/clear``: the window starts afresh; the log, history search and long-term memory keep
        everything. Operator-only, like the chat command: a guest session gets ``PermissionDenied``."""
        await run_sync(self._clear)

    def after_turn(self, peak_prompt_tokens: int | None = None) -> Future[ReviewResult]:
        """The fermix turn hook (review, and compaction when ``peak_prompt_tokens`` crossed the
        threshold), queued in the background; returns at once."""
        return self._session.after_turn(peak_prompt_tokens)

    def __repr__(self) -> str:
        return f"FermixAgentsSession(session_id={self.session_id!r}, {self._session!r})"


# --- instructions and memory tools ---------------------------------------------------------------


def _memory_block(session: Session) -> str:
    """The owner's ``<memory-context>`` block as ``compose_prompt`` writes it ("" when empty):
    its tags occur nowhere else in the system text, so it is cut out whole."""
    prompt = session.compose_prompt()
    text = str(prompt[0]["content"]) if prompt and prompt[0]["role"] == "system" else ""
    start, end = text.find(OPEN_TAG), text.rfind(CLOSE_TAG)
    return text[start:end + len(CLOSE_TAG)] if start >= 0 and end > start else ""


def memory_instructions(session: FermixAgentsSession | Session,
                        system: str = "") -> Callable[[RunContextWrapper[Any], Any], Awaitable[str]]:
    """Dynamic ``instructions`` for an ``Agent``: ``system``, then the owner's USER.md and
    MEMORY.md in their ``<memory-context>`` fence, read afresh for every model call (what the
    reviewer learnt from earlier turns included). The window itself comes from the session's
    items, the compaction checkpoint among them."""
    fermix = session.session if isinstance(session, FermixAgentsSession) else session

    async def instructions(context: RunContextWrapper[Any], agent: Any) -> str:
        block = await run_sync(_memory_block, fermix)
        return "\n\n".join(part for part in (system.strip(), block) if part)

    return instructions




def _tool(session: Session, definition: Mapping[str, Any]) -> FunctionTool:
    name = str(definition["name"])

    def run(arguments: str) -> str:
        try:
            result = session.dispatch_tool(name, arguments)
        except FermixError as exc:  # the memory closed under a run, a busy store ...
            result = {"ok": False, "error": str(exc), "code": type(exc).__name__}
        return json.dumps(result, ensure_ascii=False)

    async def invoke(context: RunContextWrapper[Any], arguments: str) -> str:
        return await run_sync(run, arguments)

    tool: FunctionTool = _agents.FunctionTool(
        name=name, description=str(definition["description"]), params_json_schema=dict(definition["parameters"]),
        on_invoke_tool=invoke, strict_json_schema=False)
    return tool


def memory_tools(session: FermixAgentsSession | Session) -> list[Tool]:
    """``memory_store``, ``memory_recall`` and ``memory_sources_list`` as function tools for an
    ``Agent``, from the same definitions as ``dispatch_tool``. Each call runs through the
    session's ``dispatch_tool`` with its agent, owner, conversation and trust; a bad call comes
    back to the model as the ``{"ok": false, ...}`` text, never as an exception into the run."""
    fermix = session.session if isinstance(session, FermixAgentsSession) else session
    return [_tool(fermix, d) for d in tool_definitions()]


__all__ = ["DEFAULT_CHANNEL", "ITEM_KEY", "OPAQUE_KIND", "FermixAgentsSession", "item_record", "memory_instructions",
           "memory_tools", "session_settings_of"]
