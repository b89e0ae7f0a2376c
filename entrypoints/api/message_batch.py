"""Several messages handed over in one call (``append_messages``, ``Session.append_many``): each
a dict of the one-message call's keyword arguments, checked for its keys before any is built."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import attrs

from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.message_input import InvalidMessage

APPEND_FIELDS = tuple(field.name for field in attrs.fields(AppendMessage))
APPEND_REQUIRED = ("agent_id", "owner_id", "conversation", "role", "content")


def message_dicts(messages: object) -> list[Mapping[str, Any]]:
    """``messages`` as a list of dicts, or :class:`InvalidMessage` naming what is not one."""
    if isinstance(messages, Mapping | str | bytes) or not isinstance(messages, Sequence):
        raise InvalidMessage(f"messages must be a list of messages, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if type(message) is not dict and not isinstance(message, Mapping):
            raise InvalidMessage(f"message {index} must be a dict of arguments, got {type(message).__name__}")
    return list(messages)


def check_keys(index: int, message: Mapping[str, Any], allowed: Collection[str], required: Sequence[str]) -> None:
    """:class:`InvalidMessage` for a message ``index`` holding an argument not ``allowed``, or
    missing a ``required`` one."""
    unknown = sorted(str(key)[:40] for key in message if key not in allowed)
    if unknown:
        raise InvalidMessage(f"message {index}: unknown argument(s): {', '.join(unknown[:5])}")
    missing = [key for key in required if key not in message]
    if missing:
        raise InvalidMessage(f"message {index}: missing argument(s): {', '.join(missing)}")


def append_commands(messages: object) -> list[AppendMessage]:
    """The commands of ``append_message``'s arguments, one dict each (every field is checked with
    its message, by the use case)."""
    return built(messages, APPEND_FIELDS, APPEND_REQUIRED, AppendMessage)


def built(messages: object, allowed: Collection[str], required: Sequence[str],
          build: Callable[..., AppendMessage]) -> list[AppendMessage]:
    """The commands ``build(**message)`` gives, once every message holds only ``allowed`` keys
    and every ``required`` one."""
    dicts = message_dicts(messages)
    known, needed = frozenset(allowed), frozenset(required)
    for index, message in enumerate(dicts):
        if not (known.issuperset(message) and needed.issubset(message)):
            check_keys(index, message, allowed, required)  # says which
    return [build(**message) for message in dicts]
