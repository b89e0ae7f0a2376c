"""A conversation's messages as the store reads them: one row each, made a ``Message`` only when
something asks for one (a prompt of plain turns needs none; ADR-0040).

A stored row holds only what a ``Message`` held when the store wrote it, in
:data:`STORED_MESSAGE_FIELDS` order; its agent and conversation are the key it was read by.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs

from fermix_memory.domain.messages import Message
from fermix_memory.domain.tool_calls import TOOL_CALL_ID_KEY, TOOL_CALLS_KEY
from fermix_memory.domain.values import ConversationKey, Role, Trust

STORED_MESSAGE_FIELDS: tuple[str, ...] = ("id", "owner_id", "sender", "role", "kind", "content", "metadata_json",
                                          "created_at", "trust")
StoredRow = tuple[Any, ...]
StoredItem = Message | StoredRow  # a window in a cache holds both: rows as read, messages since committed

_ROLES = {role.value: role for role in Role}
_TRUSTS = {trust.value: trust for trust in Trust}

# ``Message`` has no validators or converters: a row becomes a ``Message`` through its slots,
# without the keyword call of the generated ``__init__`` (ADR-0036).
_SLOTS = ("id", "agent_id", "owner_id", "conversation", "sender", "role", "kind", "content", "metadata",
          "created_at", "trust")
if set(_SLOTS) != {field.name for field in attrs.fields(Message)}:  # pragma: no cover - caught at import
    raise RuntimeError("message_of must set every field of Message")
(_set_id, _set_agent, _set_owner, _set_conversation, _set_sender, _set_role, _set_kind, _set_content, _set_metadata,
 _set_created_at, _set_trust) = (Message.__dict__[name].__set__ for name in _SLOTS)
_new_message = object.__new__


def message_of(row: Sequence[Any], agent_id: str, conversation: ConversationKey) -> Message:
    """The ``Message`` of one stored row of ``agent_id``'s ``conversation`` (equal to one built by
    ``Message(...)`` from the same values); an unknown role or trust is a ``ValueError``."""
    m = _new_message(Message)
    _set_id(m, row[0])
    _set_agent(m, agent_id)
    _set_owner(m, row[1])
    _set_conversation(m, conversation)
    _set_sender(m, row[2])
    _set_role(m, _ROLES.get(row[3]) or Role(row[3]))
    _set_kind(m, row[4])
    _set_content(m, row[5])
    _set_metadata(m, json.loads(row[6]) if row[6] != "{}" else {})
    _set_created_at(m, datetime.fromisoformat(row[7]))
    _set_trust(m, _TRUSTS.get(row[8]) or Trust(row[8]))
    return m


def as_message(item: StoredItem, agent_id: str, conversation: ConversationKey) -> Message:
    return message_of(item, agent_id, conversation) if type(item) is tuple else item  # type: ignore[return-value]


def is_plain(row: StoredRow) -> bool:
    """A user's or an assistant's message that records no tool call and answers none: its
    metadata, as the store wrote it (``json.dumps``, which never escapes a letter), does not even
    hold the text ``tool_call`` (so it has neither ``tool_calls`` nor ``tool_call_id``)."""
    return bool((row[3] == "user" or row[3] == "assistant") and (row[6] == "{}" or _TOOL_KEYS not in row[6]))


_TOOL_KEYS = "tool_call"  # the common start of TOOL_CALLS_KEY and TOOL_CALL_ID_KEY
if not (TOOL_CALLS_KEY.startswith(_TOOL_KEYS) and TOOL_CALL_ID_KEY.startswith(_TOOL_KEYS)):
    raise RuntimeError("is_plain must look for every tool key")  # pragma: no cover - caught at import


def id_of(item: StoredItem) -> int:
    return item[0] if type(item) is tuple else item.id  # type: ignore[union-attr]


def kind_of(item: StoredItem) -> str:
    return item[4] if type(item) is tuple else item.kind  # type: ignore[union-attr]


def order_of(item: StoredItem) -> tuple[datetime, int]:
    """Where a message sits in its window: by ``(created_at, id)``."""
    if type(item) is tuple:
        return datetime.fromisoformat(item[7]), item[0]
    return item.created_at, item.id  # type: ignore[union-attr]
