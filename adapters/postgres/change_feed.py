"""What other processes commit, heard through ``LISTEN/NOTIFY`` (ADR-0029).

Every write of a PostgreSQL store sends, in its own transaction, ``NOTIFY fermix_events`` with
the payload ``"<writer token> <first position> <last position>"`` (about 60 bytes, far below
the server's 8,000-byte limit whatever the write): the server delivers it only if the write
commits, and in commit order. Each store keeps one listening connection, on a daemon thread
(:class:`ChangeFeed`), which hands the positions of every foreign write to the store; the
store reads those events and gives them to its commit listeners (caches, prompt files) as if
they were its own. While the feed is not listening (starting, reconnecting after a lost
connection, with backoff) nothing can be trusted to arrive: the store then answers "where is
the log" from the server itself, as it did before, and when listening (re)starts it hands its
listeners every write it has not heard of since it opened (:class:`Heard` keeps count), so a
host's prompt files follow the writes made while it was not listening too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("fermix_memory.storage")

CHANNEL = "fermix_events"
STOP = "stop"
WAIT_S = 5.0  # the longest the thread waits for a notification before looking at its stop flag
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 5.0
KEEPALIVE: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}


class Heard:
    """Which log positions a store has handed to its listeners: every one up to ``through``, and
    the ranges above it that came before some write still unheard (a write is one range)."""

    def __init__(self, through: int) -> None:
        self.through = through
        self._above: list[tuple[int, int]] = []  # sorted, disjoint, none touching through

    def add(self, first: int, last: int) -> None:
        """Positions ``first..last`` were handed over."""
        through, above = self.through, list[tuple[int, int]]()
        for lo, hi in sorted([*self._above, (first, last)]):
            if lo <= through + 1:
                through = max(through, hi)
            elif above and lo <= above[-1][1] + 1:
                above[-1] = (above[-1][0], max(above[-1][1], hi))
            else:
                above.append((lo, hi))
        self.through, self._above = through, above

    def missing(self, first: int, last: int) -> list[tuple[int, int]]:
        """The ranges of ``first..last`` not handed over yet, in order."""
        gaps, start = list[tuple[int, int]](), max(first, self.through + 1)
        for lo, hi in self._above:
            if lo > last:
                break
            if lo > start:
                gaps.append((start, lo - 1))
            start = max(start, hi + 1)
        if start <= last:
            gaps.append((start, last))
        return gaps


def notify_sql() -> str:
    return f"SELECT pg_notify('{CHANNEL}', %s)"


def payload(token: str, first: int, last: int) -> str:
    return f"{token} {first} {last}"


class ChangeFeed:
    """One ``LISTEN`` connection per store, on a daemon thread that reconnects with backoff.

    ``on_listening(conn)`` runs each time listening (re)starts, on the listening connection,
    before any notification is handled; ``on_foreign(first, last)`` for each write of another
    writer token. ``listening`` is True only between the two: when it is False, notifications
    may have been missed."""

    def __init__(self, url: str, token: str, on_listening: Callable[[Any], None],
                 on_foreign: Callable[[int, int], None]) -> None:
        self._url = url
        self._token = token
        self._on_listening = on_listening
        self._on_foreign = on_foreign
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
                with psycopg.connect(self._url, autocommit=True, connect_timeout=5, **KEEPALIVE) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if self._stop.is_set():  # stopped before listening began: its wake-up was not heard
                        return
                    self._on_listening(conn)
                    self.listening = True
                    delay = BACKOFF_FIRST_S
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=WAIT_S):
                            self._handle(note.payload)
                            if self._stop.is_set():
                                break
            except Exception as exc:
                if not self._stop.is_set():
                    log.warning("lost the PostgreSQL change feed (caches ask the server until it is back): %s",
                                " ".join(str(exc).split()))
            finally:
                self.listening = False
            self._stop.wait(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    def _handle(self, text: str) -> None:
        token, _, rest = text.partition(" ")
        if token == self._token or rest == STOP:
            return  # this store's own commit (its listeners already saw it), or a store's stop
        try:
            first, last = (int(part) for part in rest.split())
        except ValueError:
            log.warning("ignored a malformed notification on %s: %.80r", CHANNEL, text)
            return
        self._on_foreign(first, last)
