"""What every part of the embedding API shares: the wired app, the closed check, host input."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs

from fermix_memory.application.commands import ComposePrompt, Identifier, Style, SystemPrompt
from fermix_memory.application.errors import MemoryClosed
from fermix_memory.application.host_input import MAX_SYSTEM_PROMPT_CHARS, converter
from fermix_memory.application.message_input import conversation_key, parse_enum
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.values import check_identifier, check_text, is_encodable, preview
from fermix_memory.entrypoints.bootstrap import App

T = TypeVar("T")


def optional_id(value: object, what: str) -> str | None:
    """``None`` (no filter) or a usable identifier."""
    return None if value is None else check_identifier(value, what)


def check_owner(agent_id: object, owner_id: object) -> None:
    check_identifier(agent_id, "agent_id")
    check_identifier(owner_id, "owner_id")


def folder(value: object, what: str) -> Path:
    """A folder the host names: text or a path, without NUL or lone surrogates."""
    if not isinstance(value, str | os.PathLike):
        raise InvalidArgument(f"{what} must be a folder path, got {preview(value)}")
    text = os.fspath(value)
    if not isinstance(text, str) or "\x00" in text or not is_encodable(text) or not text:
        raise InvalidArgument(f"{what} must be a non-empty folder path without NUL or lone surrogates")
    return Path(text)


class ApiBase:
    """The state every API mixin works on."""

    _app: App
    _closed: bool

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryClosed("this MemorySystem is closed")

    def _open_app(self) -> App:
        """The wired app, once memory is checked open: for a command built without the converter
        (every field checked by its use case)."""
        self._check_open()
        return self._app

    def _command(self, cls: type[T], arguments: Mapping[str, Any]) -> T:
        """Check that memory is open, then turn the host's arguments into a ``cls`` command."""
        self._check_open()
        hook = _HOOKS.get(cls)
        if hook is None:  # the converter's hook of the class, found once (not dispatched at each call)
            hook = _HOOKS[cls] = converter.get_structure_hook(cls)
        return cast(T, hook(arguments, cls))

    def _compose_command(self, agent_id: object, owner_id: object, conversation: object, system: object,
                         style: object) -> ComposePrompt:
        """``_command(ComposePrompt, ...)`` without the mapping and its plan (a prompt is composed
        every turn): each field parsed, in order, as the converter parses it, a default as given
        passing unchecked."""
        self._check_open()
        return ComposePrompt(
            agent_id=_identifier(agent_id, "agent_id"), owner_id=_identifier(owner_id, "owner_id"),
            conversation=conversation_key(conversation),
            system=_NO_SYSTEM if system is _NO_SYSTEM else _system(system, "system", max_chars=MAX_SYSTEM_PROMPT_CHARS),
            style=style if style is Style.OPENAI else parse_enum(Style, style, "style"))


# Each command class's structure hook (``host_input.converter``'s): a host call runs it directly.
_HOOKS: dict[type, Callable[[Any, Any], Any]] = {}
_NO_SYSTEM = cast(SystemPrompt, attrs.fields(ComposePrompt).system.default)
# The checks of ``ComposePrompt``'s fields, typed as the fields' types (what they return).
_identifier = cast(Callable[[object, str], Identifier], check_identifier)
_system = cast(Callable[..., SystemPrompt], check_text)
