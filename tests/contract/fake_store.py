"""An in-memory EventStore for use-case tests: events in a list, memory rows evolved by the
pure domain function. The contract tests prove it behaves like the apsw store."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from fermix_memory.application.ports import RecordedEvent, ReviewState
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.values import ConversationKey, Scope

T = TypeVar("T")


class FakeTransaction:
    def __init__(self, store: FakeEventStore) -> None:
        self._store = store
        self.log = list(store.log)
        self.rows = dict(store.rows)

    def append(self, stream: str, events: Sequence[ev.DomainEvent]) -> list[int]:
        positions = []
        for event in events:
            position = len(self.log) + 1
            version = sum(1 for r in self.log if r.stream == stream) + 1
            self.log.append(RecordedEvent(position=position, stream=stream, version=version, event=event))
            memory_id = position if isinstance(event, ev.MemoryAdded) else getattr(event, "memory_id", None)
            if memory_id is not None:
                row = evolve_memory(self.rows.get(memory_id), position, event)
                if row is not None:
                    self.rows[memory_id] = row
            positions.append(position)
        return positions

    def by_id(self, memory_id: int) -> Memory | None:
        return self.rows.get(memory_id)

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
        for row in self.rows.values():
            if (row.agent_id, row.owner_id, row.scope_type, row.scope_id, row.key) == (
                    agent_id, owner_id, scope.type, scope.id, key):
                return row
        return None

    def memories_of(self, agent_id: str, owner_id: str) -> list[Memory]:
        return sorted((r for r in self.rows.values()
                       if r.agent_id == agent_id and r.owner_id == owner_id and not r.archived), key=lambda r: r.id)

    def last_message_id(self, agent_id: str, conversation: ConversationKey) -> int:
        return max((r.position for r in self.log if isinstance(r.event, ev.MessageAppended)
                    and r.event.agent_id == agent_id and r.event.conversation == conversation), default=0)

    def current_resource(self, agent_id: str, owner_id: str, name: str) -> tuple[int, str] | None:
        return None

    def review_state(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> ReviewState:
        return ReviewState()

    def read_events(self, after: int = 0, *, stream: str | None = None) -> list[RecordedEvent]:
        return [r for r in self.log if r.position > after and (stream is None or r.stream == stream)]

    def last_user_message_id(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> int:
        return 0


class FakeEventStore:
    """Implements the ``EventStore`` port in memory: a write commits only if its work returns."""

    def __init__(self) -> None:
        self.log: list[RecordedEvent] = []
        self.rows: dict[int, Memory] = {}

    def write(self, work: Callable[[Any], T]) -> T:
        tx = FakeTransaction(self)
        result = work(tx)
        self.log, self.rows = tx.log, tx.rows
        return result

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        return iter([r for r in self.log if r.position > after and (stream is None or r.stream == stream)])

    def last_position(self) -> int:
        return len(self.log)

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.log:
            if r.stream.startswith(stream_prefix):
                out[r.stream] = r.position
        return out
