"""What other processes commit, heard through ``LISTEN/NOTIFY`` (ADR-0029).

Every write of a PostgreSQL store sends ``NOTIFY fermix_events`` with the payload
``"<writer token> <first position> <last position> <chains> <eager> <streams>"`` (:func:`payload`):
the server delivers it only if the write commits. ``chains``: the chains the write extended,
comma-separated (``-`` on a log of one chain); ``eager``: ``e`` when the write holds events every
host acts on at once (prompt-file revisions, erasures: :data:`EAGER_KINDS`), else ``-``; then
the streams it appended to, space-separated (their names are percent-encoded: no spaces), or
``*`` when they would not fit the server's 8,000-byte limit ("many": a host drops everything).

Each store keeps one listening connection, on a daemon thread (:class:`ChangeFeed`), which
hands what each wake-up brought of foreign writes, coalesced (:class:`Heard`), to the store: the
store drops what its caches hold of those streams, to be read again when next needed, and reads
and hands to its listeners only the eager events (ADR-0064). A wake-up drains every notification
waiting, and after one the thread lets :data:`COALESCE_S` pass before it looks again, so a busy
database wakes a host at most that often (a quiet one at once). While the feed is not listening
(starting, reconnecting after a lost connection, with backoff) nothing can be trusted to arrive:
caches then ask the server.
"""

from __future__ import annotations

import functools
import logging
import select
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

import attrs

from fermix_memory.domain import events as ev

log = logging.getLogger("fermix_memory.storage")

CHANNEL = "fermix_events"
APPLICATION = "fermix change feed"  # how its connection shows in pg_stat_activity
STOP = "stop"
MANY = "*"  # the streams of a write that would not fit a notification
PAYLOAD_MAX = 7_900  # bytes: the server refuses 8,000 or more
# What every host hands its listeners at once (read from the log, decoded): a prompt file on its
# disk changes, or an erasure must reach every cache and file. The rest only makes caches stale.
EAGER_KINDS: frozenset[str] = frozenset(
    cls.kind for cls in (ev.ResourceRevised, ev.ResourceRolledBack, *ev.ERASURE_RECORDS))
WAIT_S = 5.0  # the longest the thread waits for a notification before looking at its stop flag
# The shortest time between two wake-ups of the feed's thread that bring notifications: one that
# comes sooner waits out the rest, and what arrived meanwhile is heard with it. A wake-up costs
# the thread as much CPU as handling dozens of notifications, so a busy database is heard in
# batches, each notification at most this late; after a quiet moment one is heard at once.
COALESCE_S = 0.02
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 5.0
KEEPALIVE: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}


def notify_sql() -> str:
    return f"SELECT pg_notify('{CHANNEL}', %s)"


@attrs.frozen
class Note:
    """One foreign write as its notification tells it: its first and last positions, on a log of
    several chains the chains it extended (empty: one chain), whether it holds eager events, and
    the streams it appended to (``None``: too many to name)."""

    first: int
    last: int
    chains: frozenset[int]
    eager: bool
    streams: frozenset[str] | None


def payload(token: str, first: int, last: int, chains: Iterable[int] = (), *, eager: bool = True,
            streams: Collection[str] | None = None) -> str:
    """The notification of a write (see the module); ``streams`` ``None``: many."""
    head = f"{token} {first} {last} {','.join(map(str, chains)) or '-'} {'e' if eager else '-'} "
    if streams is None or not streams:
        return head + MANY
    named = " ".join(sorted(streams))
    return head + (named if len(head) + len(named.encode()) <= PAYLOAD_MAX else MANY)


def parse_note(rest: str) -> Note:
    """A notification's :class:`Note` (after its writer token); ValueError when malformed."""
    first, last, chains, eager, *streams = rest.split(" ")
    if eager not in ("e", "-") or not streams:
        raise ValueError("not a note")
    return Note(int(first), int(last), frozenset() if chains == "-" else frozenset(int(c) for c in chains.split(",")),
                eager == "e", None if streams == [MANY] else frozenset(streams))


@attrs.define
class Heard:
    """What one wake-up brought of other processes' writes, coalesced: each chain's last position
    named (chain 0 for a write on a log of one chain), the streams named (``None``: a write too
    many to name was among them) and the eager writes' :class:`Note`."""

    last: dict[int, int] = attrs.Factory(dict)
    streams: set[str] | None = attrs.Factory(set)
    eager: list[Note] = attrs.Factory(list)

    def add(self, rest: str) -> None:
        """Add one notification (after its writer token); ValueError when malformed. Only an eager
        write's note is made: the others' streams are only gathered."""
        first, last_text, chains, eager, streams = rest.split(" ", 4)
        if eager not in ("e", "-") or not streams:
            raise ValueError("not a note")
        last, _ = int(last_text), int(first)
        named = (0,) if chains == "-" else [int(c) for c in chains.split(",")]
        if eager == "e":
            self.eager.append(parse_note(rest))
        for chain in named:
            if last > self.last.get(chain, -1):
                self.last[chain] = last
        if streams == MANY:
            self.streams = None
        elif self.streams is not None:
            self.streams.update(streams.split(" "))

    def __bool__(self) -> bool:
        return bool(self.last)


def _keep(pending: list[str], note: Any) -> None:
    pending.append(note.payload)


def _arrived(pgconn: Any, waiting: Any, pending: list[str], own: bytes, notes: list[bytes | str],
             gather_until: float, busy: bool) -> int:
    """How many notifications arrived within ``WAIT_S``; those of other stores (every one waiting:
    one batch) go to ``notes``, read from libpq directly: a wait on the socket, then what its input
    holds (a few microseconds a notification, where the driver's generator of notifications costs
    a hundred). This store's own (its listeners already saw them) are left out undecoded. Before
    ``gather_until`` (the last wake-up was less than ``COALESCE_S`` ago) it lets them arrive until
    then: one wake-up for them all; ``busy`` (the last wake-up brought several), it does not even
    wait for the first."""
    arrived = len(pending)
    if pending:  # arrived while the connection ran a statement
        notes.extend(n for n in pending if not n.startswith(own.decode()))
        pending.clear()
    if busy and (early := gather_until - time.monotonic()) > 0:
        time.sleep(early)
    if waiting.poll(0 if arrived else WAIT_S * 1000):
        if (early := gather_until - time.monotonic()) > 0:
            time.sleep(early)
        pgconn.consume_input()  # a lost connection raises here
        while (note := pgconn.notifies()) is not None:
            arrived += 1
            if not note.extra.startswith(own):
                notes.append(note.extra)
    return arrived


class ChangeFeed:
    """One ``LISTEN`` connection per store, on a daemon thread that reconnects with backoff.

    ``on_listening(conn)`` runs each time listening (re)starts, on the listening connection,
    before any notification is handled; ``on_foreign(notes)`` for the writes of other writer
    tokens whose notifications arrived together, coalesced (:class:`Heard`); ``on_idle(conn)`` every
    ``WAIT_S`` while listening (a check for writes whose notification was lost). ``listening`` is
    True only between the start and a loss: when it is False, notifications may have been missed."""

    def __init__(self, url: str, token: str, on_listening: Callable[[Any], None],
                 on_foreign: Callable[[Heard], None],
                 on_idle: Callable[[Any], None] | None = None) -> None:
        self._url = url
        self._token = token
        self._own = f"{token} ".encode()
        self._on_listening = on_listening
        self._on_foreign = on_foreign
        self._on_idle = on_idle
        self._stop = threading.Event()
        self.listening = False
        self._thread = threading.Thread(target=self._run, name="fermix-change-feed", daemon=True)
        self._thread.start()

    def stop(self, wake: Callable[[], object]) -> None:
        """Stop listening; ``wake`` sends this feed's own stop notification so the thread does not
        wait out its timeout (best effort: without it the thread ends within ``WAIT_S``)."""
        self._stop.set()
        self.listening = False
        try:
            wake()
        except Exception:
            log.debug("could not wake the change feed", exc_info=True)
        self._thread.join(timeout=2 * WAIT_S)

    def _run(self) -> None:
        import psycopg

        delay = BACKOFF_FIRST_S
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=5, application_name=APPLICATION,
                                     **KEEPALIVE) as conn:
                    pending: list[str] = []  # what arrived while the connection ran a statement
                    conn.add_notify_handler(functools.partial(_keep, pending))
                    conn.execute(f"LISTEN {CHANNEL}")
                    if self._stop.is_set():  # stopped before listening began: its wake-up was not heard
                        return
                    self._on_listening(conn)
                    self.listening = True
                    delay = BACKOFF_FIRST_S
                    self._listen(conn, pending)
            except Exception as exc:
                if not self._stop.is_set():
                    log.warning("lost the PostgreSQL change feed (caches ask the server until it is back): %s",
                                " ".join(str(exc).split()))
            finally:
                self.listening = False
            self._stop.wait(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    def _listen(self, conn: Any, pending: list[str]) -> None:
        waiting = select.poll()
        waiting.register(conn.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        checked = gather_until = time.monotonic()
        notes: list[bytes | str] = []
        arrived = 0
        while not self._stop.is_set():
            arrived = _arrived(conn.pgconn, waiting, pending, self._own, notes, gather_until, arrived > 1)
            if arrived:
                gather_until = time.monotonic() + COALESCE_S
            if notes:
                self._handle(notes)
                notes.clear()
            if self._on_idle is not None and not self._stop.is_set() and time.monotonic() - checked >= WAIT_S:
                self._on_idle(conn)  # every WAIT_S: what no notification brought
                checked = time.monotonic()

    def _handle(self, texts: list[bytes | str]) -> None:
        heard = Heard()
        for text in texts:
            rest = (text.decode() if isinstance(text, bytes) else text).partition(" ")[2]
            if rest == STOP:
                continue  # a store's stop
            try:
                heard.add(rest)
            except ValueError:
                log.warning("ignored a malformed notification on %s: %.80r", CHANNEL, text)
        if heard:
            self._on_foreign(heard)
