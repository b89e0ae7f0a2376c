"""How committed writes reach a PostgreSQL store's listeners (ADR-0029, ADR-0031, ADR-0064): its
own commits as they commit; other processes' as the change feed brings their notifications,
lazily: what the caches hold of the streams a foreign write names is dropped, to be read again
when next needed, and only the eager events (prompt-file revisions, erasures) are read and
handed to the listeners; a write whose notification was lost is found by the check of the
chains' heads. And the position the caches check their freshness against."""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fermix_memory.adapters.postgres.change_feed import EAGER_KINDS, ChangeFeed, Heard, Note
from fermix_memory.adapters.sql.event_log import recorded_from_row
from fermix_memory.adapters.sql.event_store import SqlEventStore, tell_each
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.application.streams import chain_for

log = logging.getLogger("fermix_memory.storage")

RECENT = 10_000  # positions remembered as delivered (one heard again after that is handed over again: harmless)
READ_BATCH = 1000
EPOCHS = 1 << 62  # what the caches check is this plus the epoch while the feed listens: never a position
# What a cache is told of foreign writes: the streams they appended to.
StaleListener = Callable[[frozenset[str]], None]
_EAGER = sorted(EAGER_KINDS)
_EAGER_ROWS = ("SELECT position, stream, version, kind, schema, payload FROM events WHERE position BETWEEN ? AND ?"
               " AND payload IS NOT NULL AND kind = ANY(?) ORDER BY position")


class FeedDelivery(SqlEventStore):
    """The delivery of committed events to the listeners of a store on a shared server;
    :meth:`_start_delivery` sets it up with each chain's last position at open."""

    chains: int
    _feed: ChangeFeed | None

    def _start_delivery(self, chain_known: list[int]) -> None:
        self._lock = threading.Lock()
        self._recent: collections.OrderedDict[int, None] = collections.OrderedDict()  # positions delivered lately
        # Counts the change feed's starts and the foreign writes too many to name: what the caches
        # hold is good only while it does not move (see :meth:`cache_position`).
        self._epoch = 0
        # Each chain's last position heard of (from the open on: the open's repair covers what
        # came before).
        self._chain_known = chain_known
        self._unknown = itertools.count(-1, -1)  # never an epoch's value, never a position
        self._stale_listeners: list[StaleListener] = []

    def rows(self, sql: str, params: Any = (), *, doing: str = "reading the PostgreSQL store") -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def add_stale_listener(self, listener: StaleListener) -> None:
        """Call ``listener`` with the streams other processes appended to, as their notifications
        arrive: what it keeps of them is stale (the events are not read; everything a cache keeps
        is stale when :meth:`cache_position` moves). Listeners must not write or read."""
        self._stale_listeners.append(listener)

    def _committed(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:
            self._delivered(recorded)
        if self._head_file is not None:
            self._head_file.advanced(None, len(recorded))
        self._deliver(recorded)

    def _listening(self, conn: Any) -> None:
        """The feed (re)started listening: what the caches hold may miss writes it did not hear of
        (dropped: the epoch moves), and the eager events among them reach the listeners now."""
        with self._lock:
            self._epoch += 1
        self._catch_up(conn)

    def _chain_of(self, stream: str) -> int:
        return chain_for(stream, self.chains)

    def _seen_in(self, chain: int, position: int) -> None:
        if chain < len(self._chain_known):
            self._chain_known[chain] = max(self._chain_known[chain], position)

    def _delivered(self, recorded: Sequence[RecordedEvent]) -> None:
        """Note events handed to the listeners (caller holds the lock): each chain's last position,
        for the check of the heads, and the recent positions, so no event is handed over twice."""
        for r in recorded:
            self._seen_in(self._chain_of(r.stream), r.position)
            self._recent[r.position] = None
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    def _foreign(self, heard: Heard) -> None:
        """Other processes committed the writes ``heard`` brought (those of one wake-up of the
        feed, coalesced): the caches drop what they hold of the streams named, once each (all of
        it when a write was too many to name), and one read, of the eager events only, gives
        those to the listeners."""
        with self._lock:
            for chain, last in heard.last.items():
                self._seen_in(chain, last)
            if heard.streams is None:
                self._epoch += 1
        if heard.streams:
            self._tell_stale(frozenset(heard.streams))
        eager = heard.eager
        if eager:
            wanted = _Spans(eager)
            self._heard([recorded_from_row(row) for row in self.rows(
                _EAGER_ROWS, (min(n.first for n in eager), max(n.last for n in eager), _EAGER),
                doing="reading other processes' writes")
                if wanted.holds(int(row[0]), functools.partial(self._chain_of, str(row[1])))])

    def _tell_stale(self, streams: frozenset[str]) -> None:
        tell_each(self._stale_listeners, streams, "stale listener %r failed")

    def _heard(self, recorded: list[RecordedEvent]) -> None:
        """Hand the listeners what they were not given yet (a notification and the check of the
        heads may both bring an event; two writers' notifications may come in either order)."""
        with self._lock:
            unheard = [r for r in recorded if r.position not in self._recent]
            self._delivered(unheard)
        if unheard:
            self._deliver(unheard)

    def _catch_up(self, conn: Any) -> None:
        """On the feed's connection, when listening (re)starts and every ``WAIT_S`` after: a chain
        whose head moved past what this store heard of lost its notifications (made while the feed
        was not listening, or its writer died right after committing): the caches drop everything
        (the epoch moves) and the eager events it missed are read and delivered, in batches, so
        no prompt file or erasure waits for long."""
        for chain, position in conn.execute("SELECT chain, position FROM chain_heads").fetchall():
            chain, position = int(chain), int(position)
            with self._lock:
                after = self._chain_known[chain] if chain < len(self._chain_known) else position
            if position <= after:
                continue
            log.info("chain %d moved to %d without a notification heard: catching up", chain, position)
            with self._lock:
                self._epoch += 1
            for start in range(after, position, READ_BATCH):
                end = min(start + READ_BATCH, position)
                self._heard([recorded_from_row(row) for row in conn.execute(
                    _EAGER_ROWS.replace("?", "%s"), (start + 1, end, _EAGER)).fetchall()
                    if self._chain_of(str(row[1])) == chain])
            with self._lock:
                self._seen_in(chain, position)

    @property
    def listening(self) -> bool:
        """Whether the change feed listens now (False: starting, reconnecting, read-only, closed)."""
        return self._feed is not None and self._feed.listening

    def cache_position(self) -> int:
        """What the caches check their freshness against. While the change feed listens: the
        epoch, which moves only when the feed (re)starts or a foreign write was too large
        to name its streams (every commit, own or foreign, reaches the caches: own ones as events,
        foreign ones as streams to drop), above any position. Else, on a log of one chain, its last position asked of
        the server; of several (positions leave gaps and commit out of order), a value never given
        before."""
        feed = self._feed
        if feed is not None and feed.listening:
            return EPOCHS + self._epoch
        if self.chains == 1:
            return self.last_position()
        return next(self._unknown)

    def known_position(self) -> int:
        """The last position this store knows of: its own commits and those the feed brought."""
        with self._lock:
            return max(self._chain_known, default=0)

    def cache_follows(self, seen: int, recorded: Sequence[RecordedEvent]) -> tuple[bool, int]:
        """Whether committed events follow on from what a cache saw (see :meth:`cache_position`)."""
        if self.chains == 1 and not self.listening:
            return recorded[0].position == seen + 1, recorded[-1].position
        now = self.cache_position()
        return now == seen, now

    def _deliver(self, recorded: list[RecordedEvent]) -> None:
        self._tell_listeners(recorded)
        self._react(recorded)


class _Spans:
    """Which positions a batch of notes names: a position is in when a note's span covers it and,
    for a note of a log of several chains, the event's chain is one of the note's."""

    def __init__(self, notes: Iterable[Note]) -> None:
        self._single: dict[int, list[frozenset[int]]] = {}  # the usual one-event write, looked up at once
        self._wide: list[Note] = []
        for note in notes:
            if note.first == note.last:
                self._single.setdefault(note.first, []).append(note.chains)
            else:
                self._wide.append(note)

    def holds(self, position: int, chain: Callable[[], int]) -> bool:
        for chains in self._single.get(position, ()):
            if not chains or chain() in chains:
                return True
        return any(n.first <= position <= n.last and (not n.chains or chain() in n.chains) for n in self._wide)
