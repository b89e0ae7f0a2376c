"""Which owners' writes commit, as they commit: what a live page of one owner listens to
(ADR-0090). One :class:`OwnerChanges` per memory hears every write once and tells only the
listeners of the owners it touched (their rows, prompt files and erasures): this process's writes
from the store's commit listeners, other processes' from the store's change feed (PostgreSQL's
``LISTEN/NOTIFY``, ADR-0029, ADR-0064). SQLite tells no process of another's commit: there, one
thread per memory looks at the log's last position while anyone listens, and reads the streams of
what moved (never their payloads)."""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import weakref
from collections.abc import Callable, Collection, Iterable
from typing import Any
from urllib.parse import unquote

from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.entrypoints.api.memory_system import MemorySystem

log = logging.getLogger("fermix_memory.server")

# Called with the log position of the write (0: the change feed did not say), on the thread that
# heard it: it must not block, read or write (hand it to a queue).
Listener = Callable[[int], None]
Owner = tuple[str, str]
WATCH_S = 0.1  # how often SQLite's watcher looks at the log's last position while anyone listens
RECENT = 4096  # positions of this process's commits remembered, so the watcher does not tell them again
# Streams keyed by an owner whose writes an owner's page shows: its rows, its prompt files, its erasures.
_SHOWN = frozenset({"memory", "resource", "owner"})


def owner_of(stream: str) -> Owner | None:
    """The (agent, owner) a write to ``stream`` changes the page of, else ``None``."""
    kind, _, rest = stream.partition("/")
    if kind not in _SHOWN:
        return None
    parts = rest.split("/")
    if len(parts) < 2 or (kind == "resource") != (len(parts) == 3):
        return None
    return unquote(parts[0]), unquote(parts[1])


class OwnerChanges:
    """The listeners of each owner's writes on one memory's store (see the module)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._listeners: dict[Owner, dict[int, Listener]] = {}
        self._ids = itertools.count()
        self._recent: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._watcher: threading.Thread | None = None
        self._feed = callable(getattr(store, "add_stale_listener", None))
        store.add_commit_listener(self._committed)
        if self._feed:
            store.add_stale_listener(self._stale)

    def listen(self, agent_id: str, owner_id: str, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` after every committed write touching ``agent_id``'s ``owner_id``, from
        now on; the function returned stops it (a closed page frees its slot)."""
        key, number = (agent_id, owner_id), next(self._ids)
        with self._lock:
            self._listeners.setdefault(key, {})[number] = listener
            if not self._feed and self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, args=(self._store.last_position(),),
                                                 name="fermix-owner-changes", daemon=True)
                self._watcher.start()

        def stop() -> None:
            with self._lock:
                kept = self._listeners.get(key, {})
                kept.pop(number, None)
                if not kept:
                    self._listeners.pop(key, None)

        return stop

    def listening(self) -> int:
        """How many listeners are registered (a closed page's is gone)."""
        with self._lock:
            return sum(len(kept) for kept in self._listeners.values())

    def _tell(self, touched: Iterable[tuple[str, int]]) -> None:
        last: dict[Owner, int] = {}
        for stream, position in touched:
            key = owner_of(stream)
            if key is not None:
                last[key] = max(position, last.get(key, 0))
        if not last:
            return
        with self._lock:
            told = [(listener, last[key]) for key in last for listener in self._listeners.get(key, {}).values()]
        for listener, position in told:
            try:
                listener(position)
            except Exception:
                log.exception("an owner's change listener failed")

    def _committed(self, recorded: list[RecordedEvent]) -> None:
        if not self._feed:
            with self._lock:
                for r in recorded:
                    self._recent[r.position] = None
                while len(self._recent) > RECENT:
                    self._recent.popitem(last=False)
        self._tell((r.stream, r.position) for r in recorded)

    def _stale(self, streams: Collection[str]) -> None:
        self._tell((stream, 0) for stream in streams)

    def _watch(self, seen: int) -> None:
        """SQLite's watcher: while anyone listens, the streams of what other processes committed."""
        stopped = threading.Event()
        while True:
            with self._lock:
                if not self._listeners:
                    self._watcher = None
                    return
            stopped.wait(WATCH_S)
            try:
                if self._store.last_position() <= seen:
                    continue
                logged = [(e.stream, e.position) for e in self._store.read_log(seen)]
            except Exception as exc:
                log.debug("the owners' change watcher could not read the log: %s", exc)
                continue
            if logged:
                seen = max(position for _, position in logged)
                with self._lock:
                    foreign = [(s, p) for s, p in logged if p not in self._recent]
                self._tell(foreign)


_HUBS: weakref.WeakKeyDictionary[MemorySystem, OwnerChanges] = weakref.WeakKeyDictionary()
_HUBS_LOCK = threading.Lock()


def owner_changes(memory: MemorySystem) -> OwnerChanges:
    """The one :class:`OwnerChanges` of ``memory`` (made at the first call)."""
    with _HUBS_LOCK:
        hub = _HUBS.get(memory)
        if hub is None:
            hub = _HUBS[memory] = OwnerChanges(memory._open_app().store)
        return hub
