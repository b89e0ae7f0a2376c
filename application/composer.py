"""Use case: compose the messages of a turn (R-FENCE): one system message, then the window.

The system message holds, in order: the host's own system prompt, this owner's prompt files
inside one ``<memory-context>`` fence, then every system message of the window (a compaction
checkpoint always inside its ``<conversation-summary>`` fence). The window follows without
system messages, and never starts with an assistant reply whose question was compacted away
(an orphan): such a reply joins the summary before it (inside its fence), so nothing the model
said is lost and providers that want a user message first get one (ADR-0017).
"""

from __future__ import annotations

from collections.abc import Callable

from fermix_memory.application.ports import ChatMessage, ResourceRevision
from fermix_memory.domain.checkpoint import is_checkpoint
from fermix_memory.domain.fence import (
    SUMMARY_CLOSE_TAG,
    as_summary_block,
    conversation_summary_block,
    escape_fence,
    memory_context_block,
)
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role

RevisionReader = Callable[[str, str, str], ResourceRevision | None]
WindowReader = Callable[[str, ConversationKey], list[Message]]


def compose_prompt(
    revision: RevisionReader,
    window: WindowReader,
    agent_id: str,
    owner_id: str,
    conversation: ConversationKey,
    *,
    system: str = "",
) -> list[ChatMessage]:
    """``[system message, …window]``: the system message (absent only when there is nothing
    to put in it) followed by the window's user and assistant messages, oldest first.

    The files' content comes from their current revision in the log, so what the model sees
    is exactly what ``fermix resource show`` shows.
    """
    user = revision(agent_id, owner_id, "user_md")
    memory = revision(agent_id, owner_id, "memory_md")
    parts = [system.strip(), memory_context_block(user.content if user else "", memory.content if memory else "")]
    turns: list[ChatMessage] = []
    for m in window(agent_id, conversation):
        if m.role is Role.SYSTEM:
            parts.append(as_summary_block(m.content) if is_checkpoint(m) else m.content)
        elif m.role is Role.ASSISTANT and not turns:  # an orphan reply: its question was compacted away
            parts[-1] = _with_reply(parts[-1], m.content) if parts[-1].endswith(_SUMMARY_TAIL) \
                else conversation_summary_block(f"- assistant: {m.content}")
        else:
            turns.append(ChatMessage(role=m.role.value, content=m.content))
    text = "\n\n".join(p for p in parts if p)
    return ([ChatMessage(role="system", content=text)] if text else []) + turns


_SUMMARY_TAIL = f"\n{SUMMARY_CLOSE_TAG}"


def _with_reply(block: str, reply: str) -> str:
    """The summary block with the reply that followed it inside, so one fence holds both."""
    return f"{block[:-len(_SUMMARY_TAIL)]}\n- assistant: {escape_fence(reply.strip())}{_SUMMARY_TAIL}"


def as_openai(messages: list[ChatMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def as_anthropic(messages: list[ChatMessage]) -> tuple[str, list[dict[str, str]]]:
    """Anthropic's shape: the system prompt apart, then the user/assistant messages."""
    system = messages[0].content if messages and messages[0].role == "system" else ""
    return system, as_openai([m for m in messages if m.role != "system"])
