"""The embedding API: what a host application imports (``fermix_memory.MemorySystem``).

Each public method turns the host's arguments into a command (application/host_input.py) and
runs the use case; the methods live in four parts by purpose (records, jobs, turns,
files). :meth:`MemorySystem.session` binds who talks where once (api/session.py).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from fermix_memory.application.commands import StartSession, TrustName
from fermix_memory.application.embedder import Embedder
from fermix_memory.application.errors import SemanticRecallUnavailable, StorageError
from fermix_memory.application.model_ports import ChatModel, Tracer
from fermix_memory.application.ports import Clock
from fermix_memory.application.settings import Settings
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.entrypoints.api.base import folder
from fermix_memory.entrypoints.api.files import FilesApi
from fermix_memory.entrypoints.api.jobs import JobsApi
from fermix_memory.entrypoints.api.model_bound import model_bound
from fermix_memory.entrypoints.api.receipts import ReceiptsApi
from fermix_memory.entrypoints.api.records import RecordsApi
from fermix_memory.entrypoints.api.retention import RetentionApi
from fermix_memory.entrypoints.api.session import Session
from fermix_memory.entrypoints.api.turns import TurnsApi
from fermix_memory.entrypoints.bootstrap import App, bootstrap


def open_app(home: Path | None, **options: Any) -> App:
    """``bootstrap(home, **options)``, a failure to reach the home's folder raised as
    :class:`StorageError`: how an opening of a home starts (``MemorySystem.open``, and a command
    that hands checked input to a use case itself)."""
    try:
        return bootstrap(home, **options)
    except OSError as exc:
        raise StorageError(f"cannot open the memory home {home}: {exc.strerror or exc}") from exc


def _has(value: object, method: str) -> bool:
    return callable(getattr(value, method, None))


class MemorySystem(RecordsApi, JobsApi, TurnsApi, FilesApi, RetentionApi, ReceiptsApi):
    """Durable, auditable memory for one home folder. Thread-safe; use as a context manager.

    Open with :meth:`open`. Every write is committed (and hash-chained into the event log)
    before the call returns.
    """

    def __init__(self, app: App) -> None:
        self._app = app
        self._closed = False
        self._close_lock = threading.Lock()
        # A host that ends (or drops this object) without close() still gets close()'s work done:
        # at interpreter exit, before its threads are torn down (ADR-0055).
        self._closer = weakref.finalize(self, app.close)

    @classmethod
    def open(
        cls,
        home: str | os.PathLike[str] | None = None,
        *,
        config: Settings | Mapping[str, Any] | None = None,
        providers: Sequence[ChatModel] | None = None,
        clock: Clock | None = None,
        tracer: Tracer | None = None,
        create: bool = True,
        readonly: bool = False,
        embedder: Embedder | None = None,
    ) -> MemorySystem:
        """Open (creating if needed) the memory at ``home`` (default ``$FERMIX_HOME`` or ``~/.fermix``).

        ``config`` replaces ``<home>/config.toml``: a :class:`Settings`, or a mapping in the file's
        shape, ``{"fermix_core": {"memory": {"durability": "full"}, "providers": [{...}]}}``
        (``{}``: every default). The mapping holds nothing but ``fermix_core``: any other key (a
        misspelt root, a section without it) raises :class:`ConfigError`, as do unknown keys and
        wrong types inside it. ``providers`` (chat models, tried in order) override the configured
        provider route.
        ``create=False`` raises :class:`HomeNotFound` instead of creating a missing home;
        ``readonly=True`` opens an existing home so that nothing can be written (every write
        raises :class:`ReadOnlyStore`): for audits, read-only mounts and copies.
        Recall by meaning (ADR-0043, ADR-0044) is on by default when the ``[semantic]`` extra is
        installed (``[fermix_core.memory] recall_by_meaning``): messages and rows are embedded in
        the background, and :meth:`recall` is hybrid unless a mode is asked for; ``embedder``
        gives the embedder to use instead of the one the settings choose.
        """
        path = None if home is None else folder(home, "home")
        if providers is not None and (isinstance(providers, str) or not isinstance(providers, Sequence)
                                      or not all(_has(p, "complete") for p in providers)):
            raise InvalidArgument("providers must be a list of chat models (objects with a complete method)")
        for value, method, what in ((clock, "now", "clock"), (tracer, "record", "tracer"),
                                    (embedder, "embed", "embedder")):
            if value is not None and not _has(value, method):
                raise InvalidArgument(f"{what} must be an object with a {method} method")
        if not isinstance(create, bool) or not isinstance(readonly, bool):
            raise InvalidArgument("create and readonly must be True or False")
        return cls(open_app(path, config=config, clock=clock, providers=providers, tracer=tracer,
                            create=create, readonly=readonly, embedder=embedder))

    def session(self, *, agent_id: str, owner_id: str, conversation: Any, trust: TrustName = "guest",
                context_window: int | None = None) -> Session:
        """A handle on one conversation with one owner: every call of the returned
        :class:`Session` names ``agent_id``, ``owner_id``, ``conversation`` and ``trust`` for you."""
        start = self._command(StartSession, dict(agent_id=agent_id, owner_id=owner_id, conversation=conversation,
                                                 trust=trust, context_window=context_window))
        return Session(self, start)

    @model_bound
    def fill_vectors(self) -> int:
        """Embed now, on this thread, every message and row still waiting for its vector (done in
        the background anyway; for a host that wants recall by meaning to see everything at once,
        e.g. after an import). The vectors stored; ``0`` without an embedder."""
        self._check_open()
        return 0 if self._app.vectors is None else self._app.vectors.fill_now()

    def embed_waiting(self, progress: Callable[[int, int], None] | None = None) -> int:
        """As :meth:`fill_vectors`, for an operator's run over a whole home: ``progress(done,
        total)`` after each batch, each batch committed on its own (interrupted, what was stored
        stays and a later call goes on from there), and a failure raised, typed
        (:class:`SemanticRecallUnavailable` too when the memory has no embedder or is read-only)."""
        self._check_open()
        if self._app.vectors is None:
            raise SemanticRecallUnavailable("this memory makes no vectors: open it writable, with an embedder")
        return self._app.vectors.embed_waiting(progress)

    def vectors_waiting(self) -> int:
        """How many messages and rows still wait for their vector: search by meaning does not see
        them yet (``0`` without an embedder)."""
        self._check_open()
        return 0 if self._app.semantic is None else self._app.semantic.waiting()

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._app.settings

    @property
    def recalls_by_meaning(self) -> bool:
        """Whether this memory has an embedder: :meth:`recall` is then hybrid by default (ADR-0044)."""
        return self._app.semantic is not None

    @model_bound
    def close(self) -> None:
        with self._close_lock:
            if not self._closed:
                self._closed = True
                self._closer()

    def __enter__(self) -> MemorySystem:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
