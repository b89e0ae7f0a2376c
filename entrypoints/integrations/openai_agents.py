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

import copy
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import attrs

from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.composer import system_part
from fermix_memory.application.errors import PermissionDenied
from fermix_memory.application.message_input import InvalidMessage, build_message_event
from fermix_memory.application.reviewer import ReviewResult
from fermix_memory.application.tool_definitions import tool_definitions
from fermix_memory.domain.errors import DomainError, FermixError
from fermix_memory.domain.fence import CLOSE_TAG, OPEN_TAG
from fermix_memory.domain.messages import Message
from fermix_memory.domain.tool_calls import tool_call_id_of, tool_calls_of
from fermix_memory.domain.values import ConversationKey, Role, check_identifier, check_int
from fermix_memory.entrypoints.api.lane import run_sync
from fermix_memory.entrypoints.extras import require

_agents = require("openai-agents", "agents")

if TYPE_CHECKING:
    from agents import FunctionTool, RunContextWrapper, Tool
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

    from fermix_memory.application.commands import TrustName
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.api.session import Session


# Where a message keeps the SDK item it was recorded from (persisted: never rename).
ITEM_KEY = "openai_agents_item"
# The message kind of an item with no text and no call fermix can read (reasoning, hosted tool
# calls, references): kept in the window and the log, left out of prompts and search.
OPAQUE_KIND = "agents_item"
DEFAULT_CHANNEL = "openai-agents"
_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM, "developer": Role.SYSTEM}


# --- items <-> messages ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Record:
    """What one item becomes: a message's fields (the item itself in ``metadata``)."""

    role: Role
    content: str
    kind: str = "text"
    metadata: dict[str, Any]
    tool_calls: list[dict[str, str]] | None = None
    tool_call_id: str | None = None


def _texts(parts: object) -> list[tuple[int, str]]:
    """The text parts of a content list (``input_text``, ``output_text``, a refusal), by index."""
    if not isinstance(parts, list):
        return []
    found = []
    for i, part in enumerate(parts):
        if isinstance(part, Mapping):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str):
                found.append((i, text))
    return found


def _split(item: dict[str, Any], field: str) -> tuple[str, dict[str, Any]]:
    """The item's readable text and what the message keeps of the item. A text held in one place
    (``field`` as a string, or the one text part of its list) is stored once, as the message's
    content, and put back on the way out; several parts are joined for the content and the item
    is kept whole."""
    value = item.get(field)
    if isinstance(value, str):
        return value, {"item": {k: v for k, v in item.items() if k != field}, "text_at": [field]}
    texts = _texts(value)
    if len(texts) == 1:
        index, text = texts[0]
        template = copy.deepcopy(item)
        key = "text" if isinstance(template[field][index].get("text"), str) else "refusal"
        del template[field][index][key]
        return text, {"item": template, "text_at": [field, index, key]}
    return "\n".join(text for _, text in texts), {"item": item}


def item_record(item: object) -> _Record:
    """The message an item is recorded as, or :class:`InvalidMessage` for what is no item."""
    if not isinstance(item, Mapping):
        raise InvalidMessage(f"an item must be a JSON object, got {type(item).__name__}")
    item = dict(item)
    kind, role = item.get("type"), item.get("role")
    if kind in (None, "message") and isinstance(role, str) and role in _ROLES:
        text, kept = _split(item, "content")
        return _Record(role=_ROLES[role], content=text, metadata={ITEM_KEY: kept})
    call_id = item.get("call_id")
    if isinstance(kind, str) and isinstance(call_id, str):
        if kind.endswith("_call") and isinstance(item.get("name"), str):  # function and custom tool calls
            arguments = item.get("arguments", item.get("input"))
            return _Record(role=Role.ASSISTANT, content="", metadata={ITEM_KEY: {"item": item}}, tool_calls=[
                {"id": call_id, "name": item["name"], "arguments": arguments if isinstance(arguments, str) else "{}"}])
        if kind.endswith("_call_output"):
            text, kept = _split(item, "output")
            return _Record(role=Role.TOOL, content=text, metadata={ITEM_KEY: kept}, tool_call_id=call_id)
    return _Record(role=Role.ASSISTANT, content="", kind=OPAQUE_KIND, metadata={ITEM_KEY: {"item": item}})


def item_key(item: object) -> str | None:
    """The item's own ``id`` (the SDK gives one to what a model produced), if it is a usable one."""
    key = item.get("id") if isinstance(item, Mapping) else None
    if not isinstance(key, str):
        return None
    try:
        return check_identifier(key, "id")
    except DomainError:
        return None


def _stored_item(kept: Mapping[str, Any], content: str) -> dict[str, Any] | None:
    item = kept.get("item")
    path = kept.get("text_at")
    if not isinstance(item, dict):
        return None
    item = copy.deepcopy(item)
    if isinstance(path, list) and path:
        try:
            target: Any = item
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = content
        except (KeyError, IndexError, TypeError):
            return None
    return item


def message_items(message: Message) -> list[dict[str, Any]]:
    """The items a message of the window stands for: the item it was recorded from, exactly;
    a message recorded by other means (the session API, an import) as the SDK's input items."""
    kept = message.metadata.get(ITEM_KEY)
    if isinstance(kept, Mapping):
        item = _stored_item(kept, message.content)
        if item is not None:
            return [item]
    if message.role is Role.SYSTEM:
        return [{"role": "system", "content": system_part(message)}] if message.content.strip() else []
    if message.role is Role.TOOL:
        call_id = tool_call_id_of(message.metadata)
        if call_id is not None:
            return [{"type": "function_call_output", "call_id": call_id, "output": message.content}]
        return [{"role": "user", "content": f"[tool result] {message.content}"}]
    items: list[dict[str, Any]] = []
    if message.content.strip():
        items.append({"role": message.role.value, "content": message.content})
    items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
              for c in tool_calls_of(message.metadata)]
    return items


def _closes_turn(item: object) -> bool:
    """An assistant message: the model answered, the turn is over."""
    return (isinstance(item, Mapping) and item.get("role") == "assistant"
            and item.get("type") in (None, "message"))


# --- the session ----------------------------------------------------------------------------------


class FermixAgentsSession:
    """An ``agents.memory.Session`` over one fermix conversation.

    Build it from a fermix session (``FermixAgentsSession(memory.session(...))``: its
    ``session_id`` is the conversation's text, e.g. ``"telegram:42"``) or with :meth:`open`
    (the conversation ``openai-agents:<session_id>``). Agent, owner and trust are the fermix
    session's, fixed for the session's life. ``review=False`` leaves out the ``after_turn`` an
    assistant reply triggers (call :meth:`after_turn` yourself, e.g. with the prompt tokens)."""

    def __init__(self, session: Session, *, session_settings: SessionSettings | None = None,
                 review: bool = True) -> None:
        self._session = session
        self.session_id: str = str(session.conversation)
        self.session_settings: SessionSettings | None = session_settings
        self._review = review

    @classmethod
    def open(cls, memory: MemorySystem, session_id: str, *, agent_id: str, owner_id: str,
             trust: TrustName = "guest", channel: str = DEFAULT_CHANNEL, context_window: int | None = None,
             session_settings: SessionSettings | None = None, review: bool = True) -> FermixAgentsSession:
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
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None:
            check_int(limit, "limit", minimum=0)
            if limit == 0:
                return []
        items = [item for m in self._session.history() for item in message_items(m)]
        return items if limit is None else items[-limit:]

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The window's items, oldest first (the newest ``limit`` of them; ``session_settings.limit``
        when ``None`` is given; ``0``: none). A compaction checkpoint leads as a system item."""
        return cast("list[TResponseInputItem]", await run_sync(self._items, limit))

    def _add(self, items: Sequence[object]) -> None:
        if not isinstance(items, list | tuple):
            raise InvalidMessage(f"items must be a list, got {type(items).__name__}")
        records = [item_record(item) for item in items]
        s, at = self._session, datetime.now(UTC)
        for r in records:  # every item checked before the first is recorded
            build_message_event(AppendMessage(
                agent_id=s.agent_id, owner_id=s.owner_id, conversation=s.conversation, role=r.role,
                content=r.content, kind=r.kind, metadata=r.metadata, tool_calls=r.tool_calls,
                tool_call_id=r.tool_call_id), at)
        for item, r in zip(items, records, strict=True):
            # The SDK's own item id, when it has one, makes a retried add_items record it once.
            s.append(r.role.value, r.content, kind=r.kind, metadata=r.metadata, tool_calls=r.tool_calls,
                     tool_call_id=r.tool_call_id, idempotency_key=item_key(item))
        if self._review and items and _closes_turn(items[-1]):
            s.after_turn()

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record ``items`` in order as messages of the conversation; all of them are checked
        first (a bad one is an ``InvalidMessage`` and none is recorded)."""
        await run_sync(self._add, items)

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


__all__ = ["ITEM_KEY", "FermixAgentsSession", "memory_instructions", "memory_tools"]
