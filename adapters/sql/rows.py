"""Mapping projection rows to domain values (one place, used by reads and by transactions)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import attrs

from fermix_memory.adapters.sql.scope_sql import enum_literal
from fermix_memory.application.store_ports import ConversationState, ReviewState
from fermix_memory.application.stored_messages import (
    MESSAGE_ROW_FIELDS,
    STORED_MESSAGE_FIELDS,
    message_of,
    message_of_row,
)
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, ScopeType, members_by_value

# The columns of a memory row are the fields of ``Memory``, named once (here, by the class).
MEMORY_FIELDS: tuple[str, ...] = tuple(field.name for field in attrs.fields(Memory))


def memory_columns(alias: str = "") -> str:
    """The memory-row columns for a SELECT, in :data:`MEMORY_FIELDS` order (``alias.`` before each)."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in MEMORY_FIELDS)


MEMORY_COLUMNS = memory_columns()

# One section of the rows a prompt file may show (``rendering.renders``: live, not job-scoped, not a
# conversation's directive), newest first, at most a cap: one seek of the partial index
# ``memories_shown`` (ADR-0060), however many rows the owner holds. Its target and category are
# written out, not bound (``scope_sql.enum_literal``, ADR-0069): the index is partial on neither,
# but ``memories_agent_rules`` is, and a bound value there makes SQLite prepare at every run.
_SHOWN_SECTION = (
    "SELECT * FROM (SELECT " + MEMORY_COLUMNS + " FROM memories WHERE agent_id = ? AND owner_id = ?"
    " AND promote_target = {target} AND category = {category} AND archived_at IS NULL AND scope_type <> 'job'"
    " AND (scope_type <> 'conversation' OR category <> 'directive')"
    " ORDER BY updated_at DESC, id DESC LIMIT ?) AS section_{n}"
)


@functools.lru_cache(maxsize=64)
def shown_rows_sql(sections: tuple[tuple[str, str], ...]) -> str:
    """The statement reading the ``(target, category)`` sections of shown rows (``ValueError`` for
    a value that is no ``PromoteTarget`` / ``Category``); each takes the parameters
    ``(agent, owner, cap)``, in order."""
    return " UNION ALL ".join(
        _SHOWN_SECTION.format(n=n, target=enum_literal(PromoteTarget, t), category=enum_literal(Category, c))
        for n, (t, c) in enumerate(sections)
    )


# The columns of a message row, in the order ``message_from_row`` reads them.
MESSAGE_FIELDS: tuple[str, ...] = MESSAGE_ROW_FIELDS
MESSAGE_COLUMNS = ", ".join(MESSAGE_FIELDS)


def optional_time(value: str | None) -> datetime | None:
    """A stored ISO time, or ``None`` for SQL NULL."""
    return datetime.fromisoformat(value) if value is not None else None


def _optional_target(value: str | None) -> PromoteTarget | None:
    return PromoteTarget(value) if value is not None else None


# How a stored column becomes a field value, where it is not stored as the value itself.
_MEMORY_DECODERS: dict[str, Callable[[Any], Any]] = {
    "scope_type": ScopeType,
    "category": Category,
    "promote_target": _optional_target,
    "archived_at": optional_time,
    "created_at": datetime.fromisoformat,
    "updated_at": datetime.fromisoformat,
    "expires_at": optional_time,
}


def memory_of_values(row: Sequence[Any]) -> Memory:
    """A ``Memory`` from the :data:`MEMORY_COLUMNS` of one row, field by name, through the class's
    own ``__init__``: what :func:`memory_from_row` is pinned equal to."""
    values = dict(zip(MEMORY_FIELDS, row, strict=True))
    for name, decode in _MEMORY_DECODERS.items():
        values[name] = decode(values[name])
    return Memory(**values)


# ``Memory`` has no validators or converters: a row becomes a ``Memory`` through its slots, without
# the keyword call of the generated ``__init__`` (as ``stored_messages`` makes a ``Message``).
if any(f.validator or f.converter or not f.init for f in attrs.fields(Memory)) or hasattr(
        Memory, "__attrs_post_init__"):  # pragma: no cover - caught at import
    raise RuntimeError("memory_from_row sets Memory's slots: it must run no code of Memory's __init__")
_MEMORY_SETTERS = tuple(Memory.__dict__[name].__set__ for name in MEMORY_FIELDS)
_SCOPE_TYPES = members_by_value(ScopeType)
_CATEGORIES = members_by_value(Category)
_TARGETS: dict[Any, Any] = {None: None, **members_by_value(PromoteTarget)}
_AT = {name: MEMORY_FIELDS.index(name) for name in _MEMORY_DECODERS}
(_SCOPE_TYPE, _CATEGORY, _TARGET, _ARCHIVED_AT, _CREATED_AT, _UPDATED_AT, _EXPIRES_AT) = (
    _AT["scope_type"], _AT["category"], _AT["promote_target"], _AT["archived_at"], _AT["created_at"],
    _AT["updated_at"], _AT["expires_at"])
if len(_AT) != 7:  # pragma: no cover - caught at import
    raise RuntimeError("memory_from_row must decode every decoded column")
_set_scope_type, _set_category, _set_target, _set_archived_at, _set_created_at, _set_updated_at, _set_expires_at = (
    _MEMORY_SETTERS[i] for i in (_SCOPE_TYPE, _CATEGORY, _TARGET, _ARCHIVED_AT, _CREATED_AT, _UPDATED_AT,
                                 _EXPIRES_AT))
_fromisoformat = datetime.fromisoformat
_new_memory = object.__new__


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A ``Memory`` from the :data:`MEMORY_COLUMNS` of one row (equal to :func:`memory_of_values`'s;
    an unknown enum value or a bad time is a ``ValueError`` as there)."""
    m = _new_memory(Memory)
    for setter, value in zip(_MEMORY_SETTERS, row, strict=True):
        setter(m, value)
    scope_type, category, target = row[_SCOPE_TYPE], row[_CATEGORY], row[_TARGET]
    _set_scope_type(m, _SCOPE_TYPES.get(scope_type) or ScopeType(scope_type))
    _set_category(m, _CATEGORIES.get(category) or Category(category))
    _set_target(m, _TARGETS[target] if target in _TARGETS else PromoteTarget(target))
    archived_at, expires_at = row[_ARCHIVED_AT], row[_EXPIRES_AT]
    _set_archived_at(m, None if archived_at is None else _fromisoformat(archived_at))
    _set_created_at(m, _fromisoformat(row[_CREATED_AT]))
    _set_updated_at(m, _fromisoformat(row[_UPDATED_AT]))
    _set_expires_at(m, None if expires_at is None else _fromisoformat(expires_at))
    return m


# A ``Message`` from the :data:`MESSAGE_COLUMNS` of one stored row (equal to one built by
# ``Message(...)`` from the same values).
message_from_row = message_of_row


# A conversation's messages are read by its key: their rows need not repeat the agent and the
# conversation (``application.stored_messages``).
CONVERSATION_MESSAGE_FIELDS = STORED_MESSAGE_FIELDS
CONVERSATION_MESSAGE_COLUMNS = ", ".join(CONVERSATION_MESSAGE_FIELDS)
conversation_message_from_row = message_of
if set(MESSAGE_FIELDS) != {*CONVERSATION_MESSAGE_FIELDS, "agent_id", "channel", "chat_id", "thread_scope"}:
    raise RuntimeError("a conversation's row must hold every message column but its key")  # pragma: no cover


# The review_state columns are the domain state's fields, all of them (``review_gate.evolve``).
REVIEW_STATE_COLUMNS = tuple(f.name for f in attrs.fields(ReviewState))
_REVIEW_TIMES = ("last_review_at", "retry_after", "claim_expires_at")
REVIEW_STATE_SQL = (
    f"SELECT {', '.join(REVIEW_STATE_COLUMNS)}"
    " FROM review_state WHERE agent_id = ? AND owner_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?"
)


def review_state_key(agent_id: str, owner_id: str, conversation: ConversationKey) -> tuple[str, ...]:
    return (agent_id, owner_id, conversation.channel, conversation.chat_id, conversation.thread_scope)


def review_state_from_row(r: tuple[Any, ...]) -> ReviewState:
    values = dict(zip(REVIEW_STATE_COLUMNS, r, strict=True))
    return ReviewState(**{**values, **{t: optional_time(values[t]) for t in _REVIEW_TIMES}})


# The conversation_state columns are the domain state's fields, all of them (``conversation_window.evolve``):
# read by the projection that evolves the row and by the query that shows it, never listed by hand.
WINDOW_COLUMNS = tuple(f.name for f in attrs.fields(ConversationState))


def window_from_row(row: tuple[Any, ...]) -> ConversationState:
    start, checkpoint, retry_after, compacted_at = row
    return ConversationState(window_start_id=start, checkpoint_message_id=checkpoint,
                             compaction_retry_after=optional_time(retry_after),
                             compacted_at=optional_time(compacted_at))
