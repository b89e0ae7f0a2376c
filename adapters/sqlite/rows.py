"""Mapping projection rows to domain values (one place, used by reads and by transactions)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fermix_memory.application.ports import ReviewState
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Role, ScopeType, Trust

MEMORY_COLUMNS = (
    "id, agent_id, owner_id, scope_type, scope_id, category, key, value, confidence, promote_target,"
    " source_id, source_type, source_name, source_description, session_id, run_id, source_message_id,"
    " archived_at, archived_by, archive_reason, created_at, updated_at"
)

MESSAGE_COLUMNS = (
    "id, agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind, content, metadata_json,"
    " created_at, trust"
)


def optional_time(value: str | None) -> datetime | None:
    """A stored ISO time, or ``None`` for SQL NULL."""
    return datetime.fromisoformat(value) if value is not None else None


def memory_from_row(row: tuple[Any, ...]) -> Memory:
    created = datetime.fromisoformat(row[20])
    updated = datetime.fromisoformat(row[21])
    return Memory(
        id=row[0],
        agent_id=row[1],
        owner_id=row[2],
        scope_type=ScopeType(row[3]),
        scope_id=row[4],
        category=Category(row[5]),
        key=row[6],
        value=row[7],
        confidence=row[8],
        promote_target=PromoteTarget(row[9]) if row[9] is not None else None,
        source_id=row[10],
        source_type=row[11],
        source_name=row[12],
        source_description=row[13],
        session_id=row[14],
        run_id=row[15],
        source_message_id=row[16],
        archived_at=optional_time(row[17]),
        archived_by=row[18],
        archive_reason=row[19],
        created_at=created,
        updated_at=updated,
    )


def message_from_row(row: tuple[Any, ...]) -> Message:
    return Message(
        id=row[0],
        agent_id=row[1],
        owner_id=row[2],
        conversation=ConversationKey(row[3], row[4], row[5]),
        sender=row[6],
        role=Role(row[7]),
        kind=row[8],
        content=row[9],
        metadata=json.loads(row[10]),
        created_at=datetime.fromisoformat(row[11]),
        trust=Trust(row[12]),
    )


REVIEW_STATE_SQL = (
    "SELECT reviewed_up_to_id, last_review_at, retry_after, claim_id, claim_expires_at, last_skip_reason"
    " FROM review_state WHERE agent_id = ? AND owner_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?"
)


def review_state_key(agent_id: str, owner_id: str, conversation: ConversationKey) -> tuple[str, ...]:
    return (agent_id, owner_id, conversation.channel, conversation.chat_id, conversation.thread_scope)


def review_state_from_row(r: tuple[Any, ...]) -> ReviewState:
    return ReviewState(reviewed_up_to_id=r[0], last_review_at=optional_time(r[1]), retry_after=optional_time(r[2]),
                       claim_id=r[3], claim_expires_at=optional_time(r[4]), last_skip_reason=r[5])
