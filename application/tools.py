"""The agent's memory tools (SPEC §9): ``memory_store``, ``memory_recall``, ``memory_sources_list``,
and ``memory_forget`` when the host enables it.

One set of JSON-Schema definitions (``tool_definitions``) is the source of truth: it is exported
for OpenAI- and Anthropic-style tool calling and it is what :meth:`MemoryTools.dispatch_tool`
validates the model's arguments against (``tool_arguments``). Tool input comes from a model, so
dispatch never raises for it: every bad call becomes ``{"ok": false, "error": ..., "code": ...}``
the model can read and correct. Only storage failures propagate.

Where rows go and what a caller may see is decided by the domain (admission and scopes):
``memory_store`` writes ``context`` rows at conversation scope (job scope in a job run) that
never render into the prompt files; a job run recalls only its own job rows and never history.
``memory_forget`` archives a row through the same admission (only rows the caller is shown; every
refusal recorded); with ``forget_tool = "erase"`` an operator's call, or the owner's own call about
their own fact (``scopes.erases_on_request``), then erases it for good, and the answer says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from fermix_memory.application.commands import AnyText, DispatchTool, Identifier, Recall
from fermix_memory.application.errors import ConfigError, SemanticRecallUnavailable
from fermix_memory.application.jobs import MemorySourceQueries
from fermix_memory.application.memory_writes import OperationOutcome
from fermix_memory.application.query_ports import MemoryHit, MemoryQueries, MessageHit
from fermix_memory.application.recall import recall
from fermix_memory.application.semantic import SemanticSearch
from fermix_memory.application.tool_arguments import (
    ToolInputError,
    parse_arguments,
    show_value,
    validate_arguments,
)
from fermix_memory.application.tool_definitions import (
    DEFAULT_RECALL_LIMIT,
    FORGET_TOOL,
    MAX_ARGUMENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MAX_SOURCES,
    TOOL_CATEGORY,
    TOOL_NAMES,
    TOOL_SCHEMAS,
    anthropic_tool_definitions,
    openai_tool_definitions,
    tool_definitions,
)
from fermix_memory.domain.admission import WriteContext
from fermix_memory.domain.errors import DomainError, InvalidIdentifier
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.expiry import expiry_time
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation
from fermix_memory.domain.scopes import (
    Reader,
    RecallMode,
    RecallScope,
    RecallSource,
    WriterKind,
    erases_on_request,
    memory_filter,
    write_scope,
)
from fermix_memory.domain.values import (
    ConversationKey,
    Trust,
    check_identifier,
    check_int,
    normalise_key,
    parse_enum,
)

__all__ = [
    "DEFAULT_RECALL_LIMIT", "MAX_ARGUMENT_CHARS", "MAX_QUERY_CHARS", "MAX_RECALL_LIMIT", "MAX_SOURCES",
    "TOOL_CATEGORY", "TOOL_NAMES", "InvalidToolContext", "MemoryTools", "MemoryWrites", "ToolContext",
    "ToolInputError", "anthropic_tool_definitions", "openai_tool_definitions", "parse_arguments",
    "tool_definitions", "validate_arguments",
]

# --- context ----------------------------------------------------------------------------------


class InvalidToolContext(DomainError):
    """The host built a :class:`ToolContext` from bad values (not the model's fault)."""


def _trust(value: Trust | str) -> Trust:
    return parse_enum(Trust, value, "trust", InvalidToolContext)


def _conversation(value: ConversationKey | str | None) -> ConversationKey | None:
    if value is None or isinstance(value, ConversationKey):
        return value
    if isinstance(value, str):
        return ConversationKey.parse(value)
    raise InvalidToolContext("conversation must be a ConversationKey, a CHANNEL:CHAT_ID string or None")


def _agent_id(value: str) -> str:
    return check_identifier(value, "agent_id")


def _owner_id(value: str) -> str:
    return check_identifier(value, "owner_id")


def _job_source(value: str | None) -> str | None:
    return None if value is None else check_identifier(value, "job_source_id")


def _session_id(value: str) -> str:
    return check_identifier(value, "session_id", allow_empty=True)


def _run_id(value: str) -> str:
    return check_identifier(value, "run_id", allow_empty=True)


def _message_id(value: int | None) -> int | None:
    return None if value is None else check_int(value, "source_message_id")


@attrs.frozen(kw_only=True)
class ToolContext:
    """Who calls a tool, from where: a conversation turn, or a scheduled job run (``job_source_id``)."""

    agent_id: str = attrs.field(converter=_agent_id)
    owner_id: str = attrs.field(converter=_owner_id)
    trust: Trust = attrs.field(converter=_trust)
    conversation: ConversationKey | None = attrs.field(default=None, converter=_conversation)
    job_source_id: str | None = attrs.field(default=None, converter=_job_source)
    session_id: str = attrs.field(default="", converter=_session_id)
    run_id: str = attrs.field(default="", converter=_run_id)
    source_message_id: int | None = attrs.field(default=None, converter=_message_id)

    @property
    def reader(self) -> Reader:
        return Reader(agent_id=self.agent_id, owner_id=self.owner_id, conversation=self.conversation,
                      job_source_id=self.job_source_id)

    @property
    def writer(self) -> WriterKind:
        return WriterKind.JOB if self.job_source_id is not None else WriterKind.TOOL

    def provenance(self, tool: str = "memory_store") -> Provenance:
        job = self.job_source_id
        return Provenance(agent_id=self.agent_id, owner_id=self.owner_id, trust=self.trust,
                          source_type="job" if job is not None else "tool",
                          source_id=job if job is not None else tool, session_id=self.session_id,
                          run_id=self.run_id, source_message_id=self.source_message_id)


# --- the tools --------------------------------------------------------------------------------


class MemoryWrites(Protocol):
    """What the tools need of :class:`~fermix_memory.application.memory_writes.MemoryWriter`."""

    def apply(self, ops: Sequence[Operation], ctx: WriteContext) -> list[OperationOutcome]: ...


class EraseRow(Protocol):
    """Erasing one row for good (:meth:`~fermix_memory.application.forget.Forgetting.forget_memory`)."""

    def __call__(self, memory_id: int, *, by: str, reason: str) -> object: ...


FORGET_MODES = ("off", "archive", "erase")


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": message, "code": code}


def _finite(rank: float) -> float:
    return rank if math.isfinite(rank) else 0.0


def _expiry_of(given: str | None) -> dict[str, Any]:
    """The stored row's expiry as a store's answer says it (admission accepted ``given``)."""
    if given is None:
        return {}
    moment = expiry_time(given)
    return {"expires_at": None if moment is None else moment.isoformat()}


def _memory_hit(hit: MemoryHit) -> dict[str, Any]:
    m = hit.memory
    hit_dict = {"id": m.id, "key": m.key, "value": m.value, "category": m.category.value,
                "scope": m.scope_type.value, "snippet": hit.snippet, "rank": _finite(hit.rank)}
    return hit_dict | ({"expires_at": m.expires_at.isoformat()} if m.expires_at else {})


def _message_hit(hit: MessageHit) -> dict[str, Any]:
    m = hit.message
    return {"id": m.id, "role": m.role.value, "sender": m.sender, "snippet": hit.snippet,
            "created_at": m.created_at.isoformat(), "conversation": str(m.conversation),
            "matched": hit.context_of is None, "reply_to": hit.context_of}


class MemoryTools:
    """Dispatches the model's memory tool calls for one caller context at a time. Thread-safe
    (it holds no state of its own beyond the ports it was given)."""

    def __init__(self, writer: MemoryWrites, queries: MemoryQueries, job_queries: MemorySourceQueries, *,
                 forget: str = "off", erase: EraseRow | None = None, semantic: SemanticSearch | None = None) -> None:
        if forget not in FORGET_MODES or (forget == "erase" and erase is None):
            raise ConfigError(f"forget_tool must be one of {', '.join(FORGET_MODES)} (erase needs a way to erase)")
        self._writer = writer
        self._queries = queries
        self._sources = job_queries
        self._forget_mode = forget
        self._semantic = semantic
        self._erase = erase
        self._handlers: dict[str, Callable[[dict[str, Any], ToolContext], dict[str, Any]]] = {
            "memory_store": self._store,
            "memory_recall": self._recall,
            "memory_sources_list": self._sources_list,
        }
        if forget != "off":
            self._handlers[FORGET_TOOL] = self._forget

    @property
    def names(self) -> tuple[str, ...]:
        """The tools offered: ``memory_forget`` only when enabled."""
        return tuple(self._handlers)

    def dispatch(self, call: DispatchTool) -> dict[str, Any]:
        """Run the model's tool call ``call`` in the context it names (see :meth:`dispatch_tool`); a
        context the domain refuses is the answer ``invalid_context``."""
        try:
            context = ToolContext(agent_id=call.agent_id, owner_id=call.owner_id, trust=call.trust,
                                  conversation=call.conversation, job_source_id=call.job_source_id,
                                  session_id=call.session_id, run_id=call.run_id,
                                  source_message_id=call.source_message_id)
        except DomainError as exc:
            return _error("invalid_context", str(exc))
        return self.dispatch_tool(call.name, call.arguments, context)

    def dispatch_tool(self, name: str, arguments: Mapping[str, Any] | str | None,
                      context: ToolContext) -> dict[str, Any]:
        """Run tool ``name`` with the model's ``arguments`` (an object or its JSON text).

        Returns ``{"ok": true, ...}`` or ``{"ok": false, "error", "code"}``; the result is
        JSON-serialisable. Raises only :class:`~fermix_memory.application.errors.StorageError`.
        """
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            return _error("unknown_tool", f"unknown tool {show_value(name)}; tools: {', '.join(self.names)}")
        try:
            args = validate_arguments(TOOL_SCHEMAS[name], parse_arguments(arguments))
            return handler(args, context)
        except ToolInputError as exc:
            return _error(exc.code, exc.message)
        except DomainError as exc:  # a value the domain rejects after the schema let it through
            return _error("invalid_arguments", str(exc)[:300])

    # --- handlers -------------------------------------------------------------------------------

    def _store(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        op = AddOperation(category=TOOL_CATEGORY.value, key=args["key"], value=args["value"],
                          expires_at=args.get("expires_at"))
        write = WriteContext(writer=ctx.writer, reader=ctx.reader, provenance=ctx.provenance())
        outcome = self._writer.apply([op], write)[0]
        if outcome.status == "refused":
            return _error(outcome.reason, outcome.detail or outcome.reason)
        key = normalise_key(args["key"])  # admission accepted it, so it normalises
        scope = write_scope(ctx.writer, TOOL_CATEGORY, ctx.reader)
        memory_id = outcome.memory_id
        if memory_id is None:  # a restatement records nothing, so the outcome has no id
            rows = self._queries.memory_by_key(memory_filter(ctx.reader, RecallScope.ALL), key)
            memory_id = next((r.id for r in rows if r.scope == scope), None)
        answer = {"ok": True, "status": outcome.status, "id": memory_id, "key": key,
                  "scope": scope.type.value if scope else None}
        return answer | _expiry_of(args.get("expires_at"))

    def _recall(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        query: str | None = args.get("query")
        key: str | None = args.get("key")
        # Blank counts as not given: models often fill every field with "".
        has_query, has_key = bool(query and query.strip()), bool(key and key.strip())
        if has_query == has_key:
            code = "conflicting_arguments" if has_query else "missing_argument"
            return _error(code, "give exactly one of query or key")
        if has_key:
            try:
                normalise_key(key)
            except InvalidIdentifier as exc:
                return _error("invalid_key", str(exc))
        try:
            result = recall(self._queries, Recall(
                query=AnyText(query if has_query and query is not None else ""),
                key=AnyText(key) if has_key and key is not None else None,
                agent_id=Identifier(ctx.agent_id), owner_id=Identifier(ctx.owner_id), conversation=ctx.conversation,
                job_source_id=None if ctx.job_source_id is None else Identifier(ctx.job_source_id),
                scope=RecallScope(args["scope"]), source=RecallSource(args["source"]), limit=args["limit"],
                mode=RecallMode(args["mode"]) if "mode" in args else None), self._semantic)
        except SemanticRecallUnavailable as exc:
            return _error("semantic_unavailable", str(exc))
        answer: dict[str, Any] = {"ok": True, "memories": [_memory_hit(h) for h in result.memories],
                                  "messages": [_message_hit(h) for h in result.messages]}
        if args["source"] == RecallSource.ALL.value:
            answer["ranked"] = [{"type": "memory", **_memory_hit(h)} if isinstance(h, MemoryHit)
                                else {"type": "message", **_message_hit(h)} for h in result.ranked]
        return answer

    def _sources_list(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        found = self._sources.memory_sources(ctx.agent_id, ctx.owner_id, limit=MAX_SOURCES + 1)
        sources = [{"id": s.id, "source_type": s.source_type, "name": s.name, "description": s.description}
                   for s in found[:MAX_SOURCES]]
        return {"ok": True, "sources": sources, "truncated": len(found) > MAX_SOURCES}

    def _forget(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        """Archive the row through admission (so a row the caller is not shown, or may not change,
        is refused and the refusal recorded); with erasing enabled, an operator's call or the
        owner's own call about their own fact then erases it (``status``: ``erased``)."""
        reason = (args.get("reason") or "").strip() or "asked through memory_forget"
        write = WriteContext(writer=ctx.writer, reader=ctx.reader, provenance=ctx.provenance(FORGET_TOOL))
        outcome = self._writer.apply([ArchiveOperation(id=args["id"], reason=reason)], write)[0]
        if outcome.status == "refused":
            return _error(outcome.reason, outcome.detail or outcome.reason)
        row = self._queries.memory(args["id"]) if self._forget_mode == "erase" else None
        if row is not None and erases_on_request(row, ctx.reader, ctx.trust):
            assert self._erase is not None
            self._erase(args["id"], by=FORGET_TOOL, reason=reason)
            return {"ok": True, "status": "erased", "id": args["id"]}
        return {"ok": True, "status": "archived" if outcome.status == "archived" else "already_archived",
                "id": args["id"]}
