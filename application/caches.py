"""In-process caches (SPEC §4): the hot conversation windows, a memory-row cache and the prompt
files' current revisions.

All are fed only by committed events (a commit listener), so they never hold what the
database does not. Before serving, they compare the log's last position with the last one
they saw: a write by another process (or a gap) empties them, and they are rebuilt from SQLite.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, Generic, Protocol, TypeVar, cast

from fermix_memory.application.log_position import Follows, LogFollower, PositionReads
from fermix_memory.application.plain_turns import PlainRows
from fermix_memory.application.query_ports import ResourceRevision, WindowAtPosition
from fermix_memory.application.store_ports import ConversationState, RecordedEvent
from fermix_memory.application.stored_messages import (
    StoredItem,
    StoredRow,
    id_of,
    kind_of,
    message_of,
    order_of,
    stored_row,
)
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.tool_calls import TOOL_CALL_ID_KEY, TOOL_CALLS_KEY
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


# Reads the log's position and, unless the log is at ``unless_at``, a window, in one statement:
# ``(agent_id, conversation, limit, unless_at)``; ``unless_at`` None: the window in any case.
WindowAtPositionReader = Callable[[str, ConversationKey, "int | None", "int | None"], WindowAtPosition]


class RevisionSource(Protocol):
    def resource_revision(self, agent_id: str, owner_id: str, name: str) -> ResourceRevision | None: ...


_READ_BEFORE = -1  # the position of a window read without one: the log's was read before it


class ConversationStore:
    """Recent window messages per ``(agent_id, conversation)``; write-through via commits.

    A window of plain rows (``is_plain``) is kept as the store read it (``application.stored_messages``),
    the very tuples of a statement (``at_position``: nothing is built for a row a prompt only reads),
    and each row is made a ``Message`` the first time something asks for messages (:meth:`window`);
    a prompt of plain turns is composed from the rows (:meth:`stored_window`). A window holding any
    other row is made messages as it is loaded. Messages committed later join as messages (the rows
    of a window kept as a statement's tuples are named first: ``StoredRow``).
    ``max_history`` caps how many recent messages a window keeps (``None``: unbounded —
    compaction, not a count, is the real bound).

    ``at_position`` (a store whose log position is a query, SQLite): a window not kept is read in
    one statement with the log's position, and that position is the freshness check (offered to
    ``last_position`` when it is the :class:`PositionReads` of a prompt): a cold window costs one
    statement, not three. Without it, the position is read first, then the state and the rows.
    """

    def __init__(self, source: WindowSource, last_position: Callable[[], int],
                 max_history: int | None = None, *, follows: Follows | None = None,
                 at_position: WindowAtPositionReader | None = None) -> None:
        self._source = source
        self._max = max_history
        self._lock = threading.RLock()
        self._windows: OrderedDict[tuple[str, ConversationKey], list[StoredItem]] = OrderedDict()
        self._follower = LogFollower(last_position, follows)
        self._generation = 0
        self._at_position = at_position
        self._offer = last_position.offer if isinstance(last_position, PositionReads) else None

    def window(self, agent_id: str, conversation: ConversationKey) -> list[Message]:
        key = (agent_id, conversation)
        return self._messages(key, *self._items(key))

    def stored_window(self, agent_id: str, conversation: ConversationKey) -> Sequence[StoredItem]:
        """The window, each message as a ``Message`` or, when it is a plain row (``is_plain``), maybe
        as the row read (a ``StoredRow``, or a window of the bare tuples of a statement, in
        ``StoredRow``'s order): a window holding any other row was made messages as it was loaded."""
        return self._items((agent_id, conversation))[0]

    def _messages(self, key: tuple[str, ConversationKey], items: list[StoredItem], generation: int) -> list[Message]:
        if set(map(type, items)) <= _MESSAGE_TYPE:
            return items  # type: ignore[return-value]
        messages = [item if type(item) is Message else message_of(item, *key) for item in items]  # type: ignore[arg-type]
        with self._lock:
            if generation == self._generation and key in self._windows:
                self._windows[key] = list(messages)  # no commit since: the same window, as messages
        return messages

    def _items(self, key: tuple[str, ConversationKey]) -> tuple[list[StoredItem], int]:
        """A copy of the window of ``key`` (loaded and kept if not cached) and the generation it is of."""
        with self._lock:
            cached = self._windows.get(key)
            if cached is not None and self._at_position is not None:
                # One statement: the position, and the window again only if the log moved.
                read = self._read(key, unless_at=self._follower.seen)
                if read.rows is None:
                    self._windows.move_to_end(key)
                    return _copy(cached), self._generation
                return self._keep(key, read), self._generation
            if self._at_position is None and not self._follower.fresh():
                self._windows.clear()
                self._generation += 1  # what was read before this is not kept
                cached = None
            if cached is not None:
                self._windows.move_to_end(key)
                return _copy(cached), self._generation
            generation = self._generation
        if self._at_position is not None:
            read = self._read(key, unless_at=None)
        else:
            agent_id, conversation = key
            state = self._source.conversation_state(agent_id, conversation)
            rows = self._source.stored_messages(agent_id, conversation, after_id=state.window_start_id,
                                                limit=self._max)
            read = WindowAtPosition(_READ_BEFORE, state.checkpoint_message_id, rows)
        with self._lock:
            # A commit landed while loading: the load may be stale, so don't keep it.
            if generation != self._generation:
                return self._loaded(key, read), -1
            return self._keep(key, read), self._generation

    def _read(self, key: tuple[str, ConversationKey], *, unless_at: int | None) -> WindowAtPosition:
        """The log's position and, unless it is ``unless_at``, the window, in one statement; the
        position serves the prompt's other caches."""
        assert self._at_position is not None
        read = self._at_position(*key, self._max, unless_at)
        if self._offer is not None:
            self._offer(read.position)
        return read

    def _keep(self, key: tuple[str, ConversationKey], read: WindowAtPosition) -> list[StoredItem]:
        """Under the lock: keep the window read (a read with a position it saw as the log's last:
        the other windows, read before the log moved there, go); a copy of it."""
        if read.position != _READ_BEFORE and not self._follower.saw(read.position):
            self._windows.clear()
            self._generation += 1
        loaded = self._windows[key] = self._loaded(key, read)
        self._windows.move_to_end(key)
        while len(self._windows) > MAX_CACHED_CONVERSATIONS:
            self._windows.popitem(last=False)
        return _copy(loaded)

    @staticmethod
    def _loaded(key: tuple[str, ConversationKey], read: WindowAtPosition) -> list[StoredItem]:
        """The window as kept: rows as read when all are plain (``PlainRows``), else messages; the
        checkpoint first."""
        rows: list[StoredRow] = read.rows or []  # type: ignore[assignment]  # a list of its own (read for this load)
        # A window holding a row that a prompt cannot take as it is (a tool call or result, a
        # system message) is made messages once, as it is loaded; one of plain rows stays rows,
        # as read (a statement's tuples are not named: a prompt reads them by position, in C).
        plain = all_plain(rows)
        loaded: list[StoredItem] = cast(list[StoredItem], rows) if plain else [message_of(r, *key) for r in rows]
        # The checkpoint of a compaction stands for everything before it: it leads the window.
        checkpoint_id = read.checkpoint_message_id
        if checkpoint_id is not None:
            ident: Callable[[Any], int] = _ROW_ID if plain else id_of
            checkpoint = [m for m in loaded if ident(m) == checkpoint_id]
            loaded = checkpoint + [m for m in loaded if ident(m) != checkpoint_id]
        return PlainRows(loaded) if plain and loaded else loaded

    def drop(self, keys: Iterable[tuple[str, ConversationKey]]) -> None:
        """Forget the windows of ``keys`` (another process wrote to them, ADR-0064): read again
        when next asked for; a window being read meanwhile is not kept."""
        with self._lock:
            self._generation += 1
            for key in keys:
                self._windows.pop(key, None)

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
                    if type(window) is PlainRows:  # a message joins: rows only no longer (maybe)
                        window = self._windows[e.agent_id, e.conversation] = list(window)
                    if window is not None:
                        if window and type(window[-1]) is tuple:  # a statement's rows: named first
                            window[:] = map(stored_row, window)
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


_ROLE, _METADATA = itemgetter(StoredRow._fields.index("role")), itemgetter(StoredRow._fields.index("metadata_json"))
_ROW_ID = itemgetter(StoredRow._fields.index("id"))
_PLAIN_ROLES = frozenset(("user", "assistant"))
_MESSAGE_TYPE = frozenset((Message,))


def _copy(window: list[StoredItem]) -> list[StoredItem]:
    """A copy of a kept window for one caller, of its type (``PlainRows`` stays so)."""
    return PlainRows(window) if type(window) is PlainRows else list(window)


def all_plain(rows: Sequence[StoredRow]) -> bool:
    """Whether every row is plain (``stored_messages.is_plain``: a user's or an assistant's that
    records no tool call and answers none), without a call per row in Python: the roles as a set,
    the metadata joined (each a JSON object, ``{...}``: no key can span two of them)."""
    if not _PLAIN_ROLES.issuperset(map(_ROLE, rows)):
        return False
    metadata = "".join(map(_METADATA, rows))
    return TOOL_CALLS_KEY not in metadata and TOOL_CALL_ID_KEY not in metadata


class _ReadThrough(Generic[K, V]):
    """A bounded read-through cache of ``load(key)``, least recently used first out; emptied by
    what ``LogFollower.observe`` refuses, and each key an event makes stale (``stale``) dropped.
    A load that a commit overtook is returned but not kept."""

    def __init__(self, load: Callable[[K], V], last_position: Callable[[], int], *, most: int,
                 follows: Follows | None = None) -> None:
        self._load = load
        self._most = most
        self._lock = threading.Lock()
        self._values: OrderedDict[K, V] = OrderedDict()
        self._follower = LogFollower(last_position, follows)
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
        loaded = self._load_together(key)
        value = loaded[key]
        with self._lock:
            if generation != self._generation:
                return value
            for k, v in loaded.items():
                if v is not None or self._keeps_none:
                    self._values[k] = v
                    self._values.move_to_end(k)
            while len(self._values) > self._most:
                self._values.popitem(last=False)
        return value

    def _load_together(self, key: K) -> dict[K, V]:
        """The value of ``key``, and of any other key the same read gives (kept too)."""
        return {key: self._load(key)}

    def drop(self, keys: Iterable[K] = (), where: Callable[[K, V], bool] | None = None) -> None:
        """Forget the values of ``keys`` and those ``where`` holds for (another process changed
        them, ADR-0064): loaded again when next asked for; a load under way is not kept."""
        with self._lock:
            self._generation += 1
            gone = [*keys, *(k for k, v in self._values.items() if where is not None and where(k, v))]
            for key in gone:
                self._values.pop(key, None)

    def on_commit(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:
            self._generation += 1
            if not self._follower.observe(recorded):
                self._values.clear()
                return
            if not self._values:
                return  # nothing kept, nothing to drop
            for item in recorded:
                if type(event := item.event) is ev.MessageAppended:
                    continue  # a message makes no key stale (the usual commit: messages only)
                key = self._stale(event)
                if key is not None:
                    self._values.pop(key, None)

    _keeps_none = False

    def _stale(self, event: ev.DomainEvent) -> K | None:
        """The key ``event`` makes stale, if any (never one for a message: it is not asked)."""
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
