"""The composition root: the one place where adapters are wired into the use cases.

Nothing happens at import. ``bootstrap`` takes settings and optional adapters (a clock, model
providers) and returns the wired :class:`App`; the embedding API, the CLI and the replay tool
all go through it.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import attrs

from fermix_memory.adapters.clock import SystemClock
from fermix_memory.adapters.config_toml import load_settings
from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
from fermix_memory.adapters.providers.route import OfflineRules, ProviderRoute, build_provider, close_model
from fermix_memory.adapters.sqlite.codec import decode_payload
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.tokens_tiktoken import TiktokenCounter
from fermix_memory.application import commands as cmd_
from fermix_memory.application.as_of import revision_as_of, window_as_of
from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.caches import ConversationStore, MemoryRowCache, PromptFileCache
from fermix_memory.application.compaction import CompactionQueries, Compactor, GuessedWindow
from fermix_memory.application.composer import (
    RevisionReader,
    StoredWindowReader,
    compose_anthropic,
    compose_openai,
)
from fermix_memory.application.embedder import Embedder
from fermix_memory.application.errors import (
    ConfigError,
    HomeNotFound,
    ProviderKeyMissing,
    SemanticRecallUnavailable,
    StorageError,
)
from fermix_memory.application.explain import ExplainQueries
from fermix_memory.application.forget import Forgetting
from fermix_memory.application.history import HistoryService
from fermix_memory.application.index_upkeep import IndexUpkeep
from fermix_memory.application.log_transfer import ImportReport, LogTransfer, check_lines
from fermix_memory.application.memory_writes import MemoryWriter, OperationOutcome
from fermix_memory.application.ports import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    Clock,
    Erasure,
    EventStore,
    MemoryQueries,
    PromptFileSink,
    ResourceRevision,
    TokenCounter,
    Tracer,
    VectorIndex,
)
from fermix_memory.application.prompt_files import PromptFiles, ResourceReader
from fermix_memory.application.recall import RecallResult, recall
from fermix_memory.application.resource_rollback import ResourceRollback
from fermix_memory.application.review_queue import ReviewsLeftAtClose
from fermix_memory.application.reviewer import Reviewer, ReviewResult
from fermix_memory.application.semantic import SemanticSearch
from fermix_memory.application.settings import ProviderSettings, Settings, settings_from_argument
from fermix_memory.application.settings_storage import storage_url_problem
from fermix_memory.application.tools import MemoryTools, ToolContext
from fermix_memory.application.tracing import EventLogTracer
from fermix_memory.application.turns import CommandResult, PreflightResult, TurnService
from fermix_memory.application.vector_upkeep import VectorUpkeep
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey
from fermix_memory.entrypoints.log_audit import LogAudit
from fermix_memory.entrypoints.recall_by_meaning import chosen_embedder
from fermix_memory.entrypoints.storage import (
    Storage,
    open_postgres,
    postgres_storage,
    refuse_unfinished_copy,
    sqlite_storage,
    storage_url,
)

log = logging.getLogger("fermix_memory")

DEFAULT_HOME = Path("~/.fermix")
DEFAULT_CONTEXT_WINDOW = 128_000


def guessed_window(settings: Settings) -> GuessedWindow:
    """The window compaction falls back to when the host names none (ADR-0022): the first
    provider's, which is the reviewer's model and not necessarily the host's, else the default."""
    if settings.providers:
        first = settings.providers[0]
        return GuessedWindow(first.context_window, f"the context_window of provider {first.name!r}, the reviewer's")
    return GuessedWindow(DEFAULT_CONTEXT_WINDOW, "the default")
DB_NAME = "memory.db"
CONFIG_NAME = "config.toml"
HEAD_NAME = "head"  # the last log head this home saw, outside the database (ADR-0011)


def resolve_home(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """``home`` if given, else ``$FERMIX_HOME``, else ``~/.fermix``."""
    env = os.environ if env is None else env
    if home is not None:
        return Path(home).expanduser()
    if env.get("FERMIX_HOME"):
        return Path(env["FERMIX_HOME"]).expanduser()
    return DEFAULT_HOME.expanduser()


def resolve_settings(home: Path, config: Settings | Mapping[str, Any] | None) -> Settings:
    if config is None:
        return load_settings(home / CONFIG_NAME)
    if isinstance(config, Settings):
        return config
    if isinstance(config, Mapping):
        return settings_from_argument(config)
    raise ConfigError("config must be a Settings object, a mapping or None")


class HostQueries(MemoryQueries, ExplainQueries, CompactionQueries, ResourceReader, Protocol):
    """The read side the embedding API shows hosts and operators, beyond what its use cases read."""

    def all_memories(self, *, agent_id: str | None = None, owner_id: str | None = None,
                     include_archived: bool = True) -> list[Memory]: ...

    def iter_messages(self, *, agent_id: str | None = None, batch: int = 5_000) -> Iterator[Message]: ...

    def message_page(self, agent_id: str, conversation: ConversationKey, *, limit: int, before_id: int | None = None,
                     after_id: int | None = None, skip: int = 0, owner_id: str | None = None) -> list[Message]: ...

    def resources(self, *, agent_id: str | None = None, owner_id: str | None = None) -> list[ResourceRevision]: ...

    def resource_history(self, agent_id: str, owner_id: str, name: str,
                         limit: int | None = None) -> list[ResourceRevision]: ...


@attrs.define
class App:
    """Everything the entry points use, wired once: use cases and ports, never an adapter class."""

    home: Path
    settings: Settings
    clock: Clock
    store: EventStore
    queries: HostQueries
    audit: LogAudit
    conversations: ConversationStore
    rows: MemoryRowCache
    prompt_revisions: PromptFileCache
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
    # What bootstrap opened (store, providers it built, the background worker), closed in reverse.
    resources: ExitStack = attrs.field(factory=ExitStack, repr=False)

    def close(self) -> None:
        """Close everything bootstrap opened, newest first; a second call does nothing."""
        self.resources.close()

    # --- use cases: each takes its checked command (application/commands.py) -----------------

    def append_message(self, cmd: cmd_.AppendMessage) -> int:
        return self.history.append(cmd)

    def write_memory(self, cmd: cmd_.WriteMemory) -> list[OperationOutcome]:
        return self.memory.apply(list(cmd.operations), cmd.context())

    def recall(self, cmd: cmd_.Recall) -> RecallResult:
        return recall(self.queries, cmd.reader, query=cmd.query, key=cmd.key,
                      scope=cmd.scope, source=cmd.source, limit=cmd.limit, mode=cmd.mode, semantic=self.semantic)

    def before_turn(self, cmd: cmd_.BeforeTurn) -> PreflightResult:
        return self.turns.before_turn(cmd)

    def after_turn(self, cmd: cmd_.AfterTurn) -> Future[ReviewResult]:
        return self.turns.after_turn(cmd, self.reviewer, self.background)

    def handle_command(self, cmd: cmd_.HandleCommand) -> CommandResult | None:
        return self.turns.handle_command(cmd)

    def compose_prompt(self, cmd: cmd_.ComposePrompt, *, as_of: datetime | None = None
                       ) -> list[dict[str, Any]] | tuple[str, list[dict[str, Any]]]:
        """The prompt of a turn now, or, at a past moment ``as_of``, the prompt composed then: the
        prompt files and the window as they were, folded from the log and writing nothing (ADR-0033)."""
        revision: RevisionReader
        stored: StoredWindowReader
        if as_of is None:
            self.prompt_files.welcome(cmd.agent_id, cmd.owner_id)  # the agent's rules, even before a first message
            revision, stored = self.prompt_revisions.revision, self.conversations.stored_window
        else:
            moment, limit = as_of, self.settings.memory.max_conversation_history
            revision = lambda a, o, n: revision_as_of(self.store, a, o, n, moment)  # noqa: E731
            stored = lambda a, c: window_as_of(self.store, a, c, moment, limit)  # noqa: E731
        if cmd.style is cmd_.Style.ANTHROPIC:
            return compose_anthropic(revision, stored, cmd.agent_id, cmd.owner_id, cmd.conversation,
                                     system=cmd.system)
        return compose_openai(revision, stored, cmd.agent_id, cmd.owner_id, cmd.conversation, system=cmd.system)

    def dispatch_tool(self, cmd: cmd_.DispatchTool) -> dict[str, Any]:
        try:
            context = ToolContext(agent_id=cmd.agent_id, owner_id=cmd.owner_id, trust=cmd.trust,
                                  conversation=cmd.conversation, job_source_id=cmd.job_source_id,
                                  session_id=cmd.session_id, run_id=cmd.run_id,
                                  source_message_id=cmd.source_message_id)
        except DomainError as exc:
            return {"ok": False, "error": str(exc), "code": "invalid_context"}
        return self.tools.dispatch_tool(cmd.name, cmd.arguments, context)


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
            chain.append(build_provider(provider, env) if _key_present(provider, env) else KeyNeeded(provider, env))
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


def finish_erasures(store: Erasure) -> None:
    """An erasure committed but its scrub never finished (the process died, or a reader kept
    the WAL): finish it now, or say plainly that the erased bytes are still in the files."""
    if not store.scrub_pending():
        return
    try:
        report = store.scrub()
    except StorageError as exc:
        log.warning("an erasure is not finished: %s still holds erased bytes (%s); open it again or run"
                    " forget again when no other process uses it", _where(store), exc)
        return
    if not report.finished:
        log.warning("an erasure is not finished: erased bytes stay in %s's write-ahead log until the memory"
                    " is opened again with no other process on it", _where(store))
    for line in report.remains if report.finished else ():
        log.warning("an erasure is finished as far as this store allows; %s", line)


def _where(erasure: Erasure) -> str:
    return str(getattr(erasure, "path", None) or getattr(erasure, "name", None) or "the PostgreSQL store")


def _key_present(settings: ProviderSettings, env: Mapping[str, str]) -> bool:
    return not settings.api_key_env or bool(env.get(settings.api_key_env))


class KeyNeeded:
    """A configured provider whose key variable was not set when memory opened. Opening, reading
    and auditing never need the key: the provider is built on its first call, and if the variable
    is still unset that call fails with :class:`ProviderKeyMissing` (the route moves on)."""

    def __init__(self, settings: ProviderSettings, env: Mapping[str, str]) -> None:
        self._settings = settings
        self._env = env
        self._built: ChatModel | None = None

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def model(self) -> str:
        return self._settings.model

    def complete(self, request: ChatRequest) -> ChatResponse:
        if self._built is None:
            if not _key_present(self._settings, self._env):
                raise ProviderKeyMissing(
                    f"provider {self._settings.name!r}: environment variable {self._settings.api_key_env}"
                    " (named by api_key_env) is not set"
                )
            self._built = build_provider(self._settings, self._env)
        return self._built.complete(request)

    def close(self) -> None:
        if self._built is not None:
            close_model(self._built)


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
        try:
            home_path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StorageError(f"cannot create the memory home {home_path}: {error.strerror or error}") from None
    clock = clock or SystemClock()
    with ExitStack() as opened:  # every resource opened below is closed if a later step fails
        if url is not None:  # the PostgreSQL store (ADR-0029); the home keeps config and prompt files
            storage = open_postgres(url, readonly=readonly, chains=settings.storage.chains,
                                    head_file=home_path / HEAD_NAME)
        elif store is not None and not isinstance(store, SqliteEventStore):
            storage = postgres_storage(store)  # one a caller opened on a PostgreSQL database
        else:
            storage = sqlite_storage(open_store(home_path, settings, readonly=readonly) if store is None else store)
        store = storage.store
        opened.callback(store.close)
        if not resume_copy:  # before anything reads or repairs what may be half a copy
            refuse_unfinished_copy(store, str(getattr(store, "url", None) or home_path))
        queries = storage.queries
        conversations = ConversationStore(queries, storage.cache_position, settings.memory.max_conversation_history,
                                          follows=storage.cache_follows)
        rows = MemoryRowCache(queries, storage.cache_position, follows=storage.cache_follows)
        store.add_commit_listener(conversations.on_commit)
        store.add_commit_listener(rows.on_commit)
        prompt_revisions = PromptFileCache(queries, storage.cache_position, follows=storage.cache_follows)
        store.add_commit_listener(prompt_revisions.on_commit)
        files = PromptFileFolder(home_path) if files is None else files
        prompt_files = PromptFiles(store, queries, files, tokens.count, clock)
        store.add_after_commit(prompt_files.on_commit)
        model_for = build_model_route(settings, providers, tracer or EventLogTracer(store), clock, owned=opened)
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
        upkept: VectorUpkeep | None = None
        semantic = None if embedder is None else SemanticSearch(
            vector_index(storage), embedder, floor=settings.memory.recall_min_similarity)
        background = BackgroundWorker("fermix-background") if background is None else background
        # Closed first: it may be mid-call on a provider or the store; queued reviews run meanwhile (ADR-0055).
        opened.callback(background.close, settings.timeouts.close_wait_s)
        if not readonly:
            left_reviews = ReviewsLeftAtClose(reviewer, queries, background)
            opened.callback(left_reviews.stop)
            left_reviews.start()
            if storage.index is not None:
                upkeep = IndexUpkeep(storage.index, background)  # ADR-0020
                store.add_after_commit(upkeep.on_commit)
                opened.callback(upkeep.stop)  # before the worker's close, which waits for a running job
                upkeep.start()
            prompt_files.repair()  # files are derived: a crash between commit and write is mended here
            finish_erasures(storage.erasure)
            if embedder is not None:
                upkept = VectorUpkeep(vector_index(storage), embedder, background)  # ADR-0043
                store.add_after_commit(upkept.on_commit)
                opened.callback(upkept.stop)
                upkept.start()
        forgetting = Forgetting(store, storage.erasure, prompt_files, clock)
        return App(
            home=home_path, settings=settings, clock=clock, store=store, queries=queries, audit=storage.audit,
            conversations=conversations, rows=rows, prompt_revisions=prompt_revisions, history=history,
            memory=writer, tokens=tokens, prompt_files=prompt_files, reviewer=reviewer,
            rollback=ResourceRollback(store, queries, prompt_files, writer, clock),
            background=background, model_for=model_for,
            compactor=compactor, turns=TurnService(compactor, history),
            tools=MemoryTools(writer, queries, storage.jobs, forget=settings.memory.forget_tool,
                              erase=forgetting.forget_memory, semantic=semantic),
            forgetting=forgetting,
            transfer=LogTransfer(store, decode_payload, prompt_files.repair),
            vectors=upkept, semantic=semantic,
            resources=opened.pop_all(),
        )


@attrs.frozen
class MigrationTarget:
    """Where ``fermix storage migrate --to`` copies a home: a home folder, or a PostgreSQL
    database (``url``), opened with a scratch folder of its own for the prompt files it renders
    (each host renders its own from the database when it opens it, ADR-0029)."""

    home: Path | None = None
    url: str | None = None

    @property
    def shown(self) -> str:
        return str(self.home) if self.home is not None else str(self.url)  # a URL here holds no password


def migration_target(target: str) -> MigrationTarget:
    """What ``--to`` names: a folder (created when missing) or a ``postgresql://`` URL (refused
    with a password in it, like everywhere else); anything else is a clear error."""
    scheme, sep, _ = target.partition("://")
    if sep:
        if scheme.lower() not in ("postgresql", "postgres"):
            raise ConfigError(f"--to takes a home folder or a postgresql:// URL, not a {scheme[:20]}:// URL")
        problem = storage_url_problem(target)
        if problem is not None:
            raise ConfigError(f"--to is {problem}")
        return MigrationTarget(url=target)
    return MigrationTarget(home=Path(target).expanduser())


def check_event_file(lines: Callable[[], Iterable[str]], progress: Callable[[int, int], None] | None = None
                     ) -> ImportReport:
    """Check a whole event file with this build's payload codec, no store opened (ADR-0030)."""
    return check_lines(lines, decode_payload, progress=progress)


def open_store(home: Path, settings: Settings | None = None, *, readonly: bool = False) -> SqliteEventStore:
    """The event store of ``home`` as :func:`bootstrap` opens it (``settings``: the home's own
    config when not given)."""
    settings = settings or resolve_settings(home, None)
    return SqliteEventStore(home / DB_NAME, durability=settings.memory.durability, head_file=home / HEAD_NAME,
                            readonly=readonly)


def require_home(home: Path) -> None:
    """Raise :class:`HomeNotFound` unless ``home`` holds a ``memory.db`` (nothing is created)."""
    if not (home / DB_NAME).is_file():
        what = "no such folder" if not home.exists() else f"no {DB_NAME} in it"
        raise HomeNotFound(
            f"no memory home at {home} ({what}); 'fermix setup init', 'fermix history import'"
            " or the embedding API create one"
        )
