"""Ports: what the use cases need from the outside world, in the use cases' own words.

By area: the store's in :mod:`.store_ports`, the read side's in :mod:`.query_ports`, the model
providers' in :mod:`.model_ports`; here the rest: the clock, the token counter and the folder
the prompt files are rendered into.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class PromptFileSink(Protocol):
    """Where rendered prompt files live (files are derived copies; the log is the truth)."""

    def read(self, agent_id: str, owner_id: str, name: str) -> str | None: ...

    def write(self, agent_id: str, owner_id: str, name: str, content: str) -> Any: ...

    def syncing(self, agent_id: str, owner_id: str) -> AbstractContextManager[None]:
        """Held while the owner's files are made to match their revisions (reading the
        revision, then writing): no other thread or process writes or removes them meanwhile."""
        ...

    def discard(self, agent_id: str, owner_id: str, name: str) -> bool:
        """Delete one prompt file (the caller holds ``syncing``); ``True`` when it was there."""
        ...

    def remove(self, agent_id: str, owner_id: str) -> bool:
        """Delete the owner's prompt files and their folder; ``True`` when something was there."""
        ...
