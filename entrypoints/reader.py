"""The composition root of the read-only commands: a home opened for reading, with its readers
and nothing of the writer side (ADR-0063).

:func:`~fermix_memory.entrypoints.bootstrap.bootstrap` wires every use case, the model route
and the background worker, and so imports them all; a command that only reads (``fermix memory
list``) needs none of them. :meth:`MemoryReader.open` opens the store as a read-only
``MemorySystem.open(readonly=True)`` does (the same checks: the home must hold a database, the
schema is checked, not migrated, a store holding an unfinished copy is refused) and keeps only
the store and its queries. Each read method checks its arguments and answers as
``MemorySystem``'s method of the same name does; the modules a method needs beyond the row
queries (the log's decoding, the audit, the prompt files' rules) are imported when it is
first called.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from fermix_memory.adapters.clock import SystemClock
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.values import check_identifier, check_int
from fermix_memory.entrypoints.home import HEAD_NAME, open_store, require_home, resolve_home, resolve_settings
from fermix_memory.entrypoints.storage import open_postgres, refuse_unfinished_copy, storage_url

if TYPE_CHECKING:
    from fermix_memory.adapters.sql import audit
    from fermix_memory.adapters.sql.head import Head
    from fermix_memory.application.query_ports import ResourceRevision
    from fermix_memory.application.settings import Settings
    from fermix_memory.domain.erased_rows import ErasedRow
    from fermix_memory.domain.memory import Memory
    from fermix_memory.domain.messages import Message


def _optional_id(value: object, what: str) -> str | None:
    return None if value is None else check_identifier(value, what)


def _row_id(value: object, what: str) -> int:
    from fermix_memory.application.host_input import row_id

    return row_id(value, what)


def _resource_name(name: str) -> str:
    from fermix_memory.application.prompt_files import check_resource_name

    return check_resource_name(name)


def _conversation(value: object) -> Any:
    from fermix_memory.application.message_input import conversation_key

    return conversation_key(value)


def _open_store(home: Path, settings: Settings) -> tuple[Any, Any]:
    """The store the settings name and its queries, read-only; closed on failure."""
    url = storage_url(settings)
    if url is not None:  # the PostgreSQL store (ADR-0029)
        storage = open_postgres(url, readonly=True, chains=settings.storage.chains, head_file=home / HEAD_NAME)
        store, queries = storage.store, storage.queries
    else:
        from fermix_memory.adapters.sqlite.queries import SqliteQueries

        require_home(home)
        store = open_store(home, settings, readonly=True)
        queries = SqliteQueries(store.reader)
    try:
        refuse_unfinished_copy(store, str(getattr(store, "url", None) or home))
    except BaseException:
        store.close()
        raise
    return store, queries


class MemoryReader:
    """A memory opened for reading only: the reads of ``MemorySystem`` the read-only commands
    use, over the store and its queries. Use as a context manager."""

    def __init__(self, home: Path, settings: Settings, store: Any, queries: Any) -> None:
        self.home = home
        self.settings = settings
        self._store = store
        self._queries = queries
        self._clock = SystemClock()

    @classmethod
    def open(cls, home: str | os.PathLike[str] | None = None) -> MemoryReader:
        """The memory at ``home`` (default ``$FERMIX_HOME`` or ``~/.fermix``), which must exist:
        :class:`HomeNotFound` otherwise, and nothing is created."""
        path = resolve_home(home)
        settings = resolve_settings(path, None)
        try:
            store, queries = _open_store(path, settings)
        except OSError as exc:
            from fermix_memory.application.errors import StorageError

            raise StorageError(f"cannot open the memory home {path}: {exc.strerror or exc}") from exc
        return cls(path, settings, store, queries)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> MemoryReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # --- memory rows -------------------------------------------------------------------------------

    def memories(self, *, agent_id: str | None = None, owner_id: str | None = None,
                 include_archived: bool = True, as_of: datetime | str | None = None) -> list[Memory]:
        """As ``MemorySystem.memories``: every row, or the rows as they were at ``as_of``."""
        if not isinstance(include_archived, bool):
            raise InvalidArgument("include_archived must be true or false")
        agent, owner = _optional_id(agent_id, "agent_id"), _optional_id(owner_id, "owner_id")
        if as_of is not None:
            from fermix_memory.application.as_of import all_memories_as_of, check_moment

            moment = check_moment(as_of, self._clock.now())
            return all_memories_as_of(self._store, moment, agent_id=agent, owner_id=owner,
                                      include_archived=include_archived)
        rows: list[Memory] = self._queries.all_memories(agent_id=agent, owner_id=owner,
                                                        include_archived=include_archived)
        return rows

    def erased_memories(self, *, as_of: datetime | str, agent_id: str | None = None,
                        owner_id: str | None = None) -> list[ErasedRow]:
        """As ``MemorySystem.erased_memories``: the rows that stood at ``as_of`` and were erased after."""
        from fermix_memory.adapters.sql.erasure_log import SqlErasureLog
        from fermix_memory.application.as_of import check_moment, erased_as_of

        agent, owner = _optional_id(agent_id, "agent_id"), _optional_id(owner_id, "owner_id")
        moment = check_moment(as_of, self._clock.now())
        return erased_as_of(self._store, SqlErasureLog(self._store.reader), moment, agent_id=agent, owner_id=owner)

    def explain(self, memory_id: int) -> dict[str, Any]:
        """As ``MemorySystem.explain``: the row and the events and messages behind it."""
        from fermix_memory.adapters.sql.codec import CONVERTER
        from fermix_memory.application.explain import explain_memory

        found = explain_memory(self._store, self._queries, _row_id(memory_id, "memory row"))
        return dict(CONVERTER.unstructure(found))

    # --- messages ----------------------------------------------------------------------------------

    def message_page(self, agent_id: str, conversation: Any, *, limit: int = 20, before_id: int | None = None,
                     after_id: int | None = None, page: int = 1, owner_id: str | None = None) -> list[Message]:
        """As ``MemorySystem.message_page``: one page of a conversation's stored messages."""
        from fermix_memory.entrypoints.api.message_pages import message_page

        return message_page(self._queries, agent_id, conversation, limit=limit, before_id=before_id,
                            after_id=after_id, page=page, owner_id=owner_id)

    # --- prompt-file revisions ---------------------------------------------------------------------

    def resources(self, *, agent_id: str | None = None, owner_id: str | None = None) -> list[ResourceRevision]:
        """As ``MemorySystem.resources``: the current revision of every resource."""
        rows: list[ResourceRevision] = self._queries.resources(agent_id=_optional_id(agent_id, "agent_id"),
                                                               owner_id=_optional_id(owner_id, "owner_id"))
        return rows

    def resource_history(self, name: str, *, agent_id: str, owner_id: str,
                         limit: int | None = None) -> list[ResourceRevision]:
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        if limit is not None:
            check_int(limit, "limit", minimum=0)
        rows: list[ResourceRevision] = self._queries.resource_history(agent_id, owner_id, _resource_name(name),
                                                                      limit)
        return rows

    def resource_revision(self, name: str, revision: int, *, agent_id: str, owner_id: str) -> ResourceRevision:
        from fermix_memory.application.errors import NotFound

        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        found: ResourceRevision | None = self._queries.resource_revision(
            agent_id, owner_id, _resource_name(name), _row_id(revision, "revision"))
        if found is None:
            raise NotFound(f"{name} of {agent_id}/{owner_id} has no revision {revision}")
        return found

    def resource_as_of(self, name: str, as_of: datetime | str, *, agent_id: str, owner_id: str
                       ) -> ResourceRevision | None:
        from fermix_memory.application.as_of import check_moment, revision_as_of

        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        name = _resource_name(name)
        return revision_as_of(self._store, agent_id, owner_id, name, check_moment(as_of, self._clock.now()))

    def resource_diff(self, name: str, a: int, b: int, *, agent_id: str, owner_id: str) -> str:
        from fermix_memory.application.prompt_files import unified_diff

        return unified_diff(self.resource_revision(name, a, agent_id=agent_id, owner_id=owner_id),
                            self.resource_revision(name, b, agent_id=agent_id, owner_id=owner_id))

    # --- the log -----------------------------------------------------------------------------------

    def head(self) -> Head:
        """As ``MemorySystem.head``: the log's anchor."""
        found: Head = self._store.head()
        return found

    def log_entries(self, *, after: int = 0, kind: str | None = None) -> Iterator[audit.LogEntry]:
        """As ``MemorySystem.log_entries``: every log entry after ``after`` (of one ``kind``)."""
        from fermix_memory.adapters.sql import audit

        return audit.log_entries(self._store.reader(), after=check_int(after, "after", minimum=0),
                                 kind=_optional_id(kind, "kind"))
