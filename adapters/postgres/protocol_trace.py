"""libpq's protocol trace of a PostgreSQL store's connection, and the round trips it shows: how
the client's waits for the server per write are counted (benchmarks/postgres.py, the tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore


@contextmanager
def traced(store: PostgresEventStore, trace: Path) -> Iterator[None]:
    """Trace the store's connection into ``trace`` while the block runs (a store opened with
    ``pool_max=1``: its one connection carries every statement)."""
    import psycopg

    with trace.open("w") as out:
        with store._pool.connection() as conn:
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        try:
            yield
        finally:
            with store._pool.connection() as conn:
                conn.pgconn.untrace()


def round_trips(trace: Path) -> int:
    """The client's waits for the server in a trace: each simple query, and each Sync or Flush
    (one right after a Sync is the same wait)."""
    waits, last = 0, ""
    for line in trace.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) > 2 and parts[0] == "F":
            message = parts[2].split(" ")[0]
            waits += message == "Query" or (message in ("Sync", "Flush") and last != "Sync")
            last = message
    return waits
