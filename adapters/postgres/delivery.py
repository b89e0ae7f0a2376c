"""How committed writes reach a PostgreSQL store's listeners (ADR-0029, ADR-0031): its own
commits as they commit, other processes' as the change feed brings them (and, when a
notification was lost, as the check of the chains' heads finds them), each event once; and the
position the caches check their freshness against."""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fermix_memory.adapters.postgres.change_feed import ChangeFeed, Span
from fermix_memory.adapters.sql.event_log import recorded_from_row
from fermix_memory.adapters.sql.event_store import SqlEventStore
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.application.streams import chain_for

log = logging.getLogger("fermix_memory.storage")

RECENT = 10_000  # positions remembered as delivered (one heard again after that is handed over again: harmless)
READ_BATCH = 1000


class FeedDelivery(SqlEventStore):
    """The delivery of committed events to the listeners of a store on a shared server;
    :meth:`_start_delivery` sets it up with each chain's last position at open."""

    chains: int
    _feed: ChangeFeed | None

    def _start_delivery(self, chain_known: list[int]) -> None:
        self._lock = threading.Lock()
        self._recent: collections.OrderedDict[int, None] = collections.OrderedDict()  # positions delivered lately
        self._epoch = 0  # several chains: counts the change feed's starts (events may have been missed)
        # Each chain's last position the listeners were given (from the open on: the open's repair
        # covers what came before).
        self._chain_known = chain_known
        self._unknown = itertools.count(-1, -1)

    def rows(self, sql: str, params: Any = (), *, doing: str = "reading the PostgreSQL store") -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _committed(self, recorded: list[RecordedEvent]) -> None:
        with self._lock:
            self._delivered(recorded)
        if self._head_file is not None:
            self._head_file.advanced(None, len(recorded))
        self._deliver(recorded)

    def _listening(self, conn: Any) -> None:
        """The feed (re)started listening: the writes it did not hear of (made while it was not
        listening, or whose notification a lost connection took with it) reach the listeners now,
        as notifications would have brought them."""
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

    def _foreign(self, spans: list[Span]) -> None:
        """Other processes committed the writes ``spans`` (first and last positions and, on a log of
        several chains, whose other writes may hold positions in between, their chains): one read
        gives their events to the listeners (a cache drops exactly what they change), then the
        position checks see them."""
        first, last = min(s[0] for s in spans), max(s[1] for s in spans)
        wanted = _Spans(spans)
        recorded = [recorded_from_row(row) for row in self.rows(
            "SELECT position, stream, version, kind, schema, payload FROM events"
            " WHERE payload IS NOT NULL AND position BETWEEN ? AND ? ORDER BY position", (first, last),
            doing="reading other processes' writes")
            if wanted.holds(int(row[0]), functools.partial(self._chain_of, str(row[1])))]
        self._heard(recorded)

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
        was not listening, or its writer died right after committing): read and deliver what it
        missed, in batches, so no cache or prompt file keeps it from the host for long."""
        for chain, position in conn.execute("SELECT chain, position FROM chain_heads").fetchall():
            chain, position = int(chain), int(position)
            with self._lock:
                after = self._chain_known[chain] if chain < len(self._chain_known) else position
            if position <= after:
                continue
            log.info("chain %d moved to %d without a notification heard: catching up", chain, position)
            for start in range(after, position, READ_BATCH):
                end = min(start + READ_BATCH, position)
                missed = [recorded_from_row(row) for row in conn.execute(
                    "SELECT position, stream, version, kind, schema, payload FROM events WHERE position > %s"
                    " AND position <= %s AND payload IS NOT NULL ORDER BY position", (start, end)).fetchall()
                    if self._chain_of(str(row[1])) == chain]
                self._heard(missed)
            with self._lock:
                self._seen_in(chain, position)

    @property
    def listening(self) -> bool:
        """Whether the change feed listens now (False: starting, reconnecting, read-only, closed)."""
        return self._feed is not None and self._feed.listening

    def cache_position(self) -> int:
        """The log's last position for the caches' freshness checks: known in memory while the change
        feed listens (own commits and foreign ones as notified), else asked of the server.

        Several chains: positions leave gaps and commit out of order, so the caches follow the
        feed instead: this is the feed's start count while it listens (every commit, own or
        foreign, reaches the listeners), and a value never given before while it does not."""
        feed = self._feed
        listening = feed is not None and feed.listening
        if self.chains > 1:
            return self._epoch if listening else next(self._unknown)
        if not listening:
            return self.last_position()
        return self.known_position()

    def known_position(self) -> int:
        """The last position this store knows of: its own commits and those the feed brought."""
        with self._lock:
            return max(self._chain_known, default=0)

    def cache_follows(self, seen: int, recorded: Sequence[RecordedEvent]) -> tuple[bool, int]:
        """Whether committed events follow on from what a cache saw (see :meth:`cache_position`)."""
        if self.chains == 1:
            return recorded[0].position == seen + 1, recorded[-1].position
        now = self.cache_position()
        return now == seen, now

    def _deliver(self, recorded: list[RecordedEvent]) -> None:
        self._tell_listeners(recorded)
        self._react(recorded)



class _Spans:
    """Which positions a batch of notifications names: a position is in when a span covers it and,
    for a span of a log of several chains, the event's chain is one of the span's."""

    def __init__(self, spans: list[Span]) -> None:
        self._single: dict[int, list[frozenset[int]]] = {}  # the usual one-event write, looked up at once
        self._wide: list[Span] = []
        for first, last, chains in spans:
            if first == last:
                self._single.setdefault(first, []).append(chains)
            else:
                self._wide.append((first, last, chains))

    def holds(self, position: int, chain: Callable[[], int]) -> bool:
        for chains in self._single.get(position, ()):
            if not chains or chain() in chains:
                return True
        return any(first <= position <= last and (not chains or chain() in chains)
                   for first, last, chains in self._wide)
