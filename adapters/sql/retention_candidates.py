"""Read side of retention (the ``RetentionCandidates`` port, ADR-0080): every conversation with
its newest message and its messages' trusts, and the memory rows a policy or their own expiry
may erase. One statement each, the same SQL on every store."""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import nullcontext
from datetime import datetime

from fermix_memory.adapters.sql.cursor import SqlReader
from fermix_memory.adapters.sql.read_side import Reading, ReadSide
from fermix_memory.domain.retention import ConversationSummary, RowSummary
from fermix_memory.domain.values import ConversationKey

# Times are compared as the text they are stored as: every time this product writes is ISO 8601
# with the same offset (UTC), so the greatest text is the newest time.
_CONVERSATIONS = (
    "SELECT agent_id, channel, chat_id, thread_scope, max(created_at), max(id), min(trust), max(trust)"
    " FROM messages GROUP BY agent_id, channel, chat_id, thread_scope"
)
_ROW_COLUMNS = "id, agent_id, owner_id, category, updated_at"


class SqlRetentionCandidates(ReadSide):
    """Implements ``RetentionCandidates`` on this thread's read connection. ``expiring``: the
    store's rows have their own expiry (``memories.expires_at``)."""

    def __init__(self, connection: Callable[[], SqlReader], reading: Reading = nullcontext, *,
                 expiring: bool = False) -> None:
        super().__init__(connection, reading)
        self._expiring = expiring

    def conversations(self) -> list[ConversationSummary]:
        return [ConversationSummary(agent_id=agent, conversation=ConversationKey(channel, chat, thread),
                                    newest=datetime.fromisoformat(newest), last_message_id=int(last),
                                    trusts=frozenset((low, high)))
                for agent, channel, chat, thread, newest, last, low, high in self._rows(_CONVERSATIONS)]

    def rows(self, categories: Collection[str]) -> list[RowSummary]:
        wanted = sorted(categories)
        where = [f"category IN ({', '.join('?' * len(wanted))})"] if wanted else []
        columns = _ROW_COLUMNS + (", expires_at" if self._expiring else ", NULL")
        if self._expiring:
            where.append("expires_at IS NOT NULL")
        if not where:
            return []
        found = self._rows(f"SELECT {columns} FROM memories WHERE {' OR '.join(where)} ORDER BY id", wanted)
        return [RowSummary(memory_id=int(row[0]), agent_id=row[1], owner_id=row[2], category=row[3],
                           updated_at=datetime.fromisoformat(row[4]),
                           expires_at=None if row[5] is None else datetime.fromisoformat(row[5]))
                for row in found]
