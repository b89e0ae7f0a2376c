"""Which store a memory lives in, and the storage adapters wired for it (ADR-0029).

A memory lives in the SQLite file ``memory.db`` of its home unless a PostgreSQL URL is
configured: ``FERMIX_DATABASE_URL`` (which wins) or ``[fermix_core.storage] url``. Each store
comes with the same ports: the event store, the host's queries, the job queries, erasure, the
search index's upkeep (SQLite only: PostgreSQL's GIN indexes keep themselves) and the audit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from fermix_memory.application.errors import ConfigError, UnfinishedCopy
from fermix_memory.application.settings_storage import DATABASE_URL_ENV, storage_url_problem

if TYPE_CHECKING:  # the adapters are imported when a store is wired: a read-only command needs few of them
    from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
    from fermix_memory.application.caches import WindowAtPositionReader
    from fermix_memory.application.history import ImportKeyReader
    from fermix_memory.application.log_position import Follows
    from fermix_memory.application.query_ports import VectorIndex
    from fermix_memory.application.settings import Settings
    from fermix_memory.application.store_ports import Erasure, SearchIndex
    from fermix_memory.entrypoints.log_audit import LogAudit


def _recorded_import_keys() -> ImportKeyReader:
    from fermix_memory.application.history import recorded_import_keys

    return recorded_import_keys


def storage_url(settings: Settings, env: Mapping[str, str] | None = None) -> str | None:
    """The PostgreSQL URL this memory lives at: ``FERMIX_DATABASE_URL`` when set (it wins over the
    file, so each replica's environment can point it elsewhere), else ``[fermix_core.storage] url``;
    ``None``: the SQLite file of the home. A URL with a password is refused in both places."""
    env = os.environ if env is None else env
    url = env.get(DATABASE_URL_ENV, "").strip()
    if url:
        problem = storage_url_problem(url)
        if problem is not None:
            raise ConfigError(f"{DATABASE_URL_ENV} is {problem}")
        return url
    return settings.storage.url


@attrs.frozen
class Storage:
    """One store and the adapters over it."""

    store: Any  # SqliteEventStore | PostgresEventStore: the EventStore port and its commit hooks
    queries: Any  # the host's queries (application.host_queries.HostQueries)
    jobs: Any  # application.jobs.JobQueries
    erasure: Erasure
    index: SearchIndex | None
    audit: LogAudit
    # The log's last position as the caches check it before serving (ADR-0029): SQLite's own
    # read; PostgreSQL's known in memory while its change feed listens.
    cache_position: Callable[[], int]
    # Whether committed events follow on from what a cache saw (None: positions without gaps).
    cache_follows: Follows | None = None
    # The import keys a conversation holds, as this store reads them inside a write (ADR-0037).
    import_keys: ImportKeyReader = attrs.field(factory=_recorded_import_keys)
    # Vectors of messages and rows (ADR-0043).
    vectors: VectorIndex | None = None
    # A window read in one statement with the log's position ``cache_position`` reads (ADR-0062):
    # SQLite's; None where that position is not a query (PostgreSQL's change feed knows it).
    cache_windows: WindowAtPositionReader | None = None


def refuse_unfinished_copy(store: Any, where: str) -> None:
    """:class:`UnfinishedCopy` when the store at ``where`` holds a copy cut off before its last
    events (ADR-0051): one line naming the command that finishes it."""
    source = store.unfinished_copy()
    if source is not None:
        import shlex

        raise UnfinishedCopy(
            f"{where} holds an unfinished copy of the home {source} (a 'fermix storage migrate' that was cut off)"
            f" and is not opened until it is finished: fermix --home {shlex.quote(source)} storage migrate --to"
            f" {shlex.quote(where)} --resume")


def sqlite_storage(store: SqliteEventStore) -> Storage:
    from fermix_memory.adapters.sql.job_queries import SqlJobQueries
    from fermix_memory.adapters.sqlite.erasure import SqliteErasure
    from fermix_memory.adapters.sqlite.import_keys import read_import_keys as sqlite_import_keys
    from fermix_memory.adapters.sqlite.queries import SqliteQueries, sqlite_reading
    from fermix_memory.adapters.sqlite.search_index import SqliteSearchIndex
    from fermix_memory.adapters.sqlite.vectors import SqliteVectorIndex
    from fermix_memory.entrypoints.log_audit import LogAudit

    queries = SqliteQueries(store.reader)
    index = SqliteSearchIndex(store)
    queries.before_marks = index.mark_messages  # the marks appends left waiting (ADR-0085)
    queries.before_full_text = index.index_text  # the full-text entries new rows wait for (ADR-0091)
    return Storage(store, queries, SqlJobQueries(store.reader, sqlite_reading),
                   SqliteErasure(store), index, LogAudit(store), store.last_position,
                   import_keys=sqlite_import_keys, vectors=SqliteVectorIndex(store, reading=sqlite_reading),
                   cache_windows=queries.window_at_position)


def open_postgres(url: str, *, readonly: bool = False, chains: int | None = None,
                  head_file: Path | None = None) -> Storage:
    """The PostgreSQL store at ``url`` (migrated on open) and its adapters; one clear line when the
    extra is missing, the URL is wrong, the server refuses, or the database does not exist."""
    from fermix_memory.adapters.postgres.connection import EXTRA_MISSING, require_driver

    require_driver()
    try:
        from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    except ImportError:
        raise ConfigError(EXTRA_MISSING) from None
    return postgres_storage(PostgresEventStore(url, readonly=readonly, chains=chains, head_file=head_file))


def postgres_storage(store: Any) -> Storage:
    """The adapters over an open ``PostgresEventStore``."""
    from fermix_memory.adapters.postgres.erasure import PostgresErasure
    from fermix_memory.adapters.postgres.import_keys import read_import_keys as postgres_import_keys
    from fermix_memory.adapters.postgres.queries import PostgresQueries
    from fermix_memory.adapters.postgres.vectors import PostgresVectorIndex
    from fermix_memory.adapters.sql.job_queries import SqlJobQueries
    from fermix_memory.entrypoints.log_audit import LogAudit

    jobs = SqlJobQueries(store.reader)  # plain SQL, read through the pool
    return Storage(store, PostgresQueries(store), jobs, PostgresErasure(store), None, LogAudit(store),
                   store.cache_position, store.cache_follows, postgres_import_keys,
                   PostgresVectorIndex(store))
