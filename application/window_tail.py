"""The newest messages of a conversation's window, read as such: sliced by the store, never the
whole window read to keep its end (a session of any length costs what its last page costs)."""

from __future__ import annotations

from typing import Protocol

from fermix_memory.application.store_ports import ConversationState
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import INT64_MAX, ConversationKey


class WindowTailQueries(Protocol):
    def conversation_state(self, agent_id: str, conversation: ConversationKey) -> ConversationState: ...

    def messages(
        self, agent_id: str, conversation: ConversationKey, *, after_id: int = 0, limit: int | None = None
    ) -> list[Message]: ...


def newest_in_window(queries: WindowTailQueries, agent_id: str, conversation: ConversationKey, limit: int,
                     most: int | None = None) -> list[Message]:
    """The newest ``limit`` messages of the window the caches hold (``ConversationStore``: the
    messages after the window's start, the newest ``most`` of them when capped, the compaction's
    checkpoint first), oldest first; each message read afresh from the store.

    The checkpoint leads the window whatever its time, so the newest ``limit + 1`` stored messages
    hold the newest ``limit`` of the window but for it; it is among them only when they are the
    whole window."""
    if limit <= 0 or most == 0:
        return []
    want, whole = min(limit, INT64_MAX - 1) + 1, False
    if most is not None and most <= want:  # the capped window holds no more than that
        want, whole = most, True
    state = queries.conversation_state(agent_id, conversation)
    read = queries.messages(agent_id, conversation, after_id=state.window_start_id, limit=want)
    checkpoint = state.checkpoint_message_id
    window = [m for m in read if m.id != checkpoint]
    if whole or len(read) < want:
        window = [m for m in read if m.id == checkpoint] + window
    return window[-limit:]
