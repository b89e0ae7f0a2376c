"""A stored message row becomes the very ``Message`` that was written: the row path sets the
slots directly (no keyword ``__init__``), so it is checked here against the constructor, for
every role, trust, kind, metadata and conversation shape a row can hold."""

from __future__ import annotations

import itertools
import json
from datetime import datetime

import attrs
import pytest

from fermix_memory.adapters.sql.rows import (
    CONVERSATION_MESSAGE_FIELDS,
    MESSAGE_FIELDS,
    conversation_message_from_row,
    message_from_row,
)
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role, Trust

METADATA = [{}, {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": "{}"}]}, {"tool_call_id": "c1"},
            {"nested": {"a": [1, 2.5, None, True]}, "café": "中文 🚀"}]
CONVERSATIONS = [("telegram", "1", ""), ("slack", "C:42", "thread:7"), ("cli", "x%y", "")]
KINDS = ["text", "checkpoint", "note"]
TIMES = ["2026-01-02T03:04:05+00:00", "2026-01-02T03:04:05.123456+00:00", "2025-06-30T23:59:59.000001+02:00"]


def rows() -> list[tuple[object, ...]]:
    out = []
    for n, (role, trust, metadata, conversation, kind, created) in enumerate(
            itertools.product(Role, Trust, METADATA, CONVERSATIONS, KINDS, TIMES), start=1):
        out.append((n, "ada", "alice", *conversation, "" if n % 5 == 0 else "bob", role.value, kind,
                    f"content {n}" if n % 7 else "", json.dumps(metadata) if metadata else "{}", created,
                    trust.value))
    return out


def constructed(row: tuple[object, ...]) -> Message:
    values = dict(zip(MESSAGE_FIELDS, row, strict=True))
    return Message(id=values["id"], agent_id=values["agent_id"], owner_id=values["owner_id"],
                   conversation=ConversationKey(values["channel"], values["chat_id"], values["thread_scope"]),
                   sender=values["sender"], role=Role(values["role"]), kind=values["kind"],
                   content=values["content"], metadata=json.loads(values["metadata_json"]),
                   created_at=datetime.fromisoformat(values["created_at"]), trust=Trust(values["trust"]))


def test_every_kind_of_row_reads_as_the_message_the_constructor_builds() -> None:
    for row in rows():
        read, built = message_from_row(row), constructed(row)
        assert read == built
        assert attrs.asdict(read, recurse=False) == attrs.asdict(built, recurse=False)
        assert repr(read) == repr(built)


def test_a_message_read_from_a_row_is_frozen_and_evolves_like_any_other() -> None:
    read = message_from_row(rows()[0])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        read.content = "changed"  # type: ignore[misc]
    assert attrs.evolve(read, content="changed") == attrs.evolve(constructed(rows()[0]), content="changed")


def test_a_row_with_an_unknown_role_or_trust_is_refused_as_before() -> None:
    row = rows()[0]
    with pytest.raises(ValueError):
        message_from_row((*row[:7], "wizard", *row[8:]))
    with pytest.raises(ValueError):
        message_from_row((*row[:12], "root"))


def test_a_row_of_a_conversation_read_by_its_key_is_the_message_the_constructor_builds() -> None:
    # A window is read by its agent and conversation: its rows leave out those four columns.
    for row in rows():
        values = dict(zip(MESSAGE_FIELDS, row, strict=True))
        short = tuple(values[name] for name in CONVERSATION_MESSAGE_FIELDS)
        key = ConversationKey(values["channel"], values["chat_id"], values["thread_scope"])
        read, built = conversation_message_from_row(short, values["agent_id"], key), constructed(row)
        assert read == built
        assert repr(read) == repr(built)
