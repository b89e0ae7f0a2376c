"""One write transaction on ``memory.db``: the shared SQL transaction with SQLite's way of
sharing the log: one writer at a time (the store's group commit), so nothing is locked per chain,
positions run on from the last, and what the writer knew after its last commit carries over."""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from fermix_memory.adapters.sql.event_log import write_chain_heads
from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.domain.log_chain import GENESIS_HASH

# The page cache of the writer while a transaction appends many events at once (an import):
# the log's and the projections' indexes take each batch's rows at places spread over the whole
# file, and with SQLite's default cache (2 MB) the pages a batch changed are spilled to the WAL and
# read back several times within the transaction (an ``append_each`` of ``BULK_EVENTS`` or more).
# Given back when the transaction commits.
BULK_CACHE_KIB = 65_536
# The cache size the writer is given back (SQLite's default, which the connection keeps).
DEFAULT_CACHE_KIB = 2_000

# How many streams' versions a writer keeps between its transactions (beyond: it starts anew).
KNOWN_STREAMS = 4096


@dataclass(slots=True)
class Known:
    """What the one writer knows of the log after its last commit: valid while the database's
    data version (``apsw.Connection.data_version``, which any other connection's commit changes,
    and any write of this one outside a transaction of the writer's own) is still ``data_version``."""

    data_version: int
    position: int
    hash: str
    heads: dict[int, tuple[int, str]]
    versions: dict[str, int]


class SqliteTransaction(SqlTransaction):
    """The :class:`WriteTransaction` handed to use cases inside one write on ``memory.db``.

    ``known``: what the writer knew after its last commit, when nothing wrote since (the head and
    stream versions are then not read again)."""

    # One writer numbers messages in commit order: their marks wait above a mark (ADR-0085).
    MARKS_INLINE = False

    def __init__(self, cursor: apsw.Cursor, chains: int = 1, *, known: Known | None = None) -> None:
        self._known = known
        self.bulk = False  # the page cache was widened for many appends (see :meth:`finish`)
        super().__init__(cursor, chains)

    def known(self, data_version: int) -> Known:
        """What the next transaction of the same writer may start from once this one committed
        (``data_version``: the database's as of the commit)."""
        versions = self.versions if len(self.versions) <= KNOWN_STREAMS else {}
        return Known(data_version, self.position, self.hash, self.heads, versions)

    def _start(self) -> tuple[int, str]:
        """The log's last position and hash as the transaction begins (one chain: its head)."""
        known = self._known
        if known is not None:
            self.versions, self.heads = known.versions, dict(known.heads)
            return known.position, known.hash
        row = self.cursor.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchall()
        position: int = int(row[0][0]) if row else 0
        last_hash = str(row[0][1]) if row else GENESIS_HASH
        if self.chains == 1:
            self.heads[0] = (position, last_hash)
        return position, last_hash

    def _chain_head(self, chain: int) -> tuple[int, str]:
        """The head of ``chain`` as this transaction sees it (read from ``chain_heads`` once)."""
        head = self.heads.get(chain)
        if head is None:
            rows = self.cursor.execute("SELECT position, hash FROM chain_heads WHERE chain = ?", (chain,)).fetchall()
            head = self.heads[chain] = (int(rows[0][0]), str(rows[0][1])) if rows else (0, GENESIS_HASH)
        return head

    def _positions(self, chain: int, count: int) -> list[int]:
        """Positions for ``count`` new events of ``chain``: the log's next ones (one writer)."""
        return list(range(self.position + 1, self.position + count + 1))

    def enter(self, stream: str) -> bool:
        """One writer at a time: no other write of the chain can run meanwhile."""
        return False

    def finish(self) -> None:
        """Before COMMIT: record the new heads of the chains this transaction extended."""
        if self.chains > 1:
            write_chain_heads(self.cursor, self.heads, self.touched)
        if self.bulk:
            self._cache_kib(DEFAULT_CACHE_KIB)

    def _many_appends(self) -> None:
        if not self.bulk:
            self.bulk = True
            self._cache_kib(BULK_CACHE_KIB)

    def _cache_kib(self, kib: int) -> None:
        """Bound the writer connection's page cache (a negative ``cache_size`` is in KiB); the
        pages above the bound are given back as the commit releases them."""
        self.cursor.execute(f"PRAGMA cache_size = {-kib}")

    @staticmethod
    def _version_clash(exc: Exception) -> bool:
        return isinstance(exc, apsw.ConstraintError) and "events.stream, events.version" in str(exc)
