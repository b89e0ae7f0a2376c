"""The embedding API, part two: the turn hooks, chat commands, memory tools and the prompt."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from typing import Any, Literal, TypeAlias, overload

from fermix_memory.application.as_of import check_moment
from fermix_memory.application.commands import (
    AfterTurn,
    AppendMessage,
    BeforeTurn,
    DispatchTool,
    HandleCommand,
    Style,
    StyleName,
    TrustName,
)
from fermix_memory.application.compaction import CompactionResult
from fermix_memory.application.errors import BackgroundTimeout
from fermix_memory.application.message_input import InvalidMessage, conversation_key, parse_enum
from fermix_memory.application.reviewer import ReviewResult
from fermix_memory.application.store_ports import ConversationState
from fermix_memory.application.tools import anthropic_tool_definitions, openai_tool_definitions
from fermix_memory.application.turns import CommandResult, PreflightResult
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.values import ConversationKey, Role, Trust, check_identifier, check_int
from fermix_memory.entrypoints.api.base import ApiBase, check_owner, optional_id
from fermix_memory.entrypoints.api.model_bound import model_bound


def optional_count(value: object) -> int | None:
    return None if value is None else check_int(value, "context_window", minimum=1)


MAX_WAIT_S = 86_400.0  # longer is a host bug (and past threading.TIMEOUT_MAX, an OverflowError)
OpenAIPrompt: TypeAlias = list[dict[str, Any]]  # the system message, then the window's messages
AnthropicPrompt: TypeAlias = tuple[str, list[dict[str, Any]]]  # (system, messages)
Prompt: TypeAlias = OpenAIPrompt | AnthropicPrompt


Definitions: TypeAlias = Callable[..., list[dict[str, Any]]]


class ToolDefinitions:
    """``tool_definitions(style="openai")``: the memory tools' JSON-Schema definitions in OpenAI
    (``"openai"``) or Anthropic (``"anthropic"``) form. Called on the class, ``memory_store``,
    ``memory_recall`` and ``memory_sources_list``; on an open memory, also ``memory_forget`` when
    its settings enable it (``[fermix_core.memory] forget_tool``)."""

    def __get__(self, obj: Any, owner: type | None = None) -> Definitions:
        forget = obj is not None and obj.settings.memory.forget_tool != "off"

        def tool_definitions(style: StyleName = "openai") -> list[dict[str, Any]]:
            """The memory tools' definitions in OpenAI (``"openai"``) or Anthropic (``"anthropic"``)
            form; ``memory_forget`` among them when this memory's settings enable it."""
            if parse_enum(Style, style, "style") is Style.ANTHROPIC:
                return anthropic_tool_definitions(forget=forget)
            return openai_tool_definitions(forget=forget)

        return tool_definitions


class TurnsApi(ApiBase):
    """What a host calls around each turn of a conversation."""

    @model_bound
    def before_turn(self, *, agent_id: str, owner_id: str, conversation: Any,
                    context_window: int | None = None) -> PreflightResult:
        """Preflight hook, before a turn: compacts only if the previous turn's peak prompt tokens
        crossed the threshold and the background pass has not compacted yet. Returns at once
        otherwise (nothing is measured on a cold turn). ``notice`` is the text to show the chat."""
        return self._app.before_turn(self._command(BeforeTurn, dict(
            agent_id=agent_id, owner_id=owner_id, conversation=conversation, context_window=context_window)))

    def after_turn(self, *, agent_id: str, owner_id: str, conversation: Any,
                   peak_prompt_tokens: int | None = None, context_window: int | None = None) -> Future[ReviewResult]:
        """Post-delivery hook, after a reply was delivered: records the provider-reported peak
        prompt tokens, queues compaction if they crossed the threshold, and starts the
        time-gated reviewer, all in the background; returns at once. A failing review or
        compaction never raises here (the returned future carries the review's outcome)."""
        return self._app.after_turn(self._command(AfterTurn, dict(
            agent_id=agent_id, owner_id=owner_id, conversation=conversation, peak_prompt_tokens=peak_prompt_tokens,
            context_window=context_window)))

    def wait_for_background(self, timeout: float | None = None) -> None:
        """Block until the background is idle (tests, orderly shutdown): the work queued so far is
        done, and so is the work it queued in turn, or anything queued meanwhile (a long index
        merge, or the vectors of a large import, go on in jobs that queue one another); then the
        database's log is checkpointed into its file. ``timeout`` bounds the whole wait."""
        self._check_open()
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                    or not 0 <= timeout <= MAX_WAIT_S):
            raise InvalidArgument(f"timeout must be None or a number of seconds from 0 to {MAX_WAIT_S}")
        background = self._app.background
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                background.submit(("barrier", object()), lambda: None).result(left)
                if background.idle():
                    break
            # The log's checkpoint, which waits for a pause, runs now: the host pauses.
            if not self._app.store.settle(None if deadline is None else max(0.0, deadline - time.monotonic())):
                raise TimeoutError
        except TimeoutError:
            raise BackgroundTimeout(f"background work still running after {timeout} s") from None

    @model_bound
    def handle_command(self, text: str, *, agent_id: str, owner_id: str, conversation: Any,
                       trust: TrustName = "guest", context_window: int | None = None) -> CommandResult | None:
        """Run ``/compact``, ``/new`` or ``/clear`` (operator only; a guest gets a refusal and
        nothing changes). Returns a :class:`CommandResult` (``reply`` is the text to send back to
        the chat; the text is a command, do not append it), or ``None`` when ``text`` is not a
        chat command (append it and run the turn)."""
        return self._app.handle_command(self._command(HandleCommand, dict(
            text=text, agent_id=agent_id, owner_id=owner_id, conversation=conversation, trust=trust,
            context_window=context_window)))

    @model_bound
    def compact(self, *, agent_id: str, conversation: Any, context_window: int | None = None) -> CompactionResult:
        """Compact the conversation's window now (what ``/compact`` does)."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        return self._app.compactor.compact(agent_id, conversation_key(conversation),
                                           context_window=optional_count(context_window))

    def record_transcript(self, *, agent_id: str, owner_id: str, device_id: str,
                          role: Literal["user", "assistant", Role.USER, Role.ASSISTANT], text: str,
                          trust: TrustName = "guest") -> int | None:
        """Store a FINAL realtime voice transcript as a ``voice_turn`` message of the device's
        ``realtime`` conversation, when ``persist_transcripts`` is on; ``None`` when it is off.
        Anyone may speak to a device, so a transcript is a guest's words unless the host knows
        the device's speaker is the operator and passes ``trust="operator"``."""
        self._check_open()
        parse_enum(Trust, trust, "trust")  # checked even when transcripts are not kept
        if parse_enum(Role, role, "role") not in (Role.USER, Role.ASSISTANT):
            raise InvalidMessage("a transcript's role must be user or assistant")
        if not self._app.settings.realtime.persist_transcripts:
            return None
        return self._app.history.append(AppendMessage(
            agent_id=agent_id, owner_id=owner_id, conversation=ConversationKey("realtime", device_id), role=role,
            content=text, sender=owner_id if role == "user" else agent_id, kind="voice_turn", trust=trust,
            metadata={"source_type": "realtime"}))

    def reviewed_up_to(self, *, agent_id: str, owner_id: str, conversation: Any) -> int:
        """The id of the last message of this owner a completed review covered (0: never)."""
        self._check_open()
        check_owner(agent_id, owner_id)
        return self._app.reviewer.reviewed_up_to(agent_id, owner_id, conversation_key(conversation))

    def awaiting_review(self, *, agent_id: str | None = None,
                        owner_id: str | None = None) -> list[tuple[str, str, ConversationKey]]:
        """Every ``(agent_id, owner_id, conversation)`` with user messages no review covered yet."""
        self._check_open()
        return self._app.queries.conversations_with_unreviewed(agent_id=optional_id(agent_id, "agent_id"),
                                                               owner_id=optional_id(owner_id, "owner_id"))

    def conversation_state(self, *, agent_id: str, conversation: Any) -> ConversationState:
        """Where the conversation's window starts, its checkpoint, and when compaction may be
        retried after a failure (``compaction_retry_after``)."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        return self._app.queries.conversation_state(agent_id, conversation_key(conversation))

    @model_bound
    def review_now(self, *, agent_id: str | None = None, owner_id: str | None = None,
                   conversation: Any = None) -> list[ReviewResult]:
        """Review now (past the interval and back-off gates) every matching conversation with
        new user messages; runs in the calling thread and returns one result per conversation."""
        self._check_open()
        key = conversation_key(conversation) if conversation is not None else None
        agent_id, owner_id = optional_id(agent_id, "agent_id"), optional_id(owner_id, "owner_id")
        targets = self._app.queries.conversations_with_unreviewed(agent_id=agent_id, owner_id=owner_id,
                                                                  conversation=key)
        return [self._app.reviewer.review(a, o, c, now=True) for a, o, c in targets]

    @overload
    def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                       style: Literal["openai", Style.OPENAI] = "openai",
                       as_of: datetime | str | None = None) -> OpenAIPrompt: ...

    @overload
    def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                       style: Literal["anthropic", Style.ANTHROPIC],
                       as_of: datetime | str | None = None) -> AnthropicPrompt: ...

    @overload
    def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                       style: StyleName, as_of: datetime | str | None = None) -> Prompt: ...

    def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any, *, system: str = "",
                       style: StyleName = "openai", as_of: datetime | str | None = None) -> Prompt:
        """The prompt of a turn: ONE system message (``system``, the host's own system prompt, then
        the memory-context block, then any checkpoint), followed by the conversation window, which
        never starts with an orphan assistant reply. ``style="openai"`` gives
        ``[{"role": "system", ...}, …]``; ``style="anthropic"`` gives ``(system, messages)``. Either
        is a request its API accepts: tool calls and results paired by id in the API's own form,
        no empty message, the sender named when several people write (ADR-0022).

        ``as_of`` (a timezone-aware datetime or ISO 8601 text): the prompt as it was composed at
        that moment, its prompt files and window folded from the log (ADR-0033); it writes
        nothing. A time without a zone or in the future is :class:`InvalidArgument`."""
        cmd = self._compose_command(agent_id, owner_id, conversation, system, style)
        moment = None if as_of is None else check_moment(as_of, self._app.clock.now())
        return self._app.compose_prompt(cmd, as_of=moment)

    tool_definitions = ToolDefinitions()

    def dispatch_tool(self, name: str, arguments: Any, *, agent_id: str, owner_id: str, trust: TrustName = "guest",
                      conversation: Any = None, job_source_id: str | None = None, session_id: str = "",
                      run_id: str = "", source_message_id: int | None = None) -> dict[str, Any]:
        """Run a memory tool call for the model. Bad calls come back as ``{"ok": false, "error",
        "code"}``, never as an exception; a job run (``job_source_id``) only ever sees its own rows."""
        return self._app.dispatch_tool(self._command(DispatchTool, dict(
            name=name, arguments=arguments, agent_id=agent_id, owner_id=owner_id, trust=trust,
            conversation=conversation, job_source_id=job_source_id, session_id=session_id, run_id=run_id,
            source_message_id=source_message_id)))
