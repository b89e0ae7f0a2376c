"""Turn lifecycle for hosts: the preflight hook, the post-delivery hook and chat commands.

Each use case takes its command (application/commands.py), already checked.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import Future

import attrs

from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.commands import AfterTurn, BeforeTurn, HandleCommand
from fermix_memory.application.compaction import Compactor
from fermix_memory.application.history import HistoryService
from fermix_memory.application.review_queue import queue_review
from fermix_memory.application.reviewer import Reviewer, ReviewResult
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.values import ConversationKey, Trust

log = logging.getLogger("fermix_memory.compaction")

COMMANDS = ("/compact", "/new", "/clear")
_COMMAND = re.compile(r"^\s*(/[A-Za-z]+)(?:@\S+)?(?:\s|$)")


@attrs.frozen(kw_only=True)
class PreflightResult:
    compacted: bool = False
    notice: str | None = None
    reason: str = ""


@attrs.frozen(kw_only=True)
class CommandResult:
    """The outcome of a chat command: ``reply`` is the text to send back to the chat."""

    command: str
    ok: bool
    reply: str


def parse_command(text: object) -> str | None:
    """``/compact``, ``/new`` or ``/clear`` (also ``/clear@botname``) at the start of ``text``."""
    if not isinstance(text, str):
        return None
    match = _COMMAND.match(text[:200])
    if match is None:
        return None
    command = match.group(1).lower()
    return command if command in COMMANDS else None


def _compaction_left(agent_id: str, conversation: ConversationKey) -> None:
    # Nothing to record: the peak that made it due is measured again by the next turn's hooks.
    log.warning("the compaction of %s %s was queued but the memory closed before it ran: the next turn's"
                " after_turn queues it again", agent_id, conversation)


class TurnService:
    def __init__(self, compactor: Compactor, history: HistoryService) -> None:
        self._compactor = compactor
        self._history = history

    def before_turn(self, cmd: BeforeTurn) -> PreflightResult:
        """Preflight: compact before the turn when the previous turn's peak crossed the threshold.

        Nothing is measured yet on a cold turn, so it returns at once; the post-delivery pass
        catches up. Usually the background pass has already compacted, and this is a no-op.
        """
        result = self._compactor.compact_if_due(cmd.agent_id, cmd.conversation, context_window=cmd.context_window,
                                                notice=True)
        if result is None:
            return PreflightResult()
        return PreflightResult(compacted=result.status == "compacted", notice=result.notice, reason=result.reason)

    def after_turn(self, cmd: AfterTurn, reviewer: Reviewer, background: BackgroundWorker) -> Future[ReviewResult]:
        """Post-delivery: record the peak prompt tokens, queue compaction if they crossed the
        threshold, and queue the time-gated review; all in the background, returns at once."""
        agent_id, key, window = cmd.agent_id, cmd.conversation, cmd.context_window
        compactor = self._compactor
        if cmd.peak_prompt_tokens is not None:
            compactor.record_peak(agent_id, key, cmd.peak_prompt_tokens)
            if compactor.due(agent_id, key, context_window=window):
                background.submit(("compact", agent_id, key),
                                  lambda: compactor.compact_if_due(agent_id, key, context_window=window),
                                  on_drop=lambda: _compaction_left(agent_id, key))
        return queue_review(background, reviewer, agent_id, cmd.owner_id, key)

    def handle_command(self, cmd: HandleCommand) -> CommandResult | None:
        """Run a chat command; ``None`` when ``text`` is not one. All of them are operator-only."""
        command = parse_command(cmd.text)
        if command is None:
            return None
        if cmd.trust is not Trust.OPERATOR:
            return CommandResult(command=command, ok=False,
                                 reply=f"Sorry, only the operator can use {command}. Nothing was changed.")
        agent_id, conversation = cmd.agent_id, cmd.conversation
        if command in ("/new", "/clear"):
            self._history.clear_window(agent_id, conversation, Provenance(
                agent_id=agent_id, owner_id=cmd.owner_id, trust=cmd.trust, source_type="chat_command",
                reason=command))
            return CommandResult(command=command, ok=True,
                                 reply="Started a fresh conversation window. Long-term memory is kept.")
        result = self._compactor.compact(agent_id, conversation, context_window=cmd.context_window)
        if result.status == "compacted":
            return CommandResult(command=command, ok=True,
                                 reply=f"Summarised {result.replaced} older messages into a checkpoint.")
        if result.reason == "nothing_to_compact":
            return CommandResult(command=command, ok=True, reply="Nothing to compact yet.")
        return CommandResult(command=command, ok=False, reply="Compaction failed; older history is unchanged.")
