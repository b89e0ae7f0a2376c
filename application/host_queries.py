"""The read side the embedding API shows hosts and operators: what its use cases read, and more."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from fermix_memory.application.compaction import CompactionQueries
from fermix_memory.application.explain import ExplainQueries
from fermix_memory.application.prompt_files import ResourceReader
from fermix_memory.application.query_ports import MemoryQueries, OwnerSummary, ResourceRevision
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey


class HostQueries(MemoryQueries, ExplainQueries, CompactionQueries, ResourceReader, Protocol):
    """The read side the embedding API shows hosts and operators, beyond what its use cases read."""

    def all_memories(self, *, agent_id: str | None = None, owner_id: str | None = None,
                     include_archived: bool = True) -> list[Memory]: ...

    def owner_summaries(self, *, agent_id: str | None = None) -> list[OwnerSummary]: ...

    def iter_messages(self, *, agent_id: str | None = None, batch: int = 5_000) -> Iterator[Message]: ...

    def message_page(self, agent_id: str, conversation: ConversationKey, *, limit: int, before_id: int | None = None,
                     after_id: int | None = None, skip: int = 0, owner_id: str | None = None) -> list[Message]: ...

    def resources(self, *, agent_id: str | None = None, owner_id: str | None = None) -> list[ResourceRevision]: ...

    def resource_history(self, agent_id: str, owner_id: str, name: str,
                         limit: int | None = None) -> list[ResourceRevision]: ...
