"""What a host asks of memory, as typed commands (ADR-0017).

Every command is a frozen attrs value whose fields are already checked: hosts, tools and the
session API never build one by hand from raw input, they go through the one converter in
:mod:`fermix_memory.application.host_input`, which turns loose values into commands or raises
a typed :class:`~fermix_memory.domain.errors.DomainError`. The field types below name what a
field must hold; the converter has one parser per type.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Literal, NewType, TypeAlias

import attrs

from fermix_memory.domain.admission import WriteContext
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.operations import Operation
from fermix_memory.domain.scopes import Reader, RecallMode, RecallScope, RecallSource, WriterKind
from fermix_memory.domain.values import ConversationKey, Role, Trust

Identifier = NewType("Identifier", str)  # a non-empty identifier (agent, owner, source ids)
Label = NewType("Label", str)  # an identifier that may be empty (sender, session and run ids)
Count = NewType("Count", int)  # a positive whole number (a context window)
Tokens = NewType("Tokens", int)  # a whole number from 0 (a token count)
RowId = NewType("RowId", int)  # a whole number naming a stored row
Reason = NewType("Reason", str)  # a short free text (a change's reason), without NUL
SystemPrompt = NewType("SystemPrompt", str)  # the host's own system prompt, without NUL
AnyText = NewType("AnyText", str)  # text refused for its type only (a recall query, a chat line to read)
Limit = NewType("Limit", int)  # how many results at most: a whole number from 0
Moment = NewType("Moment", datetime)  # a timezone-aware moment, or ISO 8601 text with an offset


class Style(enum.StrEnum):
    """The chat API shape a host speaks."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"


# How a host names a member of each fixed set in a call, for its type checker: the member itself
# or its text (``trust="guest"``). At run time any value is checked by the converter, so these
# only ever narrow what a type checker accepts; each lists exactly its enum's values (a test
# keeps them equal).
TrustName: TypeAlias = Trust | Literal["operator", "guest"]
RoleName: TypeAlias = Role | Literal["user", "assistant", "system", "tool"]
ScopeName: TypeAlias = RecallScope | Literal["current", "owner", "all"]
SourceName: TypeAlias = RecallSource | Literal["memories", "history", "all"]
ModeName: TypeAlias = RecallMode | Literal["keyword", "semantic", "hybrid"]
WriterName: TypeAlias = WriterKind | Literal["reviewer", "tool", "job", "operator"]
StyleName: TypeAlias = Style | Literal["openai", "anthropic"]


# What the message's own check accepts of a field typed ``Any`` here, as JSON Schema (ADR-0073).
_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 256}
_CONVERSATION: dict[str, Any] = {"anyOf": [
    {"type": "string", "description": "CHANNEL:CHAT_ID or CHANNEL:CHAT_ID:THREAD_SCOPE"},
    {"type": "object", "required": ["channel", "chat_id"],
     "properties": {"channel": {"type": "string"}, "chat_id": {"type": "string"}, "thread_scope": {"type": "string"}}},
]}


def _shape(schema: dict[str, Any]) -> dict[str, Any]:
    return {"json_schema": schema}


@attrs.frozen(kw_only=True)
class Turn:
    """Who talks, where: the three values every turn names."""

    agent_id: Identifier
    owner_id: Identifier
    conversation: ConversationKey


@attrs.frozen(kw_only=True)
class AppendMessage:
    """One message to record, built once where the host hands it over (the API, a session) and
    taken whole by the event builder (``message_input.build_message_event``)."""

    # Every field is checked once, with the message (application/message_input.py), the same
    # check a JSON Lines import gets: not a second time here, on the hottest call of all. What that
    # check accepts is stated beside each field (``json_schema``: the server's contract, ADR-0073).
    agent_id: Any = attrs.field(metadata=_shape(_ID))
    owner_id: Any = attrs.field(metadata=_shape(_ID))
    conversation: Any = attrs.field(metadata=_shape(_CONVERSATION))
    role: Any = attrs.field(metadata=_shape({"type": "string", "enum": ["user", "assistant", "system", "tool"]}))
    content: Any = attrs.field(metadata=_shape({"type": "string"}))
    sender: Any = attrs.field(default="", metadata=_shape({"type": "string", "maxLength": 256}))
    kind: Any = attrs.field(default="text", metadata=_shape({"type": "string", "minLength": 1, "maxLength": 64}))
    trust: Any = attrs.field(default="guest", metadata=_shape({"type": "string", "enum": ["operator", "guest"]}))
    metadata: Any = attrs.field(default=None, metadata=_shape(
        {"type": ["object", "null"], "additionalProperties": True}))
    created_at: Any = attrs.field(default=None, metadata=_shape(
        {"type": ["string", "null"], "format": "date-time"}))
    tool_calls: Any = attrs.field(default=None, metadata=_shape(
        {"type": ["array", "null"], "items": {"type": "object", "additionalProperties": True}}))
    tool_call_id: Any = attrs.field(default=None, metadata=_shape({"type": ["string", "null"]}))
    # the host's own id of the message (ADR-0050)
    idempotency_key: Any = attrs.field(default=None, metadata=_shape({"type": ["string", "null"], "maxLength": 256}))


@attrs.frozen(kw_only=True)
class WriteMemory:
    operations: tuple[Operation, ...]
    agent_id: Identifier
    owner_id: Identifier
    writer: WriterKind = WriterKind.OPERATOR
    trust: Trust = Trust.GUEST
    conversation: ConversationKey | None = None
    job_source_id: Identifier | None = None
    source_type: Label = Label("api")
    source_id: Label = Label("")
    session_id: Label = Label("")
    run_id: Label = Label("")
    source_message_id: RowId | None = None
    reason: Reason = Reason("")

    def context(self) -> WriteContext:
        """Who writes, who may read what is written, and the provenance every event records."""
        return WriteContext(
            writer=self.writer,
            reader=Reader(agent_id=self.agent_id, owner_id=self.owner_id, conversation=self.conversation,
                          job_source_id=self.job_source_id),
            provenance=Provenance(
                agent_id=self.agent_id, owner_id=self.owner_id, trust=self.trust, source_type=self.source_type,
                source_id=self.source_id, session_id=self.session_id, run_id=self.run_id,
                source_message_id=self.source_message_id, reason=self.reason),
        )


@attrs.frozen(kw_only=True)
class Recall:
    """What to recall, for whom: taken whole by the use case (``recall.recall``)."""

    query: AnyText = AnyText("")
    agent_id: Identifier
    owner_id: Identifier
    conversation: ConversationKey | None = None
    scope: RecallScope = RecallScope.CURRENT
    source: RecallSource = RecallSource.MEMORIES
    limit: Limit = Limit(10)
    key: AnyText | None = None
    job_source_id: Identifier | None = None
    mode: RecallMode | None = None  # None: hybrid when an embedder is there, else keyword (ADR-0043)
    # The moment the question is asked at: "yesterday" counts back from it (ADR-0075).
    as_of: Moment | None = None

    @property
    def reader(self) -> Reader:
        return Reader(agent_id=self.agent_id, owner_id=self.owner_id, conversation=self.conversation,
                      job_source_id=self.job_source_id)


@attrs.frozen(kw_only=True)
class BeforeTurn(Turn):
    context_window: Count | None = None


@attrs.frozen(kw_only=True)
class AfterTurn(Turn):
    peak_prompt_tokens: Tokens | None = None
    context_window: Count | None = None


@attrs.frozen(kw_only=True)
class HandleCommand(Turn):
    text: AnyText
    trust: Trust = Trust.GUEST
    context_window: Count | None = None


@attrs.frozen(kw_only=True)
class ComposePrompt(Turn):
    system: SystemPrompt = SystemPrompt("")
    style: Style = Style.OPENAI


@attrs.frozen(kw_only=True)
class DispatchTool:
    """A model's tool call; the context fields become a ``ToolContext`` (application/tools.py)."""

    name: Any = attrs.field(metadata=_shape({"type": "string"}))
    arguments: Any = attrs.field(metadata=_shape({"description": "the tool call's arguments, as the model gave them"}))
    agent_id: Any = attrs.field(metadata=_shape(_ID))
    owner_id: Any = attrs.field(metadata=_shape(_ID))
    trust: Any = attrs.field(default="guest", metadata=_shape({"type": "string", "enum": ["operator", "guest"]}))
    conversation: Any = attrs.field(default=None, metadata=_shape({"anyOf": [_CONVERSATION, {"type": "null"}]}))
    job_source_id: Any = attrs.field(default=None, metadata=_shape({"anyOf": [_ID, {"type": "null"}]}))
    session_id: Any = attrs.field(default="", metadata=_shape({"type": "string", "maxLength": 256}))
    run_id: Any = attrs.field(default="", metadata=_shape({"type": "string", "maxLength": 256}))
    source_message_id: Any = attrs.field(default=None, metadata=_shape({"type": ["integer", "null"]}))


@attrs.frozen(kw_only=True)
class Forget:
    """Forget an owner (every agent's, or ``agent_id``'s); ``dry_run``: only say what would go."""

    owner_id: Identifier
    agent_id: Identifier | None = None
    dry_run: bool = False
    by: Identifier = Identifier("operator")
    reason: Any = ""


@attrs.frozen(kw_only=True)
class ForgetMemory:
    """Forget one memory row; ``dry_run``: only say what would go."""

    memory_id: RowId
    dry_run: bool = False
    by: Identifier = Identifier("operator")
    reason: Any = ""


@attrs.frozen(kw_only=True)
class StartSession:
    """What :meth:`MemorySystem.session` binds once for every call of a session."""

    agent_id: Identifier
    owner_id: Identifier
    conversation: ConversationKey
    trust: Trust = Trust.GUEST
    context_window: Count | None = None
