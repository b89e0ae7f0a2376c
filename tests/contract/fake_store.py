"""An in-memory implementation of the storage ports (``EventStore`` and ``Erasure``) for
use-case tests: the log in a list, the state loaders answered from a fold of the log through
the domain's own evolve functions (memory rows, review gates, resources, memory sources, jobs,
runs and conversation windows): no rule is written twice. The contract suite proves it
behaves like apsw."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

import attrs

from fermix_memory.adapters.sql.codec import decode_payload, encode_payload
from fermix_memory.application.errors import ConcurrencyConflict, IntegrityError
from fermix_memory.application.store_ports import RecordedEvent, ReviewState, ScrubReport, StreamEvents
from fermix_memory.application.streams import conversation_stream
from fermix_memory.domain import conversation_window, rendering, resources, review_gate
from fermix_memory.domain import events as ev
from fermix_memory.domain.conversation_window import ConversationWindow, newest_in_window
from fermix_memory.domain.jobs import JobRun, MemorySource, ScheduledJob, evolve_job, evolve_run, evolve_source
from fermix_memory.domain.log_chain import GENESIS_HASH, LoggedEvent, chain_hash, payload_digest
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.scopes import is_agent_rule
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Role, Scope

T = TypeVar("T")
ReviewKey = tuple[str, str, ConversationKey]
ResourceKey = tuple[str, str, str]
WindowKey = tuple[str, ConversationKey]


@attrs.frozen
class FakeHead:
    position: int
    hash: str


@attrs.define
class FakeState:
    """The fake's projections: what the loaders answer from. Values are immutable, so a
    transaction works on a shallow copy and commits by replacing the store's."""

    log: list[RecordedEvent | None] = attrs.field(factory=list)  # None: imported already redacted
    redacted: set[int] = attrs.field(factory=set)
    logged: list[LoggedEvent] = attrs.field(factory=list)  # the rows as stored, chain included
    versions: dict[str, int] = attrs.field(factory=dict)
    rows: dict[int, Memory] = attrs.field(factory=dict)
    messages: dict[int, ev.MessageAppended] = attrs.field(factory=dict)
    resources: dict[ResourceKey, resources.ResourceState] = attrs.field(factory=dict)
    reviews: dict[ReviewKey, ReviewState] = attrs.field(factory=dict)
    jobs: dict[str, ScheduledJob] = attrs.field(factory=dict)
    sources: dict[str, MemorySource] = attrs.field(factory=dict)
    runs: dict[str, JobRun] = attrs.field(factory=dict)
    windows: dict[WindowKey, ConversationWindow] = attrs.field(factory=dict)
    scrub_pending: bool = False
    unfinished_copy: str | None = None  # the mark of a copy cut off before its last events

    def copy(self) -> FakeState:
        return FakeState(**{f.name: _copied(getattr(self, f.name)) for f in attrs.fields(FakeState)})

    def readable(self, after: int = 0, stream: str | None = None) -> list[RecordedEvent]:
        return [r for r in self.log[after:]
                if r is not None and r.position not in self.redacted and stream in (None, r.stream)]


def _copied(value: Any) -> Any:
    return value.copy() if isinstance(value, list | set | dict) else value


def _project(state: FakeState, position: int, e: ev.DomainEvent) -> None:
    """What the apsw projections do, on the fake's dictionaries, by the domain's evolve functions."""
    if isinstance(e, ev.MemoryAdded) and any(
            (r.agent_id, r.owner_id, r.scope_type, r.scope_id, r.key)
            == (e.agent_id, e.owner_id, e.scope_type, e.scope_id, e.key) for r in state.rows.values()):
        raise IntegrityError(f"memory.added at {position}: key {e.key!r} already exists in its scope")
    memory_id = getattr(e, "memory_id", None) if not isinstance(e, ev.OperationRefused) else None
    if memory_id is not None and memory_id not in state.rows:
        raise IntegrityError(f"{e.kind} at {position} names a memory row that does not exist")
    row = evolve_memory(state.rows.get(memory_id) if memory_id is not None else None, position, e)
    if row is not None:
        state.rows[row.id] = row
    if isinstance(e, ev.MessageAppended):
        state.messages[position] = e
    elif isinstance(e, ev.MessageRetracted):
        state.messages.pop(e.message_id, None)
    elif isinstance(e, review_gate.REVIEW_EVENTS):
        key = (e.agent_id, e.owner_id, e.conversation)
        state.reviews[key] = review_gate.evolve(state.reviews.get(key, ReviewState()), e)
    elif isinstance(e, ev.ResourceRevised | ev.ResourceRolledBack):
        name = (e.agent_id, e.owner_id, e.name)
        state.resources[name] = resources.evolve(state.resources.get(name, resources.NEVER_RECORDED), e)
    elif isinstance(e, conversation_window.WINDOW_EVENTS):
        _evolve_window(state, (e.agent_id, e.conversation), e)
    elif isinstance(e, ev.ScheduledJobSaved):
        state.jobs[e.job_id] = evolve_job(state.jobs.get(e.job_id), e)
    elif isinstance(e, ev.MemorySourceRegistered):
        state.sources[e.source_id] = evolve_source(state.sources.get(e.source_id), e)
    elif isinstance(e, ev.JobRunRecorded):
        state.runs[e.run_id] = evolve_run(state.runs.get(e.run_id), e)
    elif isinstance(e, ev.OwnerForgotten):
        _forget(state, e)


def _evolve_window(state: FakeState, key: WindowKey, e: ev.DomainEvent) -> None:
    state.windows[key] = conversation_window.evolve(state.windows.get(key, ConversationWindow()), e)


def _forget(state: FakeState, e: ev.OwnerForgotten) -> None:
    mine = (e.agent_id, e.owner_id)
    erased = set(e.redacted_positions or ())
    for conversation in e.conversations:
        _evolve_window(state, (e.agent_id, conversation), e)
    state.rows = {i: r for i, r in state.rows.items() if i not in erased and (r.agent_id, r.owner_id) != mine}
    state.messages = {i: m for i, m in state.messages.items()
                      if i not in erased and (m.agent_id, m.owner_id) != mine}
    state.resources = {k: v for k, v in state.resources.items() if k[:2] != mine}
    for owner_id, name in {(r.owner_id, r.name) for r in e.redacted_revisions}:
        # Another owner's file whose revisions went: its newest revision left, as a replay has it.
        key = (e.agent_id, owner_id, name)
        current = resources.NEVER_RECORDED
        for item in state.readable():
            if isinstance(item.event, ev.ResourceRevised | ev.ResourceRolledBack) \
                    and (item.event.agent_id, item.event.owner_id, item.event.name) == key:
                current = resources.evolve(current, item.event)
        if current.revision:
            state.resources[key] = current
        else:
            state.resources.pop(key, None)
    state.reviews = {k: v for k, v in state.reviews.items() if k[:2] != mine}
    gone = {k for k, j in state.jobs.items() if (j.agent_id, j.owner_id) == mine}
    state.runs = {k: r for k, r in state.runs.items() if r.job_id not in gone}
    state.jobs = {k: j for k, j in state.jobs.items() if k not in gone}
    state.sources = {k: v for k, v in state.sources.items() if (v.agent_id, v.owner_id) != mine}


class FakeTransaction:
    """Implements ``WriteTransaction`` and ``ErasureTransaction`` on a copy of the store's state."""

    def __init__(self, state: FakeState) -> None:
        self.state = state.copy()
        self._first_reads: dict[int, Memory] = {}

    # --- appends and reads ---------------------------------------------------------------------

    def append(self, stream: str, events: Sequence[ev.DomainEvent], *,
               expected_version: int | None = None) -> list[int]:
        s = self.state
        if expected_version is not None and s.versions.get(stream, 0) != expected_version:
            raise ConcurrencyConflict(f"stream {stream!r} is at version {s.versions.get(stream, 0)},"
                                      f" not {expected_version}: nothing was appended")
        positions = []
        for event in events:
            position, version = len(s.log) + 1, s.versions.get(stream, 0) + 1
            payload = encode_payload(event)
            digest, at = payload_digest(payload), event.at.isoformat()
            self._add(LoggedEvent(
                position=position, stream=stream, version=version, kind=event.kind, schema=event.schema,
                recorded_at=at, payload=payload, payload_sha256=digest,
                hash=chain_hash(self.head_hash, position, stream, version, event.kind, event.schema, at, digest),
            ), event)
            positions.append(position)
        return positions

    def append_each(self, appends: Sequence[tuple[str, ev.DomainEvent]]) -> list[int]:
        return [self.append(stream, [event])[0] for stream, event in appends]

    @property
    def head_hash(self) -> str:
        return self.state.logged[-1].hash if self.state.logged else GENESIS_HASH

    def _add(self, row: LoggedEvent, event: ev.DomainEvent | None) -> None:
        s = self.state
        if event is not None:
            _project(s, row.position, event)
        else:
            s.redacted.add(row.position)
        s.versions[row.stream] = row.version
        s.log.append(None if event is None else
                     RecordedEvent(position=row.position, stream=row.stream, version=row.version, event=event))
        s.logged.append(row)

    def append_logged(self, rows: Sequence[LoggedEvent]) -> None:
        for row in rows:
            if row.position != len(self.state.log) + 1:
                raise ConcurrencyConflict(f"event {row.position} does not follow this log's head")
            linked = chain_hash(self.head_hash, row.position, row.stream, row.version, row.kind, row.schema,
                                row.recorded_at, row.payload_sha256)
            if linked != row.hash or (row.payload is not None and payload_digest(row.payload) != row.payload_sha256):
                raise IntegrityError(f"event {row.position} does not link to this log")
            self._add(row, None if row.payload is None else decode_payload(row.kind, row.schema, row.payload))

    def read_stream(self, stream: str) -> StreamEvents:
        return StreamEvents(version=self.state.versions.get(stream, 0),
                            events=tuple(self.state.readable(stream=stream)))

    def stream_version(self, stream: str) -> int:
        return self.state.versions.get(stream, 0)

    def read_events(self, after: int = 0, *, stream: str | None = None) -> list[RecordedEvent]:
        return self.state.readable(after, stream)

    # --- typed state loaders -------------------------------------------------------------------

    def by_id(self, memory_id: int) -> Memory | None:
        return self._read(self.state.rows.get(memory_id))

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
        wanted = (agent_id, owner_id, scope.type, scope.id, key)
        return self._read(next((r for r in self.state.rows.values()
                                if (r.agent_id, r.owner_id, r.scope_type, r.scope_id, r.key) == wanted), None))

    def _read(self, row: Memory | None) -> Memory | None:
        if row is not None:
            self._first_reads.setdefault(row.id, row)
        return row

    def first_read(self, memory_id: int) -> Memory | None:
        return self._first_reads.get(memory_id)

    def memories_of(self, agent_id: str, owner_id: str) -> list[Memory]:
        return sorted((r for r in self.state.rows.values()
                       if r.agent_id == agent_id and r.owner_id == owner_id and not r.archived), key=lambda r: r.id)

    def shown_rows(self, agent_id: str, owner_id: str,
                   sections: Sequence[tuple[PromoteTarget, Category, int]]) -> list[Memory]:
        return rendering.shown_rows(self.memories_of(agent_id, owner_id), sections)

    def agent_rules(self, agent_id: str) -> list[Memory]:
        return sorted((r for r in self.state.rows.values() if r.agent_id == agent_id and is_agent_rule(r)),
                      key=lambda r: r.id)

    def agent_owners(self, agent_id: str) -> list[str]:
        s = self.state
        owners = {m.owner_id for m in s.messages.values() if m.agent_id == agent_id}
        owners |= {r.owner_id for r in s.rows.values() if r.agent_id == agent_id}
        owners |= {owner for agent, owner, _ in s.resources if agent == agent_id}
        return sorted(owners)

    def current_resource(self, agent_id: str, owner_id: str, name: str) -> tuple[int, str] | None:
        current = self.state.resources.get((agent_id, owner_id, name))
        return None if current is None else (current.revision, current.content)

    def review_state(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> ReviewState:
        return self.state.reviews.get((agent_id, owner_id, conversation), ReviewState())

    def newest_window_message(self, agent_id: str, conversation: ConversationKey) -> Message | None:
        newest = newest_in_window((r.position, r.event) for r in self.read_events(
            stream=conversation_stream(agent_id, conversation)))
        return None if newest is None else newest[1].message(newest[0])

    def last_message_id(self, agent_id: str, conversation: ConversationKey) -> int:
        return max((i for i, m in self.state.messages.items()
                    if m.agent_id == agent_id and m.conversation == conversation), default=0)

    def last_user_message_id(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> int:
        return max((i for i, m in self.state.messages.items() if m.agent_id == agent_id
                    and m.owner_id == owner_id and m.conversation == conversation and m.role is Role.USER), default=0)

    # --- erasure -------------------------------------------------------------------------------

    def agents_of_owner(self, owner_id: str) -> list[str]:
        s = self.state
        agents = {m.agent_id for m in s.messages.values() if m.owner_id == owner_id}
        agents |= {r.agent_id for r in s.rows.values() if r.owner_id == owner_id}
        agents |= {agent for agent, owner, *_ in (*s.resources, *s.reviews) if owner == owner_id}
        agents |= {j.agent_id for j in (*s.jobs.values(), *s.sources.values()) if j.owner_id == owner_id}
        return sorted(agents)

    def erasure_candidates(self, owner_id: str, kinds: Collection[str]) -> list[RecordedEvent]:
        return [r for r in self.state.readable() if r.event.kind in kinds or repr(owner_id) in repr(r.event)]

    def redact(self, positions: Sequence[int]) -> int:
        self.state.redacted.update(positions)
        self.state.scrub_pending = self.state.scrub_pending or bool(positions)
        return len(positions)


class FakeEventStore:
    """Implements ``EventStore`` and ``Erasure`` in memory: a write commits only if its work
    returns; writes are serialised (a lock), as the apsw store's are."""

    def __init__(self) -> None:
        self.state = FakeState()
        self._lock = threading.Lock()

    def write(self, work: Callable[[Any], T]) -> T:
        with self._lock:
            tx = FakeTransaction(self.state)
            result = work(tx)
            self.state = tx.state
            return result

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        return iter(self.state.readable(after, stream))

    def last_position(self) -> int:
        return len(self.state.log)

    def settle(self, timeout: float | None = None) -> bool:
        return True

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        return {r.stream: r.position for r in self.state.logged if r.stream.startswith(stream_prefix)}

    def head(self) -> FakeHead:
        state = self.state
        return FakeHead(len(state.log), state.logged[-1].hash if state.logged else GENESIS_HASH)

    def read_log(self, after: int = 0) -> Iterator[LoggedEvent]:
        state = self.state
        return iter([attrs.evolve(r, payload=None) if r.position in state.redacted else r
                     for r in state.logged[after:]])

    def adopt_chains(self, chains: int) -> None:
        if chains != 1:
            raise IntegrityError(f"the fake log has one chain, not {chains}")

    def append_logged(self, events: Sequence[LoggedEvent], *, copy_of: str | None = None,
                      copied: bool = False) -> FakeHead:
        def work(tx: Any) -> None:
            if copy_of is not None:
                tx.state.unfinished_copy = copy_of
            tx.append_logged(events)
            if copied:
                tx.state.unfinished_copy = None

        self.write(work)
        return self.head()

    def unfinished_copy(self) -> str | None:
        return self.state.unfinished_copy

    # --- the Erasure port ----------------------------------------------------------------------

    def erase(self, work: Callable[[Any, Any], T]) -> T:
        return self.write(lambda tx: work(tx, tx))

    def scrub(self) -> ScrubReport:
        with self._lock:
            self.state.scrub_pending = False
        return ScrubReport(wal_truncated=True, bytes_before=0, bytes_after=0)

    def scrub_pending(self) -> bool:
        return self.state.scrub_pending
