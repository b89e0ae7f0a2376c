"""The embedding API: what a host application imports (``fermix_memory.MemorySystem``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any

from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
from fermix_memory.adapters.sqlite import audit
from fermix_memory.adapters.sqlite.head import Head, parse_head
from fermix_memory.application import jobs
from fermix_memory.application.compaction import CompactionResult
from fermix_memory.application.composer import compose_prompt
from fermix_memory.application.errors import BackgroundTimeout, NotFound, StorageError
from fermix_memory.application.explain import explain_memory
from fermix_memory.application.forget import ForgetReport
from fermix_memory.application.history import export_lines
from fermix_memory.application.memory_writes import OperationOutcome
from fermix_memory.application.message_input import InvalidMessage, conversation_key, parse_enum
from fermix_memory.application.ports import ChatModel, Clock, ResourceRevision, Tracer
from fermix_memory.application.prompt_files import check_resource_name, unified_diff
from fermix_memory.application.recall import RecallResult, recall
from fermix_memory.application.reviewer import ReviewResult
from fermix_memory.application.settings import Settings
from fermix_memory.application.tools import ToolContext, anthropic_tool_definitions, openai_tool_definitions
from fermix_memory.application.turns import CommandResult, PreflightResult
from fermix_memory.domain.admission import WriteContext
from fermix_memory.domain.errors import DomainError, InvalidArgument, InvalidOperation
from fermix_memory.domain.events import Provenance
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.scopes import Reader, RecallScope, RecallSource, WriterKind
from fermix_memory.domain.values import (
    INT64_MAX,
    INT64_MIN,
    ConversationKey,
    Trust,
    check_identifier,
    check_int,
    check_text,
    is_encodable,
    preview,
)
from fermix_memory.entrypoints.bootstrap import App, bootstrap

MAX_WAIT_S = 86_400.0  # longer is a host bug (and past threading.TIMEOUT_MAX, an OverflowError)
MAX_REASON_CHARS = 2000


def operation_from_mapping(data: Mapping[str, Any]) -> Operation:
    """Build an operation from ``{"op": "add"|"replace"|"archive", ...}`` (SPEC §12 shape)."""
    if not isinstance(data, Mapping):
        raise InvalidOperation("an operation must be a mapping")
    kinds: dict[str, type[Operation]] = {"add": AddOperation, "replace": ReplaceOperation,
                                         "archive": ArchiveOperation}
    op = data.get("op")
    if op not in kinds:
        raise InvalidOperation(f"op must be add, replace or archive, got {preview(op, 20)}")
    fields = {k: v for k, v in data.items() if k != "op"}
    try:
        return kinds[op](**fields)
    except TypeError as exc:
        raise InvalidOperation(f"bad {op} operation: {exc}") from None


def _optional_count(value: object, what: str) -> int | None:
    """``None`` (not given) or a positive whole number (a context window, a token count)."""
    return None if value is None else check_int(value, what, minimum=1)


def _optional_id(value: object, what: str) -> str | None:
    """``None`` (no filter) or a usable identifier."""
    return None if value is None else check_identifier(value, what)


def _row_id(value: object, what: str) -> int:
    """An id to look up: a whole number (else :class:`InvalidNumber`); one outside SQLite's
    64-bit range names nothing (:class:`NotFound`)."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        raise NotFound(f"no {what} with that id (it is beyond the 64-bit range)")
    return check_int(value, f"the {what} id")


def _has(value: object, method: str) -> bool:
    return callable(getattr(value, method, None))


def _folder(value: object, what: str) -> Path:
    """A folder the host names: text or a path, without NUL or lone surrogates."""
    if not isinstance(value, str | os.PathLike):
        raise InvalidArgument(f"{what} must be a folder path, got {preview(value)}")
    text = os.fspath(value)
    if not isinstance(text, str) or "\x00" in text or not is_encodable(text) or not text:
        raise InvalidArgument(f"{what} must be a non-empty folder path without NUL or lone surrogates")
    return Path(text)


def _provenance(*, agent_id: str, owner_id: object, trust: Trust, source_type: object, source_id: object,
                session_id: object = "", run_id: object = "", source_message_id: object = None,
                reason: object = "") -> Provenance:
    """Who causes a change, as the host tells it: every field checked, so the event can be stored."""
    return Provenance(
        agent_id=agent_id, owner_id=check_identifier(owner_id, "owner_id"), trust=trust,
        source_type=check_identifier(source_type, "source_type", allow_empty=True),
        source_id=check_identifier(source_id, "source_id", allow_empty=True),
        session_id=check_identifier(session_id, "session_id", allow_empty=True),
        run_id=check_identifier(run_id, "run_id", allow_empty=True),
        source_message_id=None if source_message_id is None else check_int(source_message_id, "source_message_id"),
        reason=check_text(reason, "reason", max_chars=MAX_REASON_CHARS),
    )


def _reader(agent_id: object, owner_id: object, conversation: object, job_source_id: object) -> Reader:
    """Who reads (or writes): a conversation turn, or a job run when ``job_source_id`` is given."""
    return Reader(agent_id=check_identifier(agent_id, "agent_id"), owner_id=check_identifier(owner_id, "owner_id"),
                  conversation=conversation_key(conversation) if conversation is not None else None,
                  job_source_id=_optional_id(job_source_id, "job_source_id"))


def _check_owner(agent_id: object, owner_id: object) -> None:
    check_identifier(agent_id, "agent_id")
    check_identifier(owner_id, "owner_id")


class MemorySystem:
    """Durable, auditable memory for one home folder. Thread-safe; use as a context manager.

    Open with :meth:`open`. Every write is committed (and hash-chained into the event log)
    before the call returns.
    """

    def __init__(self, app: App) -> None:
        self._app = app
        self._closed = False
        self._close_lock = threading.Lock()

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
    ) -> MemorySystem:
        """Open (creating if needed) the memory at ``home`` (default ``$FERMIX_HOME`` or ``~/.fermix``).

        ``providers`` (chat models, tried in order) override the configured provider route.
        ``create=False`` raises :class:`HomeNotFound` instead of creating a missing home;
        ``readonly=True`` opens an existing home so that nothing can be written (every write
        raises :class:`ReadOnlyStore`): for audits, read-only mounts and copies.
        """
        folder = None if home is None else _folder(home, "home")
        if providers is not None and (isinstance(providers, str) or not isinstance(providers, Sequence)
                                      or not all(_has(p, "complete") for p in providers)):
            raise InvalidArgument("providers must be a list of chat models (objects with a complete method)")
        for value, method, what in ((clock, "now", "clock"), (tracer, "record", "tracer")):
            if value is not None and not _has(value, method):
                raise InvalidArgument(f"{what} must be an object with a {method} method")
        if not isinstance(create, bool) or not isinstance(readonly, bool):
            raise InvalidArgument("create and readonly must be True or False")
        try:
            return cls(bootstrap(folder, config=config, clock=clock, providers=providers, tracer=tracer,
                                 create=create, readonly=readonly))
        except OSError as exc:
            raise StorageError(f"cannot open the memory home {folder}: {exc.strerror or exc}") from exc

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def home(self) -> Path:
        return self._app.home

    @property
    def settings(self) -> Settings:
        return self._app.settings

    @property
    def app(self) -> App:
        """The wired application (for entry points and tests)."""
        return self._app

    def close(self) -> None:
        with self._close_lock:
            if not self._closed:
                self._closed = True
                self._app.close()

    def __enter__(self) -> MemorySystem:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("this MemorySystem is closed")

    # --- history ---------------------------------------------------------------------------------

    def append_message(
        self,
        *,
        agent_id: str,
        owner_id: str,
        conversation: ConversationKey | str | Mapping[str, str] | Sequence[str],
        role: str,
        content: str,
        sender: str = "",
        kind: str = "text",
        trust: str = "guest",
        metadata: Mapping[str, Any] | None = None,
        created_at: Any = None,
    ) -> int:
        """Durably record a message; returns its id (its position in the event log)."""
        self._check_open()
        return self._app.history.append(
            agent_id=agent_id, owner_id=owner_id, conversation=conversation, role=role, content=content,
            sender=sender, kind=kind, trust=trust, metadata=metadata,
            created_at=created_at,
        )

    def history(self, agent_id: str, conversation: Any, limit: int | None = None) -> list[Message]:
        """The conversation's current window (after the last clear / compaction), oldest first."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        if limit is not None:
            check_int(limit, "limit")
        window = self._app.conversations.window(agent_id, conversation_key(conversation))
        if limit is not None:
            window = window[-limit:] if limit > 0 else []
        return window

    def clear_window(self, agent_id: str, conversation: Any, *, owner_id: str = "", by: str = "operator") -> None:
        """Start the conversation's window afresh (``/new``); nothing is deleted from the log."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id", allow_empty=True)
        key = conversation_key(conversation)
        self._app.history.clear_window(agent_id, key, _provenance(
            agent_id=agent_id, owner_id=owner_id or by, trust=Trust.OPERATOR, source_type="api", source_id=by))

    def import_history(self, lines: Iterable[str]) -> list[int]:
        """Import JSON Lines (SPEC §12) atomically: every line is checked first, then all or none.
        Messages imported before (same ``message_id``, or same line; ADR-0012) are skipped;
        returns the ids of the messages recorded."""
        self._check_open()
        if isinstance(lines, str):
            lines = lines.splitlines()
        if not isinstance(lines, Iterable):
            raise InvalidMessage(f"lines must be JSON Lines text or an iterable of lines, got {type(lines).__name__}")
        service = self._app.history
        return service.import_events(service.parse_jsonl(list(lines)))

    def export_history(self, *, agent_id: str | None = None) -> Iterator[str]:
        """Every stored message as JSON Lines (the import format), in log order."""
        self._check_open()
        return export_lines(self._app.queries.iter_messages(agent_id=_optional_id(agent_id, "agent_id")))

    # --- memory rows -----------------------------------------------------------------------------

    def write_memory(
        self,
        operations: Operation | Mapping[str, Any] | Sequence[Operation | Mapping[str, Any]],
        *,
        agent_id: str,
        owner_id: str,
        writer: str = "operator",
        trust: str = "operator",
        conversation: Any = None,
        job_source_id: str | None = None,
        source_type: str = "api",
        source_id: str = "",
        session_id: str = "",
        run_id: str = "",
        source_message_id: int | None = None,
        reason: str = "",
    ) -> list[OperationOutcome]:
        """Apply memory operations through admission in one transaction.

        Each operation is admitted or refused on its own; refusals are recorded as events and
        reported in the outcomes, never raised.
        """
        self._check_open()
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        if isinstance(operations, AddOperation | ReplaceOperation | ArchiveOperation | Mapping):
            operations = [operations]
        if isinstance(operations, str) or not isinstance(operations, Sequence):
            raise InvalidOperation("operations must be an operation, a mapping or a list of them")
        ops = [op if isinstance(op, AddOperation | ReplaceOperation | ArchiveOperation)
               else operation_from_mapping(op) for op in operations]
        trust_value = parse_enum(Trust, trust, "trust")
        ctx = WriteContext(
            writer=parse_enum(WriterKind, writer, "writer"),
            reader=_reader(agent_id, owner_id, conversation, job_source_id),
            provenance=_provenance(agent_id=agent_id, owner_id=owner_id, trust=trust_value,
                                   source_type=source_type, source_id=source_id, session_id=session_id,
                                   run_id=run_id, source_message_id=source_message_id, reason=reason),
        )
        return self._app.memory.apply(ops, ctx)

    def restore(self, memory_id: int, *, by: str = "operator") -> Memory:
        """Un-archive a memory row; returns the row. Raises :class:`NotFound` for an unknown id."""
        self._check_open()
        self._app.memory.restore(_row_id(memory_id, "memory row"), by=check_identifier(by, "by"))
        return self.memory(memory_id)

    def memory(self, memory_id: int) -> Memory:
        self._check_open()
        row = self._app.rows.get(_row_id(memory_id, "memory row"))
        if row is None:
            raise NotFound(f"no memory row {memory_id}")
        return row

    def explain(self, memory_id: int) -> dict[str, Any]:
        """Why a row says what it says: ``{"memory": row, "events": [...]}``, each event with who
        caused it (trust, source, run) and the messages it came from (a review: every user
        message that review read)."""
        self._check_open()
        return explain_memory(self._app.store, self._app.queries, _row_id(memory_id, "memory row"))

    def memories(self, *, agent_id: str | None = None, owner_id: str | None = None,
                 include_archived: bool = True) -> list[Memory]:
        """Every row (optionally of one agent / owner): an operator's view, not a prompt's."""
        self._check_open()
        if not isinstance(include_archived, bool):
            raise InvalidArgument("include_archived must be true or false")
        return self._app.queries.all_memories(agent_id=_optional_id(agent_id, "agent_id"),
                                              owner_id=_optional_id(owner_id, "owner_id"),
                                              include_archived=include_archived)

    # --- recall ----------------------------------------------------------------------------------

    def recall(
        self,
        query: str = "",
        *,
        agent_id: str,
        owner_id: str,
        conversation: Any = None,
        scope: str = "current",
        source: str = "memories",
        limit: int = 10,
        key: str | None = None,
        job_source_id: str | None = None,
    ) -> RecallResult:
        """Memories and/or history this reader may see, by exact ``key`` or full-text ``query``.

        Any text is a safe query (R-FTS); results never include another owner's rows.
        """
        self._check_open()
        reader = _reader(agent_id, owner_id, conversation, job_source_id)
        return recall(self._app.queries, reader, query=query if isinstance(query, str) else "", key=key,
                      scope=parse_enum(RecallScope, scope, "scope"), source=parse_enum(RecallSource, source, "source"),
                      limit=limit)

    # --- background review -----------------------------------------------------------------------

    def before_turn(self, *, agent_id: str, owner_id: str, conversation: Any,
                    context_window: int | None = None) -> PreflightResult:
        """Preflight hook, before a turn: compacts only if the previous turn's peak prompt tokens
        crossed the threshold and the background pass has not compacted yet. Returns at once
        otherwise (nothing is measured on a cold turn). ``notice`` is the text to show the chat."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        return self._app.turns.before_turn(agent_id, conversation_key(conversation),
                                           context_window=_optional_count(context_window, "context_window"))

    def after_turn(self, *, agent_id: str, owner_id: str, conversation: Any,
                   peak_prompt_tokens: int | None = None, context_window: int | None = None) -> Future[ReviewResult]:
        """Post-delivery hook, after a reply was delivered: records the provider-reported peak
        prompt tokens, queues compaction if they crossed the threshold, and starts the
        time-gated reviewer, all in the background; returns at once. A failing review or
        compaction never raises here (the returned future carries the review's outcome)."""
        self._check_open()
        key = conversation_key(conversation)
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        app = self._app
        context_window = _optional_count(context_window, "context_window")
        if peak_prompt_tokens is not None:
            check_int(peak_prompt_tokens, "peak_prompt_tokens", minimum=0)
            app.compactor.record_peak(agent_id, key, peak_prompt_tokens)
            if app.compactor.due(agent_id, key, context_window=context_window):
                app.background.submit(("compact", agent_id, key), lambda: app.compactor.compact_if_due(
                    agent_id, key, context_window=context_window))
        reviewer = app.reviewer
        return app.background.submit(
            ("review", agent_id, owner_id, key), lambda: reviewer.review(agent_id, owner_id, key))

    def wait_for_background(self, timeout: float | None = None) -> None:
        """Block until the background work queued so far is done (tests, orderly shutdown)."""
        self._check_open()
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                    or not 0 <= timeout <= MAX_WAIT_S):
            raise InvalidArgument(f"timeout must be None or a number of seconds from 0 to {MAX_WAIT_S}")
        try:
            self._app.background.submit(("barrier", object()), lambda: None).result(timeout)
        except TimeoutError:
            raise BackgroundTimeout(f"background work still running after {timeout} s") from None

    def handle_command(self, text: str, *, agent_id: str, owner_id: str, conversation: Any,
                       trust: str = "guest", context_window: int | None = None) -> CommandResult | None:
        """Run ``/compact``, ``/new`` or ``/clear`` (operator only; a guest gets a refusal and
        nothing changes). ``None`` when ``text`` is not a chat command."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        return self._app.turns.handle_command(text, agent_id=agent_id, owner_id=owner_id,
                                              conversation=conversation_key(conversation),
                                              trust=parse_enum(Trust, trust, "trust"),
                                              context_window=_optional_count(context_window, "context_window"))

    def compact(self, *, agent_id: str, conversation: Any, context_window: int | None = None) -> CompactionResult:
        """Compact the conversation's window now (what ``/compact`` does)."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        return self._app.compactor.compact(agent_id, conversation_key(conversation),
                                           context_window=_optional_count(context_window, "context_window"))

    def record_transcript(self, *, agent_id: str, owner_id: str, device_id: str, role: str, text: str,
                          trust: str = "operator") -> int | None:
        """Store a FINAL realtime voice transcript as a ``voice_turn`` message of the device's
        ``realtime`` conversation, when ``persist_transcripts`` is on; ``None`` when it is off."""
        self._check_open()
        if not self._app.settings.realtime.persist_transcripts:
            return None
        if role not in ("user", "assistant"):
            raise InvalidMessage("a transcript's role must be user or assistant")
        return self._app.history.append(
            agent_id=agent_id, owner_id=owner_id, conversation=ConversationKey("realtime", device_id), role=role,
            content=text, sender=owner_id if role == "user" else agent_id, kind="voice_turn", trust=trust,
            metadata={"source_type": "realtime"})

    def review_now(self, *, agent_id: str | None = None, owner_id: str | None = None,
                   conversation: Any = None) -> list[ReviewResult]:
        """Review now (past the interval and back-off gates) every matching conversation with
        new user messages; runs in the calling thread and returns one result per conversation."""
        self._check_open()
        key = conversation_key(conversation) if conversation is not None else None
        agent_id, owner_id = _optional_id(agent_id, "agent_id"), _optional_id(owner_id, "owner_id")
        targets = self._app.queries.conversations_with_unreviewed(agent_id=agent_id, owner_id=owner_id,
                                                                  conversation=key)
        return [self._app.reviewer.review(a, o, c, now=True) for a, o, c in targets]

    # --- memory tools and scheduled jobs -----------------------------------------------------------

    @staticmethod
    def tool_definitions(style: str = "openai") -> list[dict[str, Any]]:
        """JSON-Schema definitions of ``memory_store``, ``memory_recall`` and
        ``memory_sources_list`` in OpenAI (``"openai"``) or Anthropic (``"anthropic"``) form."""
        if style == "openai":
            return openai_tool_definitions()
        if style == "anthropic":
            return anthropic_tool_definitions()
        raise InvalidMessage("style must be 'openai' or 'anthropic'")

    def dispatch_tool(self, name: str, arguments: Any, *, agent_id: str, owner_id: str, trust: str = "guest",
                      conversation: Any = None, job_source_id: str | None = None, session_id: str = "",
                      run_id: str = "", source_message_id: int | None = None) -> dict[str, Any]:
        """Run a memory tool call for the model. Bad calls come back as ``{"ok": false, "error",
        "code"}``, never as an exception; a job run (``job_source_id``) only ever sees its own rows."""
        self._check_open()
        try:
            context = ToolContext(agent_id=agent_id, owner_id=owner_id, trust=trust, conversation=conversation,
                                  job_source_id=job_source_id, session_id=session_id, run_id=run_id,
                                  source_message_id=source_message_id)
        except DomainError as exc:
            return {"ok": False, "error": str(exc), "code": "invalid_context"}
        return self._app.tools.dispatch_tool(name, arguments, context)

    def register_memory_source(self, *, source_id: str, agent_id: str, owner_id: str, source_type: str,
                               name: str, description: str = "") -> str:
        self._check_open()
        app = self._app
        return jobs.register_memory_source(app.store, app.clock, source_id=source_id, agent_id=agent_id,
                                           owner_id=owner_id, source_type=source_type, name=name,
                                           description=description)

    def save_job(self, *, job_id: str, agent_id: str, owner_id: str, name: str, schedule: str, prompt: str,
                 memory_source_id: str | None = None, enabled: bool = True) -> jobs.ScheduledJob:
        """Save a scheduled job (and its job-scoped memory source, ``job:<job_id>``, if none given)."""
        self._check_open()
        app = self._app
        return jobs.save_job(app.store, app.clock, job_id=job_id, agent_id=agent_id, owner_id=owner_id, name=name,
                             schedule=schedule, prompt=prompt, memory_source_id=memory_source_id, enabled=enabled)

    def record_job_run(self, *, run_id: str, job_id: str, status: str, started_at: Any, finished_at: Any = None,
                       output: str = "", error: str = "") -> jobs.JobRun:
        self._check_open()
        app = self._app
        return jobs.record_job_run(app.store, app.clock, run_id=run_id, job_id=job_id, status=status,
                                   started_at=started_at, finished_at=finished_at, output=output, error=error)

    # --- prompt files and resources --------------------------------------------------------------

    def compose_prompt(self, agent_id: str, owner_id: str, conversation: Any) -> list[dict[str, str]]:
        """Messages for a turn: ``[{"role": "system", "content": <memory-context block>}, …window]``."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        app = self._app
        app.prompt_files.welcome(agent_id, owner_id)  # the agent's rules, even before a first message
        messages = compose_prompt(
            lambda a, o, n: app.queries.resource_revision(a, o, n), app.conversations.window,
            agent_id, owner_id, conversation_key(conversation),
        )
        return [{"role": m.role, "content": m.content} for m in messages]

    def prompt_file(self, agent_id: str, owner_id: str, name: str = "user_md") -> Path:
        """Where ``USER.md`` (``user_md``) or ``MEMORY.md`` (``memory_md``) of an owner lives."""
        _check_owner(agent_id, owner_id)
        return PromptFileFolder(self.home).path(agent_id, owner_id, check_resource_name(name))

    def rebuild_prompt_files(self, agent_id: str, owner_id: str) -> list[str]:
        """Re-render an owner's files from the rows now; returns the names that changed."""
        self._check_open()
        _check_owner(agent_id, owner_id)
        return self._app.prompt_files.rebuild(agent_id, owner_id, check_files=True)

    def resources(self, *, agent_id: str | None = None, owner_id: str | None = None) -> list[ResourceRevision]:
        """The current revision of every versioned resource."""
        self._check_open()
        return self._app.queries.resources(agent_id=_optional_id(agent_id, "agent_id"),
                                           owner_id=_optional_id(owner_id, "owner_id"))

    def resource_history(self, name: str, *, agent_id: str, owner_id: str,
                         limit: int | None = None) -> list[ResourceRevision]:
        """Revisions of a resource, newest first."""
        self._check_open()
        _check_owner(agent_id, owner_id)
        if limit is not None:
            check_int(limit, "limit")
        return self._app.queries.resource_history(agent_id, owner_id, check_resource_name(name), limit)

    def resource_revision(self, name: str, revision: int, *, agent_id: str, owner_id: str) -> ResourceRevision:
        self._check_open()
        _check_owner(agent_id, owner_id)
        found = self._app.queries.resource_revision(agent_id, owner_id, check_resource_name(name),
                                                   _row_id(revision, "revision"))
        if found is None:
            raise NotFound(f"{name} of {agent_id}/{owner_id} has no revision {revision}")
        return found

    def resource_diff(self, name: str, a: int, b: int, *, agent_id: str, owner_id: str) -> str:
        """A unified diff from revision ``a`` to revision ``b``."""
        return unified_diff(self.resource_revision(name, a, agent_id=agent_id, owner_id=owner_id),
                            self.resource_revision(name, b, agent_id=agent_id, owner_id=owner_id))

    def resource_rollback(self, name: str, revision: int, *, agent_id: str, owner_id: str,
                          by: str = "operator") -> ResourceRevision:
        """Restore revision ``revision``'s content as a new revision and rewrite the file."""
        self._check_open()
        _check_owner(agent_id, owner_id)
        new = self._app.prompt_files.rollback(agent_id, owner_id, check_resource_name(name),
                                             _row_id(revision, "revision"), by=check_identifier(by, "by"))
        return self.resource_revision(name, new, agent_id=agent_id, owner_id=owner_id)

    # --- erasure ---------------------------------------------------------------------------------

    def forget_owner(self, owner_id: str, *, agent_id: str | None = None, by: str = "operator",
                     reason: str = "") -> ForgetReport:
        """Erase everything ``owner_id`` left with ``agent_id`` (every agent when ``None``).

        Their messages, memory rows (archived ones too), reviews, prompt files and revisions,
        memory sources, jobs and job runs are deleted; the payloads of the events that carried
        them are redacted (the hash chain and ``verify`` still hold); an ``owner.forgotten``
        event records who asked, when and how much went, without any content. The database is
        then rewritten so no erased byte stays in ``memory.db`` or its WAL (``wal_truncated``
        is false when another process held a read open: run it again when it has closed).
        Slow on a large database: it rewrites the whole file.
        """
        self._check_open()
        return self._app.forgetting.forget_owner(owner_id, agent_id=agent_id, by=by, reason=reason)

    # --- audit -----------------------------------------------------------------------------------

    def head(self) -> Head:
        """The log's last event as ``Head(position, hash)`` (``str()`` gives ``POSITION:HASH``):
        keep it elsewhere and pass it to :meth:`verify` later to prove nothing was cut off."""
        self._check_open()
        return self._app.store.head()

    def verify(self, progress: audit.Progress | None = None, *,
               expect_head: Head | str | None = None) -> audit.VerifyReport:
        """Check the hash chain, the FTS indexes and that the log replays to the same tables
        (``progress(done, total)`` is called as the log is walked); that the log still holds
        ``expect_head`` (a :meth:`head` kept elsewhere, or its ``POSITION:HASH`` text) and this
        home's own last-seen head; and report what opening found wrong (append-only triggers
        missing, a head the log no longer holds). A read-only memory is verified without writing."""
        self._check_open()
        if progress is not None and not callable(progress):
            raise InvalidArgument("progress must be a function of (done, total)")
        store = self._app.store
        anchors = [("this home's last-seen head", head) for head in [store.home_anchor()] if head is not None]
        if expect_head is not None:
            anchors.insert(0, ("expected head", expect_head if isinstance(expect_head, Head)
                               else parse_head(expect_head)))
        return audit.verify_database(store.path, progress, anchors=anchors, noted=store.problems_at_open(),
                                     readonly=store.readonly)

    def replay_into(self, target_dir: str | os.PathLike[str]) -> dict[str, Any]:
        """Rebuild every projection from the log alone into ``target_dir/memory.db``."""
        self._check_open()
        return audit.replay_into(self._app.store.path, _folder(target_dir, "target_dir"))
