"""Use case: compose the messages of a turn (R-FENCE): memory block first, then the window."""

from __future__ import annotations

from collections.abc import Callable

from fermix_memory.application.ports import ChatMessage, ResourceRevision
from fermix_memory.domain.checkpoint import is_checkpoint
from fermix_memory.domain.fence import as_summary_block, memory_context_block
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey

RevisionReader = Callable[[str, str, str], ResourceRevision | None]
WindowReader = Callable[[str, ConversationKey], list[Message]]


def compose_prompt(
    revision: RevisionReader,
    window: WindowReader,
    agent_id: str,
    owner_id: str,
    conversation: ConversationKey,
) -> list[ChatMessage]:
    """The system message holding this owner's prompt files inside one ``<memory-context>``
    fence (labelled as background data, not user input), followed by the conversation window.

    The files' content comes from their current revision in the log, so what the model sees
    is exactly what ``fermix resource show`` shows. A compaction checkpoint is always inside
    its ``<conversation-summary>`` fence (one written before checkpoints were fenced gets it here).
    """
    user = revision(agent_id, owner_id, "user_md")
    memory = revision(agent_id, owner_id, "memory_md")
    block = memory_context_block(user.content if user else "", memory.content if memory else "")
    messages = [ChatMessage(role="system", content=block)] if block else []
    for m in window(agent_id, conversation):
        messages.append(ChatMessage(role=m.role.value,
                                    content=as_summary_block(m.content) if is_checkpoint(m) else m.content))
    return messages
