"""A conversation's messages as the store reads them: one row each, made a ``Message`` only when
something asks for one (a prompt of plain turns needs none; ADR-0040).

A stored row holds only what a ``Message`` held when the store wrote it, in
:data:`STORED_MESSAGE_FIELDS` order; its agent and conversation are the key it was read by.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

import attrs

from fermix_memory.application.message_input import known_conversation_key
from fermix_memory.domain.messages import Message
from fermix_memory.domain.tool_calls import TOOL_CALL_ID_KEY, TOOL_CALLS_KEY
from fermix_memory.domain.values import ConversationKey, Role, Trust


class StoredRow(NamedTuple):
    """One stored message as read by its conversation's key (the columns are its fields)."""

    id: int
    owner_id: str
    sender: str
    role: str
    kind: str
    content: str
    metadata_json: str
    created_at: str
    trust: str


STORED_MESSAGE_FIELDS: tuple[str, ...] = StoredRow._fields
# A read row made a ``StoredRow`` without a call in Python (``StoredRow._make`` checks the length
# too): a window's rows all come this way.
stored_row = cast(Callable[[Iterable[Any]], StoredRow], functools.partial(tuple.__new__, StoredRow))
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


def message_of(row: StoredRow, agent_id: str, conversation: ConversationKey) -> Message:
    """The ``Message`` of one stored row of ``agent_id``'s ``conversation`` (equal to one built by
    ``Message(...)`` from the same values); an unknown role or trust is a ``ValueError``."""
    # Unpacked by the fields' names in one step: every message of a window read comes this way.
    message_id, owner_id, sender, role, kind, content, metadata_json, created_at, trust = row
    return _message(message_id, agent_id, owner_id, conversation, sender, role, kind, content, metadata_json,
                    created_at, trust)


def _message(message_id: int, agent_id: str, owner_id: str, conversation: ConversationKey, sender: str, role: str,
             kind: str, content: str, metadata_json: str, created_at: str, trust: str) -> Message:
    m = _new_message(Message)
    _set_id(m, message_id)
    _set_agent(m, agent_id)
    _set_owner(m, owner_id)
    _set_conversation(m, conversation)
    _set_sender(m, sender)
    _set_role(m, _ROLES.get(role) or Role(role))
    _set_kind(m, kind)
    _set_content(m, content)
    _set_metadata(m, json.loads(metadata_json) if metadata_json != "{}" else {})
    _set_created_at(m, datetime.fromisoformat(created_at))
    _set_trust(m, _TRUSTS.get(trust) or Trust(trust))
    return m


# A message read by anything but its conversation's key (a search's candidates): these columns.
MESSAGE_ROW_FIELDS: tuple[str, ...] = ("id", "agent_id", "owner_id", "channel", "chat_id", "thread_scope", "sender",
                                       "role", "kind", "content", "metadata_json", "created_at", "trust")


def message_of_row(row: Sequence[Any]) -> Message:
    """The ``Message`` of the :data:`MESSAGE_ROW_FIELDS` of one stored row (equal to one built by
    ``Message(...)`` from the same values), read in one step: no row of a conversation's key
    made first (a search makes one of each of its hits)."""
    (message_id, agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind, content, metadata_json,
     created_at, trust) = row
    return _message(message_id, agent_id, owner_id, known_conversation_key(channel, chat_id, thread_scope), sender,
                    role, kind, content, metadata_json, created_at, trust)


def as_message(item: StoredItem, agent_id: str, conversation: ConversationKey) -> Message:
    if type(item) is StoredRow:
        return message_of(item, agent_id, conversation)
    return item  # type: ignore[return-value]  # a Message: a row is never subclassed


def is_row(item: StoredItem) -> bool:
    """Whether ``item`` is still the row the store read (not yet a ``Message``)."""
    return type(item) is StoredRow


def is_plain(row: StoredRow) -> bool:
    """A user's or an assistant's message that records no tool call and answers none: its
    metadata, as the store wrote it (``json.dumps``, which never escapes a letter), does not even
    hold the text ``tool_call`` (so it has neither ``tool_calls`` nor ``tool_call_id``)."""
    role, metadata = row.role, row.metadata_json
    return bool((role == "user" or role == "assistant") and (metadata == "{}" or _TOOL_KEYS not in metadata))


_TOOL_KEYS = "tool_call"  # the common start of TOOL_CALLS_KEY and TOOL_CALL_ID_KEY
if not (TOOL_CALLS_KEY.startswith(_TOOL_KEYS) and TOOL_CALL_ID_KEY.startswith(_TOOL_KEYS)):
    raise RuntimeError("is_plain must look for every tool key")  # pragma: no cover - caught at import


def id_of(item: StoredItem) -> int:
    return item.id


def kind_of(item: StoredItem) -> str:
    return item.kind


def order_of(item: StoredItem) -> tuple[datetime, int]:
    """Where a message sits in its window: by ``(created_at, id)``."""
    if type(item) is StoredRow:
        return datetime.fromisoformat(item.created_at), item.id
    return item.created_at, item.id  # type: ignore[return-value]
