"""What other processes commit, heard through ``LISTEN/NOTIFY`` (ADR-0029).

Every write of a PostgreSQL store sends, in its own transaction, ``NOTIFY fermix_events`` with
the payload ``"<writer token> <first position> <last position>[ <chains>]"`` (about 60 bytes, far below
the server's 8,000-byte limit whatever the write): the server delivers it only if the write
commits, and in commit order. Each store keeps one listening connection, on a daemon thread
(:class:`ChangeFeed`), which hands the positions of every foreign write to the store; the
store reads those events and gives them to its commit listeners (caches, prompt files) as if
they were its own. While the feed is not listening (starting, reconnecting after a lost
connection, with backoff) nothing can be trusted to arrive: the store then answers "where is
the log" from the server itself, as it did before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("fermix_memory.storage")

CHANNEL = "fermix_events"
APPLICATION = "fermix change feed"  # how its connection shows in pg_stat_activity
BATCH = 500  # notifications handled with one read of the log
# One foreign write: its first and last positions and, on a log of several chains, its chains.
Span = tuple[int, int, frozenset[int]]
STOP = "stop"
WAIT_S = 5.0  # the longest the thread waits for a notification before looking at its stop flag
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 5.0
KEEPALIVE: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}


def notify_sql() -> str:
    return f"SELECT pg_notify('{CHANNEL}', %s)"


def payload(token: str, first: int, last: int, chains: Iterable[int] = ()) -> str:
    """``chains``: on a log of several, the chains the write extended (other writes may hold
    positions between ``first`` and ``last``); a comma-separated list, at most about 5,000 bytes."""
    listed = ",".join(map(str, chains))
    return f"{token} {first} {last}" + (f" {listed}" if listed else "")


class ChangeFeed:
    """One ``LISTEN`` connection per store, on a daemon thread that reconnects with backoff.

    ``on_listening(conn)`` runs each time listening (re)starts, on the listening connection,
    before any notification is handled; ``on_foreign(spans)`` for the writes of other writer
    tokens whose notifications arrived together (one read of the log serves them all), a span
    ``(first, last, chains)`` each; ``on_idle(conn)`` every ``WAIT_S`` while listening (a check
    for writes whose notification was lost). ``listening`` is True only between the start and a
    loss: when it is False, notifications may have been missed."""

    def __init__(self, url: str, token: str, on_listening: Callable[[Any], None],
                 on_foreign: Callable[[list[Span]], None],
                 on_idle: Callable[[Any], None] | None = None) -> None:
        self._url = url
        self._token = token
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
                    conn.execute(f"LISTEN {CHANNEL}")
                    if self._stop.is_set():  # stopped before listening began: its wake-up was not heard
                        return
                    self._on_listening(conn)
                    self.listening = True
                    delay = BACKOFF_FIRST_S
                    checked = time.monotonic()
                    while not self._stop.is_set():
                        # The first notification, then all that arrived with it: one batch, one read.
                        notes = [n.payload for n in conn.notifies(timeout=WAIT_S, stop_after=1)]
                        if notes:
                            notes += [n.payload for n in conn.notifies(timeout=0, stop_after=BATCH)]
                            self._handle(notes)
                        if self._on_idle is not None and not self._stop.is_set() \
                                and time.monotonic() - checked >= WAIT_S:
                            self._on_idle(conn)  # every WAIT_S: what no notification brought
                            checked = time.monotonic()
            except Exception as exc:
                if not self._stop.is_set():
                    log.warning("lost the PostgreSQL change feed (caches ask the server until it is back): %s",
                                " ".join(str(exc).split()))
            finally:
                self.listening = False
            self._stop.wait(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    def _handle(self, texts: list[str]) -> None:
        spans: list[Span] = []
        for text in texts:
            token, _, rest = text.partition(" ")
            if token == self._token or rest == STOP:
                continue  # this store's own commit (its listeners already saw it), or a store's stop
            try:
                first, last, *listed = rest.split()
                chains = frozenset(int(c) for c in listed[0].split(",")) if listed else frozenset()
                if len(listed) > 1:
                    raise ValueError("too many parts")
                spans.append((int(first), int(last), chains))
            except ValueError:
                log.warning("ignored a malformed notification on %s: %.80r", CHANNEL, text)
        if spans:
            self._on_foreign(spans)
