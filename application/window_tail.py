"""The newest messages of a conversation's window, read as such: sliced by the store, never the
whole window read to keep its end (a session of any length costs what its last page costs), in
one statement with the window's start and checkpoint."""

from __future__ import annotations

from typing import Protocol

from fermix_memory.application.stored_messages import StoredRow, message_of
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import INT64_MAX, ConversationKey


class WindowTailQueries(Protocol):
    def window_tail(self, agent_id: str, conversation: ConversationKey,
                    limit: int) -> tuple[int | None, list[StoredRow]]: ...


def newest_rows_in_window(queries: WindowTailQueries, agent_id: str, conversation: ConversationKey, limit: int,
                          most: int | None = None) -> list[StoredRow]:
    """The newest ``limit`` messages of the window the caches hold (``ConversationStore``: the
    messages after the window's start, the newest ``most`` of them when capped, the compaction's
    checkpoint first), oldest first, as the store's rows (``application.stored_messages``).

    The checkpoint leads the window whatever its time, so the newest ``limit + 1`` stored messages
    hold the newest ``limit`` of the window but for it; it is among them only when they are the
    whole window."""
    if limit <= 0 or most == 0:
        return []
    want, whole = min(limit, INT64_MAX - 1) + 1, False
    if most is not None and most <= want:  # the capped window holds no more than that
        want, whole = most, True
    checkpoint, read = queries.window_tail(agent_id, conversation, want)
    if checkpoint is None:
        return read[-limit:]
    window = [r for r in read if r.id != checkpoint]
    if whole or len(read) < want:
        window = [r for r in read if r.id == checkpoint] + window
    return window[-limit:]


def newest_in_window(queries: WindowTailQueries, agent_id: str, conversation: ConversationKey, limit: int,
                     most: int | None = None) -> list[Message]:
    """:func:`newest_rows_in_window` as messages, each read afresh from the store."""
    return [message_of(r, agent_id, conversation)
            for r in newest_rows_in_window(queries, agent_id, conversation, limit, most)]
