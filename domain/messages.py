"""A stored conversation message."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import attrs

from fermix_memory.domain.values import ConversationKey, Role, Trust


@attrs.frozen(kw_only=True)
class Message:
    """A row of the ``messages`` projection; ``id`` is the position of its event in the log."""

    id: int
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    sender: str
    role: Role
    kind: str
    content: str
    metadata: dict[str, Any] = attrs.field(factory=dict)
    trust: Trust = Trust.GUEST
    created_at: datetime


def is_question(text: str) -> bool:
    """Whether a turn asks something: a question mark ending a sentence ("Where did you grow
    up? You've got an accent." asks too; "page?id=3" does not). Its answer is then usually
    the turn after it."""
    return _QUESTION.search(text) is not None


# A turn asks something only if it holds one of these (a store may pre-filter on them).
QUESTION_MARKS = "?\uff1f"
_QUESTION = re.compile(f"[{QUESTION_MARKS}](?=[!\\s\"')\\]\u00bb\u201d\u2019]|$)")
