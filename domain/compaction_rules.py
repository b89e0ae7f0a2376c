"""Compaction's decisions (R-COMPACT) over a conversation's frozen window state.

Pure: the messages of the window and their token counts, the time and the settings are passed
in. :func:`due_reason` says whether compaction is due (peak against threshold, back-off),
:func:`plan_compaction` which messages one checkpoint replaces within a budget and whose words,
with which trust, that checkpoint holds (``domain/checkpoint.py``); :func:`decide_compacted`
and :func:`decide_failure` return the events that record the outcome. The application only
loads, asks the model for the summary and appends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.checkpoint import CheckpointSources, checkpoint_sources
from fermix_memory.domain.conversation_window import ConversationWindow
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role

MESSAGE_OVERHEAD_TOKENS = 4  # role and separators per chat message
MAX_STORED_ERROR_CHARS = 1000
MIN_SUMMARY_TOKENS = 256
MAX_SUMMARY_TOKENS = 4096


def message_cost(content_tokens: int) -> int:
    """What one message costs in a prompt: its content and the chat format around it."""
    return content_tokens + MESSAGE_OVERHEAD_TOKENS


def token_budget(ratio: float, context_window: int) -> int:
    """The tokens the window may hold after a compaction (``ratio`` of the context window)."""
    return int(ratio * context_window)


def summary_max_tokens(budget: int) -> int:
    """The longest summary to ask for: a quarter of the budget, within sensible bounds."""
    return max(MIN_SUMMARY_TOKENS, min(MAX_SUMMARY_TOKENS, budget // 4))


# --- is it due? ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CheckDue:
    """The measurements and settings that decide whether a conversation is compacted now."""

    at: datetime
    enabled: bool
    peak_prompt_tokens: int | None  # the last turn's peak (None: not measured in this process)
    threshold: float
    context_window: int


def measured_reason(cmd: CheckDue) -> str:
    """Why the measurements alone rule compaction out (``""``: the window state decides)."""
    if not cmd.enabled:
        return "disabled"
    if cmd.peak_prompt_tokens is None:
        return "not_measured"
    if cmd.peak_prompt_tokens < cmd.threshold * cmd.context_window:
        return "under_threshold"
    return ""


def due_reason(state: ConversationWindow, cmd: CheckDue) -> str:
    """Why compaction is not due now (``""``: it is)."""
    if reason := measured_reason(cmd):
        return reason
    if state.compaction_retry_after is not None and cmd.at < state.compaction_retry_after:
        return "backoff"
    return ""


def is_due(state: ConversationWindow, cmd: CheckDue) -> bool:
    return not due_reason(state, cmd)


# --- what to replace --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PlanCompaction:
    """The window (checkpoint first), each message's content tokens, and the budget to fit."""

    messages: tuple[Message, ...]
    content_tokens: tuple[int, ...]
    budget: int

    def __attrs_post_init__(self) -> None:
        if len(self.messages) != len(self.content_tokens):
            raise ValueError("one token count per message is needed")


@attrs.frozen(kw_only=True)
class CompactionPlan:
    """The messages one checkpoint replaces (``older``), those kept after it, and the costs."""

    older: tuple[Message, ...]
    kept: tuple[Message, ...]
    tokens_before: int
    kept_tokens: int

    @property
    def empty(self) -> bool:
        return not self.older

    @property
    def up_to(self) -> int:
        """The newest replaced message id: the window starts after it (the checkpoint first)."""
        return max(m.id for m in self.older)

    @property
    def sources(self) -> CheckpointSources:
        """The checkpoint's owner, quoted owners and trust (``domain/checkpoint.py``)."""
        return checkpoint_sources(self.older)

    def checkpoint_metadata(self) -> dict[str, Any]:
        return {"replaces_up_to": self.up_to, "replaced": len(self.older), **self.sources.metadata()}

    def tokens_after(self, summary_tokens: int) -> int:
        return self.kept_tokens + message_cost(summary_tokens)


def plan_compaction(state: ConversationWindow, cmd: PlanCompaction) -> CompactionPlan:
    """Keep the newest messages within half the budget (the summary gets the rest); at least one
    message is replaced when the window has two or more, and tool results are never kept without
    the message before them (their call). Messages the window already left (at
    or before ``state.window_start_id``) are never replaced again."""
    pairs = [(m, message_cost(t)) for m, t in zip(cmd.messages, cmd.content_tokens, strict=True)
             if m.id > state.window_start_id]
    before = sum(cost for _, cost in pairs)
    keep_budget = cmd.budget // 2
    kept = 0
    used = 0
    for _, cost in reversed(pairs):
        if used + cost > keep_budget or kept == len(pairs) - 1:
            break
        kept += 1
        used += cost
    # A tool result is not kept without the call it answers: results at the head of what is
    # kept join the summary with their call (the prompt could only show them as loose text).
    while kept and pairs[len(pairs) - kept][0].role is Role.TOOL:
        kept -= 1
    older = pairs[: len(pairs) - kept]
    if not older:
        return CompactionPlan(older=(), kept=tuple(m for m, _ in pairs), tokens_before=before, kept_tokens=used)
    # The window is "every message after the replaced ids, checkpoint first", so whatever is
    # replaced must be every window message up to the newest replaced id: a previous
    # checkpoint (newer id than the messages kept beside it) pulls those into the summary.
    up_to = max(m.id for m, _ in older)
    after = [(m, cost) for m, cost in pairs if m.id > up_to]
    return CompactionPlan(older=tuple(m for m, _ in pairs if m.id <= up_to), kept=tuple(m for m, _ in after),
                          tokens_before=before, kept_tokens=sum(cost for _, cost in after))


# --- the outcome ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RecordCompaction:
    """The summary of ``plan`` was appended as message ``checkpoint_message_id``."""

    at: datetime
    agent_id: str
    conversation: ConversationKey
    plan: CompactionPlan
    checkpoint_message_id: int
    summary_tokens: int


def decide_compacted(state: ConversationWindow, cmd: RecordCompaction) -> list[ev.DomainEvent]:
    plan = cmd.plan
    if plan.empty:
        return []  # nothing replaced: the window stays as it is
    return [ev.HistoryCompacted(
        at=cmd.at, agent_id=cmd.agent_id, conversation=cmd.conversation, up_to_message_id=plan.up_to,
        checkpoint_message_id=cmd.checkpoint_message_id, replaced_count=len(plan.older),
        tokens_before=plan.tokens_before, tokens_after=plan.tokens_after(cmd.summary_tokens),
        provenance=ev.Provenance(agent_id=cmd.agent_id, owner_id=plan.sources.owner_id, source_type="compactor",
                                 reason="context window"))]


@attrs.frozen(kw_only=True)
class FailCompaction:
    """The summary could not be made: hold further attempts back for ``backoff``."""

    at: datetime
    agent_id: str
    conversation: ConversationKey
    error: str
    backoff: timedelta


def decide_failure(state: ConversationWindow, cmd: FailCompaction) -> list[ev.DomainEvent]:
    return [ev.CompactionFailed(at=cmd.at, agent_id=cmd.agent_id, conversation=cmd.conversation,
                                error=cmd.error[:MAX_STORED_ERROR_CHARS], retry_after=cmd.at + cmd.backoff)]


def window_tokens(content_tokens: Sequence[int]) -> int:
    """What a window of messages with these content token counts costs in a prompt."""
    return sum(message_cost(t) for t in content_tokens)
