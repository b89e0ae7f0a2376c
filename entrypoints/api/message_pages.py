"""One page of a conversation's stored messages, its arguments checked: what
``MemorySystem.message_page`` and the read-only commands' reader (ADR-0063) both answer."""

from __future__ import annotations

from typing import Any

from fermix_memory.application.errors import NotFound
from fermix_memory.application.message_input import conversation_key
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import INT64_MAX, check_identifier, check_int


def message_page(queries: Any, agent_id: str, conversation: Any, *, limit: int, before_id: int | None,
                 after_id: int | None, page: int, owner_id: str | None) -> list[Message]:
    """The page ``queries`` holds (see ``MemorySystem.message_page``); a cursor must be a message
    of the conversation (``NotFound``)."""
    check_identifier(agent_id, "agent_id")
    key = conversation_key(conversation)
    limit, page = check_int(limit, "limit", minimum=0), check_int(page, "page", minimum=1)
    given = [name for name, v in (("before_id", before_id), ("after_id", after_id)) if v is not None]
    if len(given) + (page != 1) > 1:
        raise InvalidArgument("give at most one of before_id, after_id and page")
    for name, cursor in (("before_id", before_id), ("after_id", after_id)):
        if cursor is not None:
            found = queries.message(check_int(cursor, name, minimum=1))
            if found is None or found.agent_id != agent_id or found.conversation != key:
                raise NotFound(f"message {cursor} is not in {agent_id}'s conversation {key}")
    if owner_id is not None:
        check_identifier(owner_id, "owner_id")
    messages: list[Message] = queries.message_page(agent_id, key, limit=limit, before_id=before_id,
                                                   after_id=after_id, skip=min((page - 1) * limit, INT64_MAX),
                                                   owner_id=owner_id)
    return messages
