"""A message's metadata once its checks passed: plain JSON values, with their canonical JSON text."""

from __future__ import annotations

from typing import Any


class CheckedMetadata(dict[str, Any]):
    """The metadata of a message as its checks made it (plain JSON values: objects, arrays, text,
    numbers, booleans, null), and ``json``, its canonical JSON (sorted keys, no spaces, text as it
    is) made by the pass that checked it: what the log's payload and the message's row write, so
    that neither encodes it again. A value of an event: never changed once made (the text would
    no longer be its own)."""

    __slots__ = ("json",)

    json: str

    @classmethod
    def of(cls, values: dict[str, Any], text: str) -> CheckedMetadata:
        """``values`` (the JSON ``text`` decoded) with ``text``."""
        made = cls(values)
        made.json = text
        return made
