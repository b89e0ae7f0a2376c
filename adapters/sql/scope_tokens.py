"""Scope tokens: short opaque FTS terms that put a message's agent, owner and conversation
into the full-text index, so a scoped search only ranks the scope's own matches."""

from __future__ import annotations

import functools
import hashlib

from fermix_memory.domain.scopes import HistoryFilter
from fermix_memory.domain.values import ConversationKey


@functools.lru_cache(maxsize=4096)  # the same few scopes are named by every append and search
def _token(prefix: str, *parts: str) -> str:
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=10).hexdigest()
    return f"{prefix}{digest}"


def owner_token(agent_id: str, owner_id: str) -> str:
    return _token("o", agent_id, owner_id)


def conversation_token(agent_id: str, owner_id: str, conversation: ConversationKey) -> str:
    return _token("c", agent_id, owner_id, conversation.scope_id)


def message_scope_tokens(agent_id: str, owner_id: str, conversation: ConversationKey,
                         quoted_owners: tuple[str, ...] = ()) -> str:
    """The tokens of a message; none for one that quotes other owners (a group chat's
    checkpoint): no owner's scoped search can then find it."""
    if quoted_owners:
        return ""
    # ``owner_token`` and ``conversation_token``, written out: every message takes this path.
    return f"{_token('o', agent_id, owner_id)} {_token('c', agent_id, owner_id, conversation.scope_id)}"


def search_scope_token(where: HistoryFilter) -> str:
    """The token a history search is narrowed to: its conversation's, else its owner's."""
    if where.conversation is not None:
        return conversation_token(where.agent_id, where.owner_id, where.conversation)
    return owner_token(where.agent_id, where.owner_id)
