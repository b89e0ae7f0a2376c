"""The composition root: the one place where adapters are wired into the use cases.

Nothing happens at import. ``bootstrap`` takes settings and optional adapters (a clock, model
providers) and returns the wired :class:`App`; the embedding API, the CLI and the replay tool
all go through it. It opens the storage (:func:`open_storage`), builds the model route
(:func:`build_model_route`), wires the caches and use cases (:func:`wire_caches`,
:func:`wire_app`) and, on a writable memory, starts the upkeep (:func:`start_upkeep`). Where the
home is and what it holds is :mod:`~fermix_memory.entrypoints.home`'s.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from fermix_memory.adapters.clock import SystemClock
from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
from fermix_memory.adapters.providers.route import (
    KeyNeeded,
    OfflineRules,
    ProviderRoute,
    build_provider,
    close_model,
    key_present,
)
from fermix_memory.adapters.sql.codec import decode_payload
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.tokens_tiktoken import TiktokenCounter
from fermix_memory.application import commands as cmd_
from fermix_memory.application.as_of import prompt_readers_as_of
from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.caches import ConversationStore, MemoryRowCache, PromptFileCache
from fermix_memory.application.compaction import Compactor, guessed_window
from fermix_memory.application.composer import (
    RevisionReader,
    StoredWindowReader,
    compose_anthropic,
    compose_openai,
)
from fermix_memory.application.embedder import Embedder
from fermix_memory.application.erasure_finishing import finish_erasures
from fermix_memory.application.errors import SemanticRecallUnavailable
from fermix_memory.application.forget import Forgetting
from fermix_memory.application.history import HistoryService
from fermix_memory.application.host_queries import HostQueries
from fermix_memory.application.index_upkeep import IndexUpkeep
from fermix_memory.application.jobs import JobQueries
from fermix_memory.application.log_position import PositionReads
from fermix_memory.application.log_transfer import LogTransfer
from fermix_memory.application.memory_writes import MemoryWriter, OperationOutcome
from fermix_memory.application.message_input import MAX_METADATA_BYTES
from fermix_memory.application.model_ports import ChatModel, Tracer
from fermix_memory.application.ports import Clock, PromptFileSink, TokenCounter
from fermix_memory.application.prompt_files import PromptFiles
from fermix_memory.application.query_ports import VectorIndex
from fermix_memory.application.recall import RecallResult, recall
from fermix_memory.application.resource_rollback import ResourceRollback
from fermix_memory.application.retention import Retention
from fermix_memory.application.review_queue import ReviewsLeftAtClose
from fermix_memory.application.reviewer import Reviewer, ReviewResult
from fermix_memory.application.semantic import SemanticSearch
from fermix_memory.application.settings import Settings
from fermix_memory.application.shown_prompt_files import ShownPromptFileCache
from fermix_memory.application.stale_streams import StaleStreams
from fermix_memory.application.store_ports import EventStore
from fermix_memory.application.tools import MemoryTools
from fermix_memory.application.tracing import EventLogTracer
from fermix_memory.application.turns import CommandResult, PreflightResult, TurnService
from fermix_memory.application.vector_upkeep import VectorUpkeep
from fermix_memory.entrypoints.home import (
    HEAD_NAME,
    make_home,
    open_store,
    require_home,
    resolve_home,
    resolve_settings,
)
from fermix_memory.entrypoints.log_audit import LogAudit
from fermix_memory.entrypoints.recall_by_meaning import chosen_embedder
from fermix_memory.entrypoints.receipts import issue_missing, wire_receipts
from fermix_memory.entrypoints.retention import start_retention, wire_retention
from fermix_memory.entrypoints.storage import (
    Storage,
    open_postgres,
    postgres_storage,
    refuse_unfinished_copy,
    sqlite_storage,
    storage_url,
)

log = logging.getLogger("fermix_memory")


@attrs.define
class App:
    """Everything the entry points use, wired once: use cases and ports, never an adapter class."""

    home: Path
    settings: Settings
    clock: Clock
    store: EventStore
    queries: HostQueries
    jobs: JobQueries
    audit: LogAudit
    conversations: ConversationStore
    rows: MemoryRowCache
    prompt_revisions: PromptFileCache
    positions: PositionReads
    history: HistoryService
    memory: MemoryWriter
    tokens: TokenCounter
    prompt_files: PromptFiles
    rollback: ResourceRollback
    reviewer: Reviewer
    background: BackgroundWorker
    model_for: Callable[[str], ChatModel]
    compactor: Compactor
    turns: TurnService
    tools: MemoryTools
    forgetting: Forgetting
    transfer: LogTransfer
    # Recall by meaning (ADR-0043): the background upkeep of vectors, when an embedder was given.
    vectors: VectorUpkeep | None = None
    semantic: SemanticSearch | None = None
    retention: Retention | None = None  # the retention policies (ADR-0080)
    # What bootstrap opened (store, providers it built, the background worker), closed in reverse.
    resources: ExitStack = attrs.field(factory=ExitStack, repr=False)

    def close(self) -> None:
        """Close everything bootstrap opened, newest first; a second call does nothing."""
        self.resources.close()

    # --- use cases: each takes its checked command (application/commands.py) -----------------

    def append_message(self, cmd: cmd_.AppendMessage) -> int:
        return self.history.append(cmd)

    def append_messages(self, cmds: Sequence[cmd_.AppendMessage],
                        metadata_limit: int = MAX_METADATA_BYTES) -> list[int]:
        return self.history.append_many(cmds, metadata_limit=metadata_limit)

    def appends_at_once(self, agent_id: str, owner_id: str) -> bool:
        """Whether this owner's messages may be appended at once on the caller's thread (ADR-0110):
        the store commits without waiting, and their commit renders no file."""
        return self.store.writes_at_once and self.prompt_files.welcomed(agent_id, owner_id)

    def write_memory(self, cmd: cmd_.WriteMemory) -> list[OperationOutcome]:
        return self.memory.write(cmd)

    def write_memories(self, cmds: Sequence[cmd_.WriteMemory],
                       value_limit: int | None = None) -> list[list[OperationOutcome]]:
        return self.memory.write_all(cmds, value_limit=value_limit)

    def recall(self, cmd: cmd_.Recall) -> RecallResult:
        return recall(self.queries, cmd, self.semantic, self.clock.now())

    def before_turn(self, cmd: cmd_.BeforeTurn) -> PreflightResult:
        return self.turns.before_turn(cmd)

    def after_turn(self, cmd: cmd_.AfterTurn) -> Future[ReviewResult]:
        return self.turns.after_turn(cmd, self.reviewer, self.background)

    def handle_command(self, cmd: cmd_.HandleCommand) -> CommandResult | None:
        return self.turns.handle_command(cmd)

    def compose_prompt(self, cmd: cmd_.ComposePrompt, *, as_of: datetime | None = None
                       ) -> list[dict[str, Any]] | tuple[str, list[dict[str, Any]]]:
        """The prompt of a turn now, or, at a past moment ``as_of``, the prompt composed then: the
        prompt files and the window as they were, folded from the log (ADR-0033). Either way it
        only reads: the files are recorded by the writer side (ADR-0057)."""
        revision: RevisionReader
        stored: StoredWindowReader
        if as_of is None:
            revision, stored = self.prompt_revisions.revision, self.conversations.stored_window
        else:
            revision, stored = prompt_readers_as_of(self.store, as_of, self.settings.memory.max_conversation_history)
        with self.positions:  # one read of the log's position for the three caches a prompt consults
            if cmd.style is cmd_.Style.ANTHROPIC:
                return compose_anthropic(revision, stored, cmd.agent_id, cmd.owner_id, cmd.conversation,
                                         system=cmd.system)
            return compose_openai(revision, stored, cmd.agent_id, cmd.owner_id, cmd.conversation,
                                  system=cmd.system)

    def dispatch_tool(self, cmd: cmd_.DispatchTool) -> dict[str, Any]:
        return self.tools.dispatch(cmd)


def open_storage(home: Path, settings: Settings, url: str | None, store: Any, *, readonly: bool,
                 resume_copy: bool, opened: ExitStack) -> Storage:
    """The store the settings name (a PostgreSQL URL, else the home's SQLite file), or the one
    given, and its adapters; closed by ``opened``. A store holding an unfinished copy is refused
    unless ``resume_copy``."""
    if url is not None:  # the PostgreSQL store (ADR-0029); the home keeps config and prompt files
        storage = open_postgres(url, readonly=readonly, chains=settings.storage.chains, head_file=home / HEAD_NAME)
    elif store is not None and not isinstance(store, SqliteEventStore):
        storage = postgres_storage(store)  # one a caller opened on a PostgreSQL database
    else:
        storage = sqlite_storage(open_store(home, settings, readonly=readonly) if store is None else store)
    opened.callback(storage.store.close)
    if not resume_copy:  # before anything reads or repairs what may be half a copy
        refuse_unfinished_copy(storage.store, str(getattr(storage.store, "url", None) or home))
    return storage


def wire_caches(storage: Storage, settings: Settings, count_tokens: Callable[[str], int]
                ) -> tuple[ConversationStore, MemoryRowCache, PromptFileCache, PositionReads]:
    """The read caches of windows, rows and prompt-file revisions, each kept current by the
    commits, and the reads of the log's position they check their freshness by."""
    queries, store = storage.queries, storage.store
    positions = PositionReads(storage.cache_position)
    conversations = ConversationStore(queries, positions, settings.memory.max_conversation_history,
                                      follows=storage.cache_follows, at_position=storage.cache_windows)
    rows = MemoryRowCache(queries, positions, follows=storage.cache_follows)
    prompt_revisions = ShownPromptFileCache(queries, count_tokens, positions, follows=storage.cache_follows)
    store.add_commit_listener(conversations.on_commit)
    store.add_commit_listener(rows.on_commit)
    store.add_commit_listener(prompt_revisions.on_commit)
    if hasattr(store, "add_stale_listener"):  # other processes write to it: their streams (ADR-0064)
        store.add_stale_listener(StaleStreams(conversations, rows, prompt_revisions))
    return conversations, rows, prompt_revisions, positions


def build_model_route(
    settings: Settings, providers: Sequence[ChatModel] | None, tracer: Tracer, clock: Clock,
    env: Mapping[str, str] | None = None, *, owned: ExitStack,
) -> Callable[[str], ChatModel]:
    """The agent's provider route: given providers, else the configured ones in order, else the
    offline ``rules`` extractor (a labelled fallback, never used when a provider is configured).

    Providers built here from the settings are closed by ``owned``; given ones belong to the caller.
    """
    env = os.environ if env is None else env
    chain: list[ChatModel]
    if providers:
        chain = list(providers)
    elif settings.providers:
        chain = []
        for provider in settings.providers:
            chain.append(build_provider(provider, env) if key_present(provider, env) else KeyNeeded(provider, env))
            owned.callback(close_model, chain[-1])
    else:
        log.info("no model provider configured: the reviewer uses the offline rules extractor (low recall)")
        chain = [OfflineRules()]

    def model_for(agent_id: str) -> ChatModel:
        return ProviderRoute(chain, tracer, clock.now, agent_id=agent_id)

    return model_for


def vector_index(storage: Storage) -> VectorIndex:
    """The store's vectors, or one clear error where they are not built yet."""
    if storage.vectors is None:
        raise SemanticRecallUnavailable("this store keeps no vectors: recall by meaning is not available on it")
    return storage.vectors


def wire_app(home: Path, settings: Settings, storage: Storage, clock: Clock, tokens: TokenCounter,
             model_for: Callable[[str], ChatModel], background: BackgroundWorker, files: PromptFileSink,
             embedder: Embedder | None) -> App:
    """The caches and use cases over an open store, wired into the :class:`App` (nothing started)."""
    store, queries = storage.store, storage.queries
    conversations, rows, prompt_revisions, positions = wire_caches(storage, settings, tokens.count)
    prompt_files = PromptFiles(store, queries, files, tokens.count, clock)
    store.add_after_commit(prompt_files.on_commit)
    writer = MemoryWriter(store, clock, derived=prompt_files)
    reviewer = Reviewer(
        store, queries, writer, clock, settings.memory, model_for, tokens.count,
        timeout_s=settings.timeouts.llm_buffered_s, holder=f"{socket.gethostname()}:{os.getpid()}",
    )
    history = HistoryService(store, clock, storage.import_keys)
    compactor = Compactor(
        store, queries, conversations.window, reviewer, clock, settings.compaction, model_for, tokens.count,
        context_window=settings.compaction.context_window or None, guessed_window=guessed_window(settings),
        timeout_s=settings.timeouts.llm_buffered_s,
    )
    semantic = None if embedder is None else SemanticSearch(
        vector_index(storage), embedder, floor=settings.memory.recall_min_similarity)
    forgetting = Forgetting(store, storage.erasure, prompt_files, clock,
                            follow_up=wire_receipts(home, store, clock))  # ADR-0079
    return App(
        home=home, settings=settings, clock=clock, store=store, queries=queries, jobs=storage.jobs,
        audit=storage.audit, conversations=conversations, rows=rows, prompt_revisions=prompt_revisions,
        positions=positions,
        history=history, memory=writer, tokens=tokens, prompt_files=prompt_files, reviewer=reviewer,
        rollback=ResourceRollback(store, queries, prompt_files, writer, clock),
        background=background, model_for=model_for,
        compactor=compactor, turns=TurnService(compactor, history),
        tools=MemoryTools(writer, queries, storage.jobs, forget=settings.memory.forget_tool,
                          erase=forgetting.forget_memory, semantic=semantic),
        forgetting=forgetting,
        transfer=LogTransfer(store, decode_payload, prompt_files.repair, follow_up=forgetting.follow_up),
        semantic=semantic, retention=wire_retention(storage, settings, prompt_files, forgetting),
    )


def start_upkeep(app: App, storage: Storage, embedder: Embedder | None, opened: ExitStack) -> VectorUpkeep | None:
    """Start the work a writable memory keeps doing in the background (reviews left at the last
    close, the search index, vectors) and mend what a crash left (prompt files, an unfinished
    erasure); each is stopped by ``opened`` before the worker closes. The vectors' upkeep, if any."""
    store = storage.store  # with the commit hooks the EventStore port leaves out
    left_reviews = ReviewsLeftAtClose(app.reviewer, storage.queries, app.background)
    opened.callback(left_reviews.stop)
    left_reviews.start()
    if storage.index is not None:
        upkeep = IndexUpkeep(storage.index, app.background)  # ADR-0020
        store.add_after_commit(upkeep.on_commit)
        opened.callback(upkeep.stop)  # before the worker's close, which waits for a running job
        opened.callback(upkeep.mark_now)  # first at close: the file keeps every message's marks
        upkeep.start()
    app.prompt_files.repair()  # files are derived: a crash between commit and write is mended here
    finish_erasures(storage.erasure)
    issue_missing(app.forgetting.follow_up)  # receipts a crash left unsigned (ADR-0079)
    if app.retention is not None:
        start_retention(app.retention, app.settings, app.background, app.clock, opened)  # ADR-0080
    if embedder is None:
        return None
    vectors = VectorUpkeep(vector_index(storage), embedder, app.background)  # ADR-0043
    store.add_after_commit(vectors.on_commit)
    opened.callback(vectors.stop)
    vectors.start()
    return vectors


def bootstrap(
    home: str | os.PathLike[str] | None = None,
    *,
    config: Settings | Mapping[str, Any] | None = None,
    clock: Clock | None = None,
    tokens: TokenCounter | None = None,
    providers: Sequence[ChatModel] | None = None,
    tracer: Tracer | None = None,
    create: bool = True,
    readonly: bool = False,
    store: Any = None,
    files: PromptFileSink | None = None,
    background: BackgroundWorker | None = None,
    embedder: Embedder | None = None,
    resume_copy: bool = False,
) -> App:
    """Wire the app on ``home``. ``create=False`` refuses (:class:`HomeNotFound`) a home without a
    ``memory.db`` instead of creating one; ``readonly=True`` (implies ``create=False``) opens the
    database so that nothing can be written, for audits of a read-only mount or copy.

    ``store`` (from :func:`open_store` on the same home, or a ``PostgresEventStore``), ``files``
    (where prompt files go) and ``background`` (where after-turn work runs) replace what would be
    built here, for a caller that needs a hold on them (fault injection); the app closes a given
    store and worker too. ``embedder`` turns on recall by meaning (ADR-0043): messages and rows
    get their vectors in the background; without one, the settings choose (ADR-0044).
    A store holding an unfinished copy is refused (:class:`UnfinishedCopy`) unless ``resume_copy``:
    ``storage migrate --resume`` finishing it (ADR-0051)."""
    home_path = resolve_home(home)
    settings = resolve_settings(home_path, config)
    if embedder is None:
        embedder = chosen_embedder(settings)  # SemanticRecallUnavailable when turned on without the extra
    url = storage_url(settings) if store is None else None
    # Fails fast (no network) when the encoding is missing, before anything is opened; its tables
    # load at the first count (a read-only open never counts, nor checks).
    tokens = tokens or TiktokenCounter(settings.memory.token_encoding, check=not readonly)
    if (readonly or not create) and url is None:
        require_home(home_path)
    elif not readonly:  # a read-only open creates nothing: no folder, no head file, no schema (ADR-0051)
        make_home(home_path)
    clock = clock or SystemClock()
    with ExitStack() as opened:  # every resource opened below is closed if a later step fails
        storage = open_storage(home_path, settings, url, store, readonly=readonly, resume_copy=resume_copy,
                               opened=opened)
        model_for = build_model_route(settings, providers, tracer or EventLogTracer(storage.store), clock,
                                      owned=opened)
        background = BackgroundWorker("fermix-background") if background is None else background
        # Closed first: it may be mid-call on a provider or the store; queued reviews run meanwhile (ADR-0055).
        opened.callback(background.close, settings.timeouts.close_wait_s)
        app = wire_app(home_path, settings, storage, clock, tokens, model_for, background,
                       PromptFileFolder(home_path) if files is None else files, embedder)
        if app.semantic is not None:  # the threads of queries' passes end with the memory (ADR-0086)
            opened.callback(app.semantic.close)
        if not readonly:
            app.vectors = start_upkeep(app, storage, embedder, opened)
        app.resources = opened.pop_all()
        return app
