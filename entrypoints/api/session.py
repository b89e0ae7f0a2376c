"""The session API: one conversation with one owner, named once (ADR-0017).

::

    s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42", trust="guest")
    s.append("user", "I live in Paris")
    messages = s.compose_prompt(system="You are Ada.")

Every method is the flat :class:`~fermix_memory.MemorySystem` method of the same purpose with
``agent_id``, ``owner_id``, ``conversation`` and ``trust`` filled in; the checks, errors and
results are the flat method's. A session holds no state of its own beyond those values: make
one per turn or keep it, both are cheap, and several may share one memory across threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, overload

from fermix_memory.application.commands import (
    AfterTurn,
    AppendMessage,
    BeforeTurn,
    DispatchTool,
    HandleCommand,
    ModeName,
    Recall,
    RoleName,
    ScopeName,
    SourceName,
    StartSession,
    Style,
    StyleName,
)
from fermix_memory.application.compaction import CompactionResult
from fermix_memory.application.message_input import MAX_METADATA_BYTES
from fermix_memory.application.recall import RecallResult
from fermix_memory.application.reviewer import ReviewResult
from fermix_memory.application.stored_messages import StoredRow
from fermix_memory.application.turns import CommandResult, PreflightResult
from fermix_memory.application.write_at_once import is_brief
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role, Trust
from fermix_memory.entrypoints.api.message_batch import built
from fermix_memory.entrypoints.api.model_bound import model_bound

if TYPE_CHECKING:
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.api.turns import AnthropicPrompt, OpenAIPrompt, Prompt


# The arguments of :meth:`Session.append` (one dict of them per message of ``append_many``).
_APPEND_ARGUMENTS = frozenset({"role", "content", "sender", "kind", "metadata", "created_at", "tool_calls",
                               "tool_call_id", "idempotency_key"})


class Session:
    """Who talks where, bound once; see :meth:`MemorySystem.session`."""

    def __init__(self, memory: MemorySystem, start: StartSession) -> None:
        self._memory = memory
        self._start = start

    @property
    def agent_id(self) -> str:
        return self._start.agent_id

    @property
    def owner_id(self) -> str:
        return self._start.owner_id

    @property
    def conversation(self) -> ConversationKey:
        return self._start.conversation

    @property
    def trust(self) -> Trust:
        return self._start.trust

    def _turn(self) -> dict[str, Any]:
        """The host input every turn command starts from: who talks where (checked once, at start)."""
        start = self._start
        return {"agent_id": start.agent_id, "owner_id": start.owner_id, "conversation": start.conversation}

    def _message(self, role: RoleName, content: str, *, sender: str | None = None, kind: str = "text",
                 metadata: Any = None, created_at: Any = None, tool_calls: Sequence[Mapping[str, Any]] | None = None,
                 tool_call_id: str | None = None, idempotency_key: str | None = None) -> AppendMessage:
        start = self._start
        if sender is None:
            sender = start.owner_id if role == Role.USER else start.agent_id if role == Role.ASSISTANT else ""
        # Every field of the command is checked with the message (as for the flat method).
        return AppendMessage(
            agent_id=start.agent_id, owner_id=start.owner_id, conversation=start.conversation, role=role,
            content=content, sender=sender, kind=kind, trust=start.trust, metadata=metadata, created_at=created_at,
            tool_calls=tool_calls, tool_call_id=tool_call_id, idempotency_key=idempotency_key)

    def append(self, role: RoleName, content: str, *, sender: str | None = None, kind: str = "text",
               metadata: Any = None, created_at: Any = None, tool_calls: Sequence[Mapping[str, Any]] | None = None,
               tool_call_id: str | None = None, idempotency_key: str | None = None) -> int:
        """Record a message of this conversation with the session's trust; returns its id.
        ``sender`` defaults to the owner for a user message, to the agent for a reply.
        ``tool_calls`` (an assistant message's calls), ``tool_call_id`` (the call a
        ``role="tool"`` result answers) and ``idempotency_key`` (the host's own id of the message:
        appended again, it stores nothing and returns the first id) are described at
        :meth:`MemorySystem.append_message`."""
        return self._memory._open_app().append_message(self._message(
            role, content, sender=sender, kind=kind, metadata=metadata, created_at=created_at,
            tool_calls=tool_calls, tool_call_id=tool_call_id, idempotency_key=idempotency_key))

    def append_many(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Several :meth:`append` calls (each a dict of its arguments: ``role``, ``content``,
        ``sender``, ``metadata``, ...) in ONE transaction: every message is checked first, then all
        are recorded or none; their ids, in the order given (see :meth:`MemorySystem.append_messages`)."""
        return self._append_many(messages, MAX_METADATA_BYTES)

    def _append_many(self, messages: Sequence[Mapping[str, Any]], metadata_limit: int) -> list[int]:
        """:meth:`append_many` with another bound on each message's metadata, for an integration
        that keeps a framework's own item there (ADR-0103)."""
        app = self._memory._open_app()
        return app.append_messages(built(messages, _APPEND_ARGUMENTS, ("role", "content"), self._message),
                                   metadata_limit)

    def _appends_at_once(self, *_arguments: Any, **_options: Any) -> bool:
        """Whether a message of this conversation (:meth:`append`'s arguments) may be appended at
        once on an async caller's own thread (ADR-0110)."""
        return self._memory._open_app().appends_at_once(self.agent_id, self.owner_id)

    def _appends_many_at_once(self, messages: object, *_arguments: Any, **_options: Any) -> bool:
        """:meth:`_appends_at_once` for :meth:`append_many`'s ``messages``: a few of them only."""
        return is_brief(messages) and self._appends_at_once()

    def retract_newest(self) -> Message | None:
        """Take back the newest message of the window with the session's trust (see
        :meth:`MemorySystem.retract_newest_message`); ``None`` when the window holds none."""
        return self._memory.retract_newest_message(agent_id=self.agent_id, owner_id=self.owner_id,
                                                   conversation=self.conversation, trust=self.trust)

    def history(self, limit: int | None = None) -> list[Message]:
        """The conversation's current window, oldest first."""
        return self._memory.history(self.agent_id, self.conversation, limit)

    def history_rows(self, limit: int) -> list[StoredRow]:
        """The newest ``limit`` messages of the window as the store's rows (see
        :meth:`MemorySystem.history_rows`)."""
        return self._memory.history_rows(self.agent_id, self.conversation, limit)

    def recall(self, query: str = "", *, scope: ScopeName = "current", source: SourceName = "memories",
               limit: int = 10, key: str | None = None, mode: ModeName | None = None,
               as_of: datetime | str | None = None) -> RecallResult:
        """Memories and/or history this owner may see in this conversation (``mode``, ``as_of``:
        see :meth:`MemorySystem.recall`)."""
        memory = self._memory
        return memory._app.recall(memory._command(Recall, dict(
            self._turn(), query=query, scope=scope, source=source, limit=limit, key=key, mode=mode, as_of=as_of)))

    def _window(self, context_window: int | None) -> int | None:
        """The hook's own ``context_window`` when given, else the session's."""
        return self._start.context_window if context_window is None else context_window

    @model_bound
    def before_turn(self, *, context_window: int | None = None) -> PreflightResult:
        """The preflight hook (see :meth:`MemorySystem.before_turn`); ``context_window`` for this
        call instead of the session's."""
        memory = self._memory
        return memory._app.before_turn(memory._command(BeforeTurn, dict(
            self._turn(), context_window=self._window(context_window))))

    @overload
    def compose_prompt(self, system: str = "", *,
                       style: Literal["openai", Style.OPENAI] = "openai",
                       as_of: datetime | str | None = None) -> OpenAIPrompt: ...

    @overload
    def compose_prompt(self, system: str = "", *,
                       style: Literal["anthropic", Style.ANTHROPIC],
                       as_of: datetime | str | None = None) -> AnthropicPrompt: ...

    @overload
    def compose_prompt(self, system: str = "", *, style: StyleName, as_of: datetime | str | None = None) -> Prompt: ...

    def compose_prompt(self, system: str = "", *, style: StyleName = "openai",
                       as_of: datetime | str | None = None) -> Prompt:
        """One system message (``system`` + memory block + checkpoint) then the window;
        ``style="anthropic"`` returns ``(system, messages)``; ``as_of``: the prompt as it was at
        that moment (see :meth:`MemorySystem.compose_prompt`)."""
        return self._memory.compose_prompt(self.agent_id, self.owner_id, self.conversation, system=system,
                                           style=style, as_of=as_of)

    def after_turn(self, peak_prompt_tokens: int | None = None, *,
                   context_window: int | None = None) -> Future[ReviewResult]:
        """The post-delivery hook (see :meth:`MemorySystem.after_turn`); returns at once.
        ``context_window`` for this call instead of the session's."""
        memory = self._memory
        return memory._app.after_turn(memory._command(AfterTurn, dict(
            self._turn(), peak_prompt_tokens=peak_prompt_tokens, context_window=self._window(context_window))))

    @model_bound
    def handle_command(self, text: str, *, context_window: int | None = None) -> CommandResult | None:
        """``/compact``, ``/new`` or ``/clear`` with the session's trust: a :class:`CommandResult`
        whose ``reply`` goes back to the chat (do not append the text), or ``None`` when ``text``
        is no command (append it and run the turn). ``context_window`` for this call instead of
        the session's."""
        memory = self._memory
        return memory._app.handle_command(memory._command(HandleCommand, dict(
            self._turn(), text=text, trust=self.trust, context_window=self._window(context_window))))

    def compact(self, *, context_window: int | None = None) -> CompactionResult:
        """Compact the conversation now (see :meth:`MemorySystem.compact`), whoever the session's
        trust: the host's own call, as an operator's ``/compact``. ``context_window`` for this call
        instead of the session's."""
        return self._memory.compact(agent_id=self.agent_id, conversation=self.conversation,
                                    context_window=self._window(context_window))

    def dispatch_tool(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run the model's memory tool call with the session's trust; never raises for bad calls."""
        # Every field of the command is checked as the tool's context (application/tools.py).
        return self._memory._open_app().dispatch_tool(DispatchTool(
            name=name, arguments=arguments, **self._turn(), trust=self.trust))

    def __repr__(self) -> str:
        return f"Session(agent_id={self.agent_id!r}, owner_id={self.owner_id!r}, conversation='{self.conversation}')"
