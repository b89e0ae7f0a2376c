"""In-process caches (SPEC §4): the hot conversation windows, a memory-row cache and the prompt
files' current revisions.

All are fed only by committed events (a commit listener), so they never hold what the
database does not. Before serving, they compare the log's last position with the last one
they saw: a write by another process (or a gap) empties them, and they are rebuilt from SQLite.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.store_ports import ConversationState, RecordedEvent
from fermix_memory.application.stored_messages import (
    StoredItem,
    StoredRow,
    as_message,
    id_of,
    is_plain,
    is_row,
    kind_of,
    message_of,
    order_of,
)
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey

MAX_CACHED_CONVERSATIONS = 1024
MAX_CACHED_ROWS = 10_000
MAX_CACHED_FILES = 4096  # two files per owner an agent talks to

K = TypeVar("K")
V = TypeVar("V")


class WindowSource(Protocol):
    def conversation_state(self, agent_id: str, conversation: ConversationKey) -> ConversationState: ...

    def stored_messages(
        self, agent_id: str, conversation: ConversationKey, *, after_id: int = 0, limit: int | None = None
    ) -> list[StoredRow]: ...

    def memory(self, memory_id: int) -> Memory | None: ...


class RevisionSource(Protocol):
    def resource_revision(self, agent_id: str, owner_id: str, name: str) -> ResourceRevision | None: ...


# Whether committed events follow on from what a cache saw, and what it has seen after them.
Follows = Callable[[int, Sequence[RecordedEvent]], tuple[bool, int]]


def follows_by_position(seen: int, recorded: Sequence[RecordedEvent]) -> tuple[bool, int]:
    """A log whose positions run without gaps: events follow when they start right after ``seen``."""
    return recorded[0].position == seen + 1, recorded[-1].position


def erases(recorded: Sequence[RecordedEvent]) -> bool:
    """Whether a commit erases an owner, a conversation or a row: what nothing derived from the
    erased text may outlive in any cache."""
    if len(recorded) == 1:  # the usual commit (one message): no generator for it
        return isinstance(recorded[0].event, ev.ERASURE_RECORDS)
    return any(isinstance(item.event, ev.ERASURE_RECORDS) for item in recorded)


class PositionReads:
    """The log's last position for the caches' freshness checks: read at each call, except inside
    ``with reads:`` on this thread, where it is read once and held (a prompt consults three caches,
    and one read of the log's position serves them all, the same moment for each)."""

    def __init__(self, last_position: Callable[[], int]) -> None:
        self._read = last_position
        self._local = threading.local()

    def __call__(self) -> int:
        held: int | None = getattr(self._local, "held", None)
        if held is None:
            return self._read()
        if held < 0:
            held = self._local.held = self._read()
        return held

    def __enter__(self) -> None:
        self._local.held = -1  # read at the first call inside

    def __exit__(self, *exc: object) -> None:
        self._local.held = None


class _LogFollower:
    """Tracks the last log position seen through commits; detects foreign writes. A store whose
    positions leave gaps (several chains, ADR-0031) gives its own ``follows`` and a
    ``last_position`` that changes whenever events may have been missed."""

    def __init__(self, last_position: Callable[[], int], follows: Follows | None = None) -> None:
        self._last_position = last_position
        self._follows = follows or follows_by_position
        self.seen = last_position()

    def observe(self, recorded: Sequence[RecordedEvent]) -> bool:
        """Advance past ``recorded``; False when a cache cannot just apply them and must empty:
        they do not follow on from what was seen (a foreign write), or they erase an owner
        or a row (whose messages and rows must not outlive the erasure in any cache)."""
        contiguous, self.seen = self._follows(self.seen, recorded)
        return contiguous and not erases(recorded)

    def fresh(self) -> bool:
        current = self._last_position()
        if current == self.seen:
            return True
        self.seen = current
        return False


class ConversationStore:
    """Recent window messages per ``(agent_id, conversation)``; write-through via commits.

    A window of plain rows (``is_plain``) is kept as the store read it (``application.stored_messages``)
    and each row is made a ``Message`` the first time something asks for messages (:meth:`window`);
    a prompt of plain turns is composed from the rows (:meth:`stored_window`). A window holding any
    other row is made messages as it is loaded. Messages committed later join as messages.
    ``max_history`` caps how many recent messages a window keeps (``None``: unbounded —
    compaction, not a count, is the real bound).
    """

    def __init__(self, source: WindowSource, last_position: Callable[[], int],
                 max_history: int | None = None, *, follows: Follows | None = None) -> None:
        self._source = source
        self._max = max_history
        self._lock = threading.RLock()
        self._windows: OrderedDict[tuple[str, ConversationKey], list[StoredItem]] = OrderedDict()
        self._follower = _LogFollower(last_position, follows)
        self._generation = 0

    def window(self, agent_id: str, conversation: ConversationKey) -> list[Message]:
        key = (agent_id, conversation)
        return self._messages(key, *self._items(key))

    def stored_window(self, agent_id: str, conversation: ConversationKey) -> Sequence[StoredItem]:
        """The window, each message as a ``Message`` or, when it is a plain row (``is_plain``), maybe
        as the row read: a window holding any other row was made messages as it was loaded."""
        return self._items((agent_id, conversation))[0]

    def _messages(self, key: tuple[str, ConversationKey], items: list[StoredItem], generation: int) -> list[Message]:
        if not any(map(is_row, items)):
            return items  # type: ignore[return-value]
        messages = [as_message(item, *key) for item in items]
        with self._lock:
            if generation == self._generation and key in self._windows:
                self._windows[key] = list(messages)  # no commit since: the same window, as messages
        return messages

    def _items(self, key: tuple[str, ConversationKey]) -> tuple[list[StoredItem], int]:
        """A copy of the window of ``key`` (loaded and kept if not cached) and the generation it is of."""
        with self._lock:
            if not self._follower.fresh():
                self._windows.clear()
                self._generation += 1  # what was read before this is not kept
            cached = self._windows.get(key)
            if cached is not None:
                self._windows.move_to_end(key)
                return list(cached), self._generation
            generation = self._generation
        agent_id, conversation = key
        state = self._source.conversation_state(agent_id, conversation)
        rows = self._source.stored_messages(agent_id, conversation, after_id=state.window_start_id, limit=self._max)
        # A window holding a row that a prompt cannot take as it is (a tool call or result, a
        # system message) is made messages once, as it is loaded; one of plain rows stays rows.
        loaded: list[StoredItem] = (list(rows) if all(map(is_plain, rows))
                                    else [message_of(row, agent_id, conversation) for row in rows])
        # The checkpoint of a compaction stands for everything before it: it leads the window.
        if state.checkpoint_message_id is not None:
            checkpoint = [m for m in loaded if id_of(m) == state.checkpoint_message_id]
            loaded = checkpoint + [m for m in loaded if id_of(m) != state.checkpoint_message_id]
        with self._lock:
            # A commit landed while loading: the load may be stale, so don't keep it.
            if generation != self._generation:
                return loaded, -1
            self._windows[key] = loaded
            while len(self._windows) > MAX_CACHED_CONVERSATIONS:
                self._windows.popitem(last=False)
        return list(loaded), generation

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:
            self._generation += 1
            if not self._follower.observe(recorded):
                self._windows.clear()
                return
            if not self._windows:
                return  # no window kept, none to update
            for item in recorded:
                e = item.event
                if isinstance(e, ev.MessageAppended):
                    window = self._windows.get((e.agent_id, e.conversation))
                    if window is not None:
                        self._insert(window, e.message(item.position))
                elif isinstance(e, ev.ConversationWindowCleared | ev.HistoryCompacted | ev.MessageRetracted):
                    self._windows.pop((e.agent_id, e.conversation), None)


    def _insert(self, window: list[StoredItem], message: Message) -> None:
        """Put ``message`` where a reload would: windows are ordered by ``(created_at, id)``
        (the checkpoint of a compaction stays first)."""
        if any(id_of(m) == message.id for m in window[-8:]):
            return  # a window loaded after this commit already holds it
        head = 1 if window and kind_of(window[0]) == "checkpoint" else 0
        key = (message.created_at, message.id)
        index = len(window)
        while index > head and order_of(window[index - 1]) > key:
            index -= 1
        if self._max is not None and len(window) >= self._max and index == head:
            return  # older than everything a capped window keeps
        window.insert(index, message)
        if self._max is not None and len(window) > self._max:
            del window[head : head + len(window) - self._max]


class _ReadThrough(Generic[K, V]):
    """A bounded read-through cache of ``load(key)``, least recently used first out; emptied by
    what ``_LogFollower.observe`` refuses, and each key an event makes stale (``stale``) dropped.
    A load that a commit overtook is returned but not kept."""

    def __init__(self, load: Callable[[K], V], last_position: Callable[[], int], *, most: int,
                 follows: Follows | None = None) -> None:
        self._load = load
        self._most = most
        self._lock = threading.Lock()
        self._values: OrderedDict[K, V] = OrderedDict()
        self._follower = _LogFollower(last_position, follows)
        self._generation = 0

    def get(self, key: K) -> V:
        with self._lock:
            if not self._follower.fresh():
                self._values.clear()
                self._generation += 1  # what was read before this is not kept
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            generation = self._generation
        value = self._load(key)
        if value is not None or self._keeps_none:
            with self._lock:
                if generation != self._generation:
                    return value
                self._values[key] = value
                while len(self._values) > self._most:
                    self._values.popitem(last=False)
        return value

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:
            self._generation += 1
            if not self._follower.observe(recorded):
                self._values.clear()
                return
            if not self._values:
                return  # nothing kept, nothing to drop
            for item in recorded:
                key = self._stale(item.event)
                if key is not None:
                    self._values.pop(key, None)

    _keeps_none = False

    def _stale(self, event: ev.DomainEvent) -> K | None:
        raise NotImplementedError


class MemoryRowCache(_ReadThrough[int, "Memory | None"]):
    """Read-through cache of memory rows by id, invalidated by the events that change them."""

    def __init__(self, source: WindowSource, last_position: Callable[[], int], *,
                 follows: Follows | None = None) -> None:
        super().__init__(source.memory, last_position, most=MAX_CACHED_ROWS, follows=follows)

    def _stale(self, event: ev.DomainEvent) -> int | None:
        memory_id: int | None = getattr(event, "memory_id", None)
        return memory_id


class PromptFileCache(_ReadThrough[tuple[str, str, str], "ResourceRevision | None"]):
    """The current revision of each ``(agent_id, owner_id, name)`` prompt file (``None``: none
    yet), read through; a revision or a rollback of that file drops it, an erasure drops all."""

    _keeps_none = True

    def __init__(self, source: RevisionSource, last_position: Callable[[], int], *,
                 follows: Follows | None = None) -> None:
        super().__init__(lambda key: source.resource_revision(*key), last_position, most=MAX_CACHED_FILES,
                         follows=follows)

    def revision(self, agent_id: str, owner_id: str, name: str) -> ResourceRevision | None:
        return self.get((agent_id, owner_id, name))

    def _stale(self, event: ev.DomainEvent) -> tuple[str, str, str] | None:
        if isinstance(event, ev.ResourceRevised | ev.ResourceRolledBack):
            return event.agent_id, event.owner_id, event.name
        return None
