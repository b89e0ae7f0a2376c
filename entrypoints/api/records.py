"""The embedding API, part one: history, memory rows and recall (sources and jobs: api/jobs.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from fermix_memory.adapters.sql.codec import CONVERTER
from fermix_memory.application.as_of import all_memories_as_of, check_moment, erased_as_of
from fermix_memory.application.commands import (
    AppendMessage,
    ModeName,
    Recall,
    RoleName,
    ScopeName,
    SourceName,
    TrustName,
    WriteMemory,
    WriterName,
)
from fermix_memory.application.errors import NotFound
from fermix_memory.application.explain import explain_memory
from fermix_memory.application.history import export_lines
from fermix_memory.application.host_input import row_id
from fermix_memory.application.memory_writes import OperationOutcome
from fermix_memory.application.message_input import InvalidMessage, conversation_key
from fermix_memory.application.query_ports import KeyedValue, NumberBound, OwnerSummary
from fermix_memory.application.recall import RecallResult
from fermix_memory.application.stored_messages import StoredRow
from fermix_memory.application.window_tail import newest_in_window, newest_rows_in_window
from fermix_memory.domain.erased_rows import ErasedRow
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.operations import Operation
from fermix_memory.domain.scopes import MemoryFilter
from fermix_memory.domain.values import (
    Category,
    ConversationKey,
    ScopeType,
    Trust,
    check_identifier,
    check_int,
    is_canonical_key,
    parse_enum,
    preview,
)
from fermix_memory.entrypoints.api.base import ApiBase, optional_id
from fermix_memory.entrypoints.api.message_batch import append_commands
from fermix_memory.entrypoints.api.message_pages import message_page

Progress = Callable[[int, int], None]


class RecordsApi(ApiBase):
    """Messages, memory rows and what they are recalled by."""

    # --- history ---------------------------------------------------------------------------------

    def append_message(
        self,
        *,
        agent_id: str,
        owner_id: str,
        conversation: ConversationKey | str | Mapping[str, str] | Sequence[str],
        role: RoleName,
        content: str,
        sender: str = "",
        kind: str = "text",
        trust: TrustName = "guest",
        metadata: Mapping[str, Any] | None = None,
        created_at: Any = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        tool_call_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        """Durably record a message; returns its id (its position in the event log).

        ``tool_calls`` records the calls of an assistant message (each ``{"id", "name",
        "arguments"}``, or the call as OpenAI or Anthropic returned it); ``tool_call_id`` the call
        a ``role="tool"`` message answers. Both are kept in the metadata under those names, and
        :meth:`compose_prompt` sends them back as each API requires.

        ``idempotency_key``: the host's own id of the message (a chat platform's message id, an
        Agents SDK item id). A second append with the same key in the same conversation stores
        nothing and returns the first one's id, so a retried append (after a timeout or a
        cancelled task whose write went through) never records the message twice (ADR-0050)."""
        # Every field of AppendMessage is checked with the message itself (message_input.py), so
        # the hottest call builds its command directly instead of through the converter.
        return self._open_app().append_message(AppendMessage(
            agent_id=agent_id, owner_id=owner_id, conversation=conversation, role=role, content=content,
            sender=sender, kind=kind, trust=trust, metadata=metadata, created_at=created_at, tool_calls=tool_calls,
            tool_call_id=tool_call_id, idempotency_key=idempotency_key))

    def append_messages(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Several :meth:`append_message` calls (each a dict of its keyword arguments: ``agent_id``,
        ``owner_id``, ``conversation``, ``role``, ``content``, ...) in ONE transaction: every message
        is checked first, then all are recorded or none. Their ids, in the order given; an
        ``idempotency_key`` held already, by the conversation or an earlier message of the call,
        records nothing and gives the holder's id."""
        return self._open_app().append_messages(append_commands(messages))

    def history(self, agent_id: str, conversation: Any, limit: int | None = None) -> list[Message]:
        """The conversation's current window (after the last clear / compaction), oldest first;
        its newest ``limit`` messages when given, read as such (their cost does not grow with the
        window)."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        key = conversation_key(conversation)
        if limit is None:
            return self._app.conversations.window(agent_id, key)
        return newest_in_window(self._app.queries, agent_id, key, check_int(limit, "limit", minimum=0),
                                self._app.settings.memory.max_conversation_history)

    def history_rows(self, agent_id: str, conversation: Any, limit: int) -> list[StoredRow]:
        """The newest ``limit`` messages of :meth:`history`'s window as the store read them, one
        ``StoredRow`` each (``id, owner_id, sender, role, kind, content, metadata_json, created_at,
        trust``, all as stored): for a framework's adapter that builds its own items from a few
        fields and would pay for ``Message`` objects it never reads (``openai_agents``)."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        return newest_rows_in_window(self._app.queries, agent_id, conversation_key(conversation),
                                     check_int(limit, "limit", minimum=0),
                                     self._app.settings.memory.max_conversation_history)

    def messages(self, agent_id: str, conversation: Any, *, after_id: int = 0,
                 limit: int | None = None) -> list[Message]:
        """Every stored message of the conversation, oldest first: those compaction replaced or
        a ``/new`` left behind too (the window is :meth:`history`)."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        return self._app.queries.messages(agent_id, conversation_key(conversation),
                                          after_id=check_int(after_id, "after_id", minimum=0),
                                          limit=None if limit is None else check_int(limit, "limit", minimum=0))

    def message_page(self, agent_id: str, conversation: Any, *, limit: int = 20, before_id: int | None = None,
                     after_id: int | None = None, page: int = 1, owner_id: str | None = None) -> list[Message]:
        """One page of :meth:`messages`, oldest first: the ``limit`` right after message
        ``after_id``, or right before message ``before_id``, or page ``page`` counted from the
        newest (1: the newest ``limit``); only ``owner_id``'s when given. A cursor must be a
        message of the conversation (``NotFound``)."""
        self._check_open()
        return message_page(self._app.queries, agent_id, conversation, limit=limit, before_id=before_id,
                            after_id=after_id, page=page, owner_id=owner_id)

    def clear_window(self, agent_id: str, conversation: Any, *, owner_id: str = "", by: str = "operator") -> None:
        """Start the conversation's window afresh (``/new``); nothing is deleted from the log."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id", allow_empty=True)
        key = conversation_key(conversation)
        self._app.history.clear_window(agent_id, key, Provenance(
            agent_id=agent_id, owner_id=check_identifier(owner_id or by, "by"), trust=Trust.OPERATOR,
            source_type="api", source_id=check_identifier(by, "by")))

    def retract_newest_message(self, *, agent_id: str, owner_id: str, conversation: Any,
                               trust: TrustName = "guest") -> Message | None:
        """Take back the newest message of the conversation's window (an agent framework undoing
        its last item): recorded as a ``message.retracted`` event, so the window, history recall
        and search no longer show it while the log keeps it (ADR-0027). Returns the message taken
        back, ``None`` when the window holds none; the compaction checkpoint is never taken back,
        and a guest cannot take back an operator's message (``RetractionRefused``)."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        check_identifier(owner_id, "owner_id")
        who = parse_enum(Trust, trust, "trust")
        return self._app.history.retract_newest(agent_id, conversation_key(conversation), Provenance(
            agent_id=agent_id, owner_id=owner_id, trust=who, source_type="api", reason="retract"))

    def import_history(self, lines: Iterable[str], *, checking: Progress | None = None,
                       importing: Progress | None = None) -> list[int]:
        """Import JSON Lines (SPEC §12) atomically: every line is checked first, then all or none.
        Messages imported before (same ``message_id``, or same line; ADR-0012) are skipped;
        returns the ids of the messages recorded. ``checking(done, total)`` and
        ``importing(done, total)`` are called as the lines are checked, then recorded."""
        self._check_open()
        if isinstance(lines, str):
            lines = lines.splitlines()
        if not isinstance(lines, Iterable):
            raise InvalidMessage(f"lines must be JSON Lines text or an iterable of lines, got {type(lines).__name__}")
        for progress in (checking, importing):
            if progress is not None and not callable(progress):
                raise InvalidArgument("progress must be a function of (done, total)")
        service = self._app.history
        return service.import_events(service.parse_jsonl(list(lines), checking), importing)

    def export_history(self, *, agent_id: str | None = None) -> Iterator[str]:
        """Every stored message as JSON Lines (the import format), in log order."""
        self._check_open()
        return export_lines(self._app.queries.iter_messages(agent_id=optional_id(agent_id, "agent_id")))

    # --- memory rows -----------------------------------------------------------------------------
    # --- memory rows -----------------------------------------------------------------------------

    def write_memory(
        self,
        operations: Operation | Mapping[str, Any] | Sequence[Operation | Mapping[str, Any]],
        *,
        agent_id: str,
        owner_id: str,
        writer: WriterName = "operator",
        trust: TrustName = "guest",
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
        reported in the outcomes, never raised. ``trust`` defaults to ``guest``, as for
        :meth:`append_message`: pass ``trust="operator"`` to write directives.
        """
        return self._app.write_memory(self._command(WriteMemory, dict(
            operations=operations, agent_id=agent_id, owner_id=owner_id, writer=writer, trust=trust,
            conversation=conversation, job_source_id=job_source_id, source_type=source_type, source_id=source_id,
            session_id=session_id, run_id=run_id, source_message_id=source_message_id, reason=reason)))

    def write_memories(self, writes: Sequence[Mapping[str, Any]]) -> list[list[OperationOutcome]]:
        """Several :meth:`write_memory` calls (each a dict of its keyword arguments: ``operations``,
        ``agent_id``, ``owner_id``, ...) in ONE transaction: all are recorded or none. Each call's
        operations are admitted or refused as :meth:`write_memory` does; one list of outcomes per call."""
        self._check_open()
        if type(writes) is not list and (isinstance(writes, Mapping | str) or not isinstance(writes, Sequence)):
            raise InvalidArgument(f"writes must be a list of write_memory arguments, got {type(writes).__name__}")
        return self._app.write_memories([self._command(WriteMemory, w) for w in writes])

    def memory_by_key(self, *, agent_id: str, owner_id: str, conversation: Any, key: str) -> Memory | None:
        """The live row holding ``key`` in the conversation's own scope, or ``None``: one indexed
        read, no recall (a key that is no canonical row key holds none)."""
        self._check_open()
        where = MemoryFilter(agent_id=check_identifier(agent_id, "agent_id"),
                             owner_id=check_identifier(owner_id, "owner_id"),
                             scopes=((ScopeType.CONVERSATION, conversation_key(conversation).scope_id),))
        if not isinstance(key, str):
            raise InvalidArgument(f"key must be text, got {type(key).__name__}")
        rows = self._app.queries.memory_by_key(where, key) if is_canonical_key(key) else []
        return rows[0] if rows else None

    def memory_value_by_key(self, *, agent_id: str, owner_id: str, conversation: Any,
                            key: str) -> KeyedValue | None:
        """What :meth:`memory_by_key` reads, but only the row's id, value and times (``KeyedValue``,
        or ``None``): one read by the unique index of the key, for a host that wants no more."""
        self._check_open()
        agent_id, owner_id = check_identifier(agent_id, "agent_id"), check_identifier(owner_id, "owner_id")
        scope_id = conversation_key(conversation).scope_id
        if not isinstance(key, str):
            raise InvalidArgument(f"key must be text, got {type(key).__name__}")
        return self._app.queries.value_by_key(agent_id, owner_id, scope_id, key) if is_canonical_key(key) else None

    def conversation_memories(self, *, agent_id: str, owner_id: str | None = None, channel: str,
                              chat_prefix: str = "", limit: int = 100, offset: int = 0,
                              unshown_category: str | None = None, containing: Sequence[str] = (),
                              numbers: Sequence[NumberBound] = ()) -> list[Memory]:
        """A page of the live rows of ``agent_id``'s conversations on ``channel`` (only ``owner_id``'s
        when given) whose chat id is ``chat_prefix`` or begins with it and a ``.`` (every chat id
        when empty), most recently updated first (id breaks ties): the ``limit`` after the
        ``offset`` first, read in SQL (the LangGraph store's search without a query);
        ``unshown_category``: only the rows of that category no prompt file shows; ``containing``:
        at least the rows whose value holds each of these texts (letter case may be ignored);
        ``numbers``: at least the rows whose value holds a number within each bound (ADR-0109)."""
        limit, offset = check_int(limit, "limit", minimum=0), check_int(offset, "offset", minimum=0)
        if not isinstance(containing, list | tuple) or not all(isinstance(text, str) for text in containing):
            raise InvalidArgument(f"containing must be a list of texts, got {preview(containing)}")
        if not isinstance(numbers, list | tuple) or not all(isinstance(b, NumberBound) for b in numbers):
            raise InvalidArgument(f"numbers must be a list of NumberBound, got {preview(numbers)}")
        owner, starts, category = self._conversations_under(agent_id, owner_id, channel, chat_prefix, unshown_category)
        return self._app.queries.memories_under(agent_id, owner, ScopeType.CONVERSATION.value, starts,
                                                limit=limit, offset=offset, unshown_category=category,
                                                containing=tuple(containing), numbers=tuple(numbers))

    def conversation_chat_ids(self, *, agent_id: str, owner_id: str | None = None, channel: str,
                              chat_prefix: str = "", unshown_category: str | None = None) -> list[str]:
        """The chat ids of the conversations holding :meth:`conversation_memories`' rows, each once,
        sorted, read without the rows' values (the LangGraph store's ``list_namespaces``)."""
        owner, starts, category = self._conversations_under(agent_id, owner_id, channel, chat_prefix, unshown_category)
        scopes = self._app.queries.scopes_under(agent_id, owner, ScopeType.CONVERSATION.value, starts,
                                                unshown_category=category)
        return sorted({ConversationKey.from_scope_id(scope).chat_id for scope in scopes})

    def _conversations_under(self, agent_id: str, owner_id: str | None, channel: str, chat_prefix: str,
                             unshown_category: str | None) -> tuple[str | None, list[str], str | None]:
        """The checked owner, the scope ids' beginnings and the category of a read of the rows of
        ``channel``'s conversations under ``chat_prefix``."""
        self._check_open()
        check_identifier(agent_id, "agent_id")
        owner = optional_id(owner_id, "owner_id")
        if not isinstance(chat_prefix, str):
            raise InvalidArgument(f"chat_prefix must be text, got {type(chat_prefix).__name__}")
        channel_part = ConversationKey(channel, "x").scope_id.split(":")[0]
        if chat_prefix:
            chat_part = ConversationKey(channel, chat_prefix).scope_id.split(":")[1]
            starts = [f"{channel_part}:{chat_part}:", f"{channel_part}:{chat_part}."]
        else:
            starts = [f"{channel_part}:"]
        category = None if unshown_category is None else parse_enum(Category, unshown_category,
                                                                      "unshown_category").value
        return owner, starts, category

    def restore(self, memory_id: int, *, by: str = "operator") -> Memory:
        """Un-archive a memory row; returns the row. Raises :class:`NotFound` for an unknown id."""
        self._check_open()
        self._app.memory.restore(row_id(memory_id, "memory row"), by=check_identifier(by, "by"))
        return self.memory(memory_id)

    def memory(self, memory_id: int) -> Memory:
        self._check_open()
        row = self._app.rows.get(row_id(memory_id, "memory row"))
        if row is None:
            raise NotFound(f"no memory row {memory_id}")
        return row

    def explain(self, memory_id: int) -> dict[str, Any]:
        """Why a row says what it says, as JSON-ready data: ``{"memory": {...row}, "events": [...]}``,
        each event with who
        caused it (trust, source, run) and the messages it came from (a review: every user
        message that review read)."""
        self._check_open()
        found = explain_memory(self._app.store, self._app.queries, row_id(memory_id, "memory row"))
        return dict(CONVERTER.unstructure(found))

    def owners(self, *, agent_id: str | None = None) -> list[OwnerSummary]:
        """Every agent and owner holding memory rows (of one agent when given), with how many rows are
        live and archived: an operator's view, in agent then owner order."""
        self._check_open()
        return self._app.queries.owner_summaries(agent_id=optional_id(agent_id, "agent_id"))

    def memories(self, *, agent_id: str | None = None, owner_id: str | None = None,
                 include_archived: bool = True, as_of: datetime | str | None = None) -> list[Memory]:
        """Every row (optionally of one agent / owner): an operator's view, not a prompt's.

        ``as_of`` (a timezone-aware datetime or ISO 8601 text): the rows as they were at that
        moment, folded from the log (ADR-0033); before the first event, none. A time without a
        zone or in the future is :class:`InvalidArgument`."""
        self._check_open()
        if not isinstance(include_archived, bool):
            raise InvalidArgument("include_archived must be true or false")
        agent, owner = optional_id(agent_id, "agent_id"), optional_id(owner_id, "owner_id")
        if as_of is not None:
            moment = check_moment(as_of, self._app.clock.now())
            return all_memories_as_of(self._app.store, moment, agent_id=agent, owner_id=owner,
                                      include_archived=include_archived)
        return self._app.queries.all_memories(agent_id=agent, owner_id=owner, include_archived=include_archived)

    def erased_memories(self, *, as_of: datetime | str, agent_id: str | None = None,
                        owner_id: str | None = None) -> list[ErasedRow]:
        """The rows (optionally of one agent / owner) that stood at the moment ``as_of`` and were
        erased after it (ADR-0083), by id: what :meth:`memories` at ``as_of`` no longer shows.
        Each names its id, owner, when it was recorded, when and by what it was erased (operator
        forget, retention policy, its own expiry) and its receipt; never what it said."""
        self._check_open()
        agent, owner = optional_id(agent_id, "agent_id"), optional_id(owner_id, "owner_id")
        moment = check_moment(as_of, self._app.clock.now())
        return erased_as_of(self._app.store, self._app.audit.erasure_log(), moment, agent_id=agent, owner_id=owner)

    # --- recall ----------------------------------------------------------------------------------
    # --- recall ----------------------------------------------------------------------------------

    def recall(
        self,
        query: str = "",
        *,
        agent_id: str,
        owner_id: str,
        conversation: Any = None,
        scope: ScopeName = "current",
        source: SourceName = "memories",
        limit: int = 10,
        key: str | None = None,
        job_source_id: str | None = None,
        mode: ModeName | None = None,
        as_of: datetime | str | None = None,
    ) -> RecallResult:
        """Memories and/or history this reader may see, by exact ``key`` or full-text ``query``.

        Any text is a safe query (R-FTS); results never include another owner's rows. At most
        ``limit`` results of each source, and never more than 100 (``0``: none); a ``query`` or
        ``key`` that is not text, or a negative ``limit``, is a typed error.

        ``mode``: ``"keyword"`` (by words), ``"semantic"`` (by meaning) or ``"hybrid"`` (both,
        fused); by default hybrid when the memory was opened with an embedder, else keyword.
        Recall by meaning needs the ``[semantic]`` extra (ADR-0043).

        A query naming days ("on 3 May", "last weekend") also finds the turns said on them or
        speaking of them; ``as_of`` (a timezone-aware datetime or ISO 8601 text) is the moment it
        is asked at, which relative days count back from: by default the newest turn searched,
        else now (ADR-0075).
        """
        return self._app.recall(self._command(Recall, dict(
            query=query, agent_id=agent_id, owner_id=owner_id, conversation=conversation, scope=scope,
            source=source, limit=limit, key=key, job_source_id=job_source_id, mode=mode, as_of=as_of)))
