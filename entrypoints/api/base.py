"""What every part of the embedding API shares: the wired app, the closed check, host input."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from fermix_memory.application.errors import MemoryClosed
from fermix_memory.application.host_input import structure
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.values import check_identifier, is_encodable, preview
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
        return structure(arguments, cls)
