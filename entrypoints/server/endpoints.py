"""What ``/v1`` offers: each endpoint's route, who may call it, the shape of its input and its
result (from the Python API's own types), and the call it makes (ADR-0073).

Every handler calls the asyncio API (:class:`AsyncMemorySystem`) with the body's keys as keyword
arguments, so checks, admission and typed errors are the Python API's. A host token's agent is
its own (:meth:`Caller.agent`); the token's name is who asks (``by``) where a call records it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from fermix_memory.adapters.sql.audit_chain import VerifyReport
from fermix_memory.application import commands as c
from fermix_memory.application.errors import NotFound
from fermix_memory.application.host_input import MAX_SYSTEM_PROMPT_CHARS
from fermix_memory.application.memory_writes import OperationOutcome
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.recall import RecallResult
from fermix_memory.application.turns import CommandResult, PreflightResult
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import check_text, parse_enum
from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.api.lane import made_at_once
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.server.auth import READS, TURNS, Caller
from fermix_memory.entrypoints.server.errors import bad_request
from fermix_memory.entrypoints.server.schema import Schema

_OBJECT: Schema = {"type": "object", "additionalProperties": True}
_MESSAGES: Schema = {"type": "array", "items": _OBJECT}
_IDENTIFIER: Schema = {"type": "string", "minLength": 1, "maxLength": 256}
_MOMENT: Schema = {"type": "string", "format": "date-time",
                   "description": "ISO 8601 with a time zone: the state as it was then"}


@attrs.frozen
class Call:
    """One request, checked: who asks, its body (keys known), its query and path parameters."""

    memory: AsyncMemorySystem
    caller: Caller
    body: dict[str, Any]
    query: dict[str, Any]
    path: Mapping[str, str]
    inline: bool = False  # run the call on the event loop: see :meth:`run`

    async def run(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """The memory's ``name`` called with these arguments: on the worker lane; or, when the
        server found the lane idle for a short call (app.py), right here on the event loop,
        sparing the two thread hops (same result, same typed errors), unless its write would wait
        there (ADR-0110): then on the lane after all. Where it runs is the server's choice alone
        (ADR-0094): a call on the lane is no brief write of the asyncio API made at once."""
        return await self.run_together(lambda memory: getattr(memory, name)(*args, **kwargs))

    async def run_together(self, work: Callable[[MemorySystem], Any], /) -> Any:
        """``work(memory)``, calling one or several methods of the sync memory: as ONE call on the
        worker lane (one thread hop for them all, not one each), or right here when :attr:`inline`
        (and its first write does not wait)."""
        if self.inline:
            done, result = made_at_once(lambda: work(self.memory.sync))
            if done:
                return result
        return await self.memory._together(work)


Handler = Callable[[Call], Awaitable[Any]]


@attrs.frozen
class Endpoint:
    """One operation of the API: its route, its reach (a role's), input and result shapes."""

    method: str
    path: str
    name: str  # the OpenAPI operationId: the Python API's method of the same name
    summary: str
    reach: str
    handler: Handler
    body: type | None = None  # the command class the body's schema is generated from
    drop: tuple[str, ...] = ()  # command fields the body does not take
    extra: Mapping[str, Schema] = attrs.field(factory=dict)  # fields the call takes beside the command's
    query: Mapping[str, Schema] = attrs.field(factory=dict)
    needs: tuple[str, ...] = ()  # the ``extra`` fields a body must have
    result: Any = None  # a Python type, or a Schema (a dict)
    status: int = 200
    short: bool = False  # a short call (an append, a prompt): run on the loop when the lane is idle


def _own(call: Call, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The body with the caller's agent in it (a host token's own, else the one named)."""
    args = dict(call.body if body is None else body)
    args["agent_id"] = call.caller.agent(args.get("agent_id"))
    return args


# --- turns -----------------------------------------------------------------------------------------


def _prompt_options(value: object) -> dict[str, Any]:
    """The ``prompt`` option of an append: the shape of the prompt asked for, checked before the
    message is stored so that a bad option stores nothing."""
    if not isinstance(value, dict):
        raise InvalidArgument("prompt must be an object: {\"style\", \"system\"}")
    unknown = sorted(k for k in value if k not in _PROMPT_OPTIONS)
    if unknown:
        raise bad_request("unknown_field", f"unknown field prompt.{unknown[0][:40]!r}; a prompt option takes"
                          " style, system")
    if "style" in value:
        parse_enum(c.Style, value["style"], "prompt.style")
    if "system" in value:
        check_text(value["system"], "prompt.system", max_chars=MAX_SYSTEM_PROMPT_CHARS)
    return value


def _prompt_answer(prompt: Any) -> dict[str, Any]:
    if isinstance(prompt, tuple):
        system, messages = prompt
        return {"system": system, "messages": messages}
    return {"messages": prompt}


async def _append(call: Call) -> Any:
    args = _own(call)
    if "prompt" not in args:
        return {"id": await call.run("append_message", **args)}
    # A turn in one request (ADR-0089): the message, then the prompt composed after it.
    options = _prompt_options(args.pop("prompt"))

    def turn(memory: MemorySystem) -> dict[str, Any]:  # one hop to the lane for both calls
        found: dict[str, Any] = {"id": memory.append_message(**args)}
        found["prompt"] = _prompt_answer(memory.compose_prompt(
            args["agent_id"], args["owner_id"], args["conversation"], **options))
        return found

    return await call.run_together(turn)


async def _append_batch(call: Call) -> Any:
    messages = call.body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise InvalidArgument("messages must be a list of message objects")
    return {"ids": await call.run("append_messages", [_own(call, m) for m in messages])}


async def _prompt(call: Call) -> Any:
    args = _own(call)
    agent, owner, conversation = args.pop("agent_id"), args.pop("owner_id"), args.pop("conversation")
    return _prompt_answer(await call.run("compose_prompt", agent, owner, conversation, **args))


async def _before(call: Call) -> Any:
    return await call.memory.before_turn(**_own(call))


async def _after(call: Call) -> Any:
    await call.memory.after_turn(**_own(call))  # the review runs in the background; not awaited
    return {"accepted": True}


async def _command(call: Call) -> Any:
    args = _own(call)
    return {"result": await call.memory.handle_command(args.pop("text"), **args)}


async def _recall(call: Call) -> Any:
    args = _own(call)
    return await call.memory.recall(args.pop("query", ""), **args)


async def _write(call: Call) -> Any:
    args = _own(call)
    args.setdefault("source_id", call.caller.name)  # who asked: the token's name, unless the body says
    return await call.memory.write_memory(args.pop("operations"), **args)


async def _tools(call: Call) -> Any:
    return call.memory.tool_definitions(call.query.get("style", "openai"))


async def _tool_call(call: Call) -> Any:
    args = _own(call)
    return await call.memory.dispatch_tool(args.pop("name"), args.pop("arguments"), **args)


# --- reads ---------------------------------------------------------------------------------------


async def _memories(call: Call) -> Any:
    return await call.memory.memories(**call.query)


async def _memory(call: Call) -> Any:
    return await call.memory.memory(_path_id(call, "memory_id"))


async def _explain(call: Call) -> Any:
    return await call.memory.explain(_path_id(call, "memory_id"))


async def _history(call: Call) -> Any:
    query = dict(call.query)
    return await call.memory.history(query.pop("agent_id", None), query.pop("conversation", None), **query)


async def _resources(call: Call) -> Any:
    return await call.memory.resources(**call.query)


def _pair(query: dict[str, Any]) -> dict[str, Any]:
    """The owner pair a prompt file read needs; a missing one is the use case's typed error."""
    return {"agent_id": query.pop("agent_id", None), "owner_id": query.pop("owner_id", None), **query}


async def _resource_history(call: Call) -> Any:
    return await call.memory.resource_history(call.path["name"], **_pair(dict(call.query)))


async def _resource_diff(call: Call) -> Any:
    query = dict(call.query)
    a, b = query.pop("a", None), query.pop("b", None)
    return {"diff": await call.memory.resource_diff(call.path["name"], a, b, **_pair(query))}


async def _head(call: Call) -> Any:
    head = await call.memory.head()
    return {**attrs.asdict(head), "text": str(head)}


async def _verify(call: Call) -> Any:
    return await call.memory.verify(expect_head=call.body.get("expect_head"))


def _path_id(call: Call, name: str) -> int:
    text = call.path[name]
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        raise NotFound(f"no memory row {text[:40]!r}")
    return int(text)


_PROMPT: Schema = {"type": "object", "properties": {"system": {"type": "string"}, "messages": _MESSAGES},
                   "required": ["messages"]}
_PROMPT_OPTION: Schema = {
    "type": "object", "additionalProperties": False,
    "description": "ask for the prompt composed after this message (compose_prompt's style and system)",
    "properties": {"style": {"type": "string", "enum": ["openai", "anthropic"]},
                   "system": {"type": "string", "maxLength": MAX_SYSTEM_PROMPT_CHARS}}}
_PROMPT_OPTIONS = frozenset(_PROMPT_OPTION["properties"])
_OWNER_QUERY: Mapping[str, Schema] = {"agent_id": _IDENTIFIER, "owner_id": _IDENTIFIER}
# A batch's messages are single messages' bodies, without the prompt option (one per turn, not per message).
_MESSAGE_LIST: Schema = {"type": "array", "items": {"$ref": "#/components/schemas/AppendMessageBody",
                                                    "not": {"required": ["prompt"]}}}

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/v1/messages", "append_message", "Record one message of a conversation; with prompt, the"
             " prompt composed after it too (a turn in one request)", TURNS, _append, body=c.AppendMessage,
             status=201, short=True, extra={"prompt": _PROMPT_OPTION},
             result={"type": "object", "properties": {"id": {"type": "integer"}, "prompt": _PROMPT},
                     "required": ["id"]}),
    Endpoint("POST", "/v1/messages/batch", "append_messages", "Record several messages in one transaction", TURNS,
             _append_batch, status=201, short=True, extra={"messages": _MESSAGE_LIST}, needs=("messages",),
             result={"type": "object", "required": ["ids"],
                     "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}}),
    Endpoint("POST", "/v1/prompt", "compose_prompt", "The prompt of a turn: the system message, then the window",
             TURNS, _prompt, body=c.ComposePrompt, extra={"as_of": _MOMENT}, short=True, result=_PROMPT),
    Endpoint("POST", "/v1/turns/before", "before_turn", "The preflight hook: compacts first when the prompt is near"
             " the context window", TURNS, _before, body=c.BeforeTurn, result=PreflightResult),
    Endpoint("POST", "/v1/turns/after", "after_turn", "The post-delivery hook: records the peak, queues the review",
             TURNS, _after, body=c.AfterTurn, result={"type": "object", "properties": {"accepted": {"const": True}}},
             status=202),
    Endpoint("POST", "/v1/commands", "handle_command", "/compact, /new or /clear; result null when the text is no"
             " command", TURNS, _command, body=c.HandleCommand,
             result={"type": "object", "properties": {"result": {"anyOf": [CommandResult, {"type": "null"}]}}}),
    Endpoint("POST", "/v1/recall", "recall", "Memories and history this reader may see, by key, words or meaning",
             TURNS, _recall, body=c.Recall, result=RecallResult),
    Endpoint("POST", "/v1/memories", "write_memory", "Apply memory operations through admission, in one"
             " transaction", TURNS, _write, body=c.WriteMemory, result=list[OperationOutcome]),
    Endpoint("GET", "/v1/tools", "tool_definitions", "The memory tools' definitions for a model", TURNS, _tools,
             query={"style": {"type": "string", "enum": ["openai", "anthropic"]}},
             result={"type": "array", "items": _OBJECT}),
    Endpoint("POST", "/v1/tools/call", "dispatch_tool", "Run a model's memory tool call; bad calls come back as"
             ' {"ok": false}', TURNS, _tool_call, body=c.DispatchTool, result=_OBJECT),
    Endpoint("GET", "/v1/memories", "memories", "Every row of an agent or owner (an operator's view)", READS,
             _memories, query={**_OWNER_QUERY, "include_archived": {"type": "boolean"}, "as_of": _MOMENT},
             result=list[Memory]),
    Endpoint("GET", "/v1/memories/{memory_id}", "memory", "One memory row", READS, _memory, result=Memory),
    Endpoint("GET", "/v1/memories/{memory_id}/explain", "explain", "Why a row says what it says: its events and"
             " source messages", READS, _explain, result=_OBJECT),
    Endpoint("GET", "/v1/history", "history", "A conversation's current window, oldest first", READS, _history,
             query={"agent_id": _IDENTIFIER, "conversation": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 0}},
             result=list[Message]),
    Endpoint("GET", "/v1/resources", "resources", "The current revision of every prompt file", READS, _resources,
             query=_OWNER_QUERY, result=list[ResourceRevision]),
    Endpoint("GET", "/v1/resources/{name}/history", "resource_history", "Revisions of a prompt file, newest first",
             READS, _resource_history, query={**_OWNER_QUERY, "limit": {"type": "integer", "minimum": 0}},
             result=list[ResourceRevision]),
    Endpoint("GET", "/v1/resources/{name}/diff", "resource_diff", "A unified diff between two revisions", READS,
             _resource_diff, query={**_OWNER_QUERY, "a": {"type": "integer"}, "b": {"type": "integer"}},
             result={"type": "object", "properties": {"diff": {"type": "string"}}, "required": ["diff"]}),
    Endpoint("GET", "/v1/events/head", "head", "The log's anchor", READS, _head,
             result={"type": "object", "properties": {"position": {"type": "integer"}, "hash": {"type": "string"},
                                                      "chains": {"type": "array", "items": {"type": "integer"}},
                                                      "text": {"type": "string"}}}),
    Endpoint("POST", "/v1/events/verify", "verify", "Check the hash chain, the indexes and the replay", READS,
             _verify, extra={"expect_head": {"type": "string"}}, result=VerifyReport),
)

__all__ = ["ENDPOINTS", "Call", "Endpoint"]
