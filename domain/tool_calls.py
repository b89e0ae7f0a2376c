"""A model's tool calls and their results, as a message records them (ADR-0022).

Pure. An assistant message that called tools keeps the calls in its metadata under
:data:`TOOL_CALLS_KEY`, each ``{"id", "name", "arguments"}`` (``arguments`` the JSON text the
model wrote, as OpenAI sends it); a tool message keeps the id of the call it answers under
:data:`TOOL_CALL_ID_KEY`. :func:`stored_tool_calls` checks and normalises what a host gives
(the stored form, OpenAI's ``{"id", "type": "function", "function": {...}}`` or Anthropic's
``{"type": "tool_use", "id", "name", "input"}``), raising :class:`ValueError` with the reason;
:func:`tool_calls_of` / :func:`tool_call_id_of` read a stored message back and never raise
(a row written before calls were recorded, or by hand, simply has none).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from fermix_memory.domain.values import Role, check_identifier

TOOL_CALLS_KEY = "tool_calls"
TOOL_CALL_ID_KEY = "tool_call_id"
MAX_TOOL_CALLS = 128


@attrs.frozen
class ToolCall:
    """One call the model made: ``arguments`` is JSON text (an object, as the model wrote it)."""

    id: str
    name: str
    arguments: str

    def input(self) -> dict[str, Any]:
        """The arguments as a JSON object (Anthropic's ``input``): text that is no JSON object is
        kept whole under ``"arguments"``, so nothing the model wrote is lost."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            value = None
        return value if isinstance(value, dict) else {"arguments": self.arguments}

    def describe(self) -> str:
        """The call as one line of plain text (where the call cannot be sent as a call)."""
        return f"[called tool {self.name} (id {self.id}) with {self.arguments}]"


def as_text(content: str, calls: Sequence[ToolCall]) -> str:
    """A reply and the calls it made as plain text (where a call cannot be sent as one: a
    summary, a transcript, a call whose result is missing)."""
    return "\n".join(part for part in (content.strip(), *(c.describe() for c in calls)) if part)


def _text_id(value: object, what: str) -> str:
    try:
        return check_identifier(value, what)
    except ValueError as exc:  # InvalidIdentifier is a ValueError too; keep one error type here
        raise ValueError(str(exc)) from None


def _arguments(value: object) -> str:
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        try:
            return json.dumps(dict(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a tool call's arguments must be JSON-serialisable: {exc}") from None
    raise ValueError(f"a tool call's arguments must be a JSON object or JSON text, got {type(value).__name__}")


def _one_call(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"each tool call must be an object with id, name and arguments, got {type(value).__name__}")
    function = value.get("function")
    if isinstance(function, Mapping):  # OpenAI's shape
        name, arguments = function.get("name"), function.get("arguments")
    elif value.get("type") == "tool_use":  # Anthropic's shape
        name, arguments = value.get("name"), value.get("input")
    else:
        name, arguments = value.get("name"), value.get("arguments")
    return {"id": _text_id(value.get("id"), "a tool call's id"), "name": _text_id(name, "a tool call's name"),
            "arguments": _arguments(arguments)}


def stored_tool_calls(value: object) -> list[dict[str, str]]:
    """The calls in their stored form, or :class:`ValueError` saying what is wrong."""
    if not isinstance(value, list | tuple) or not value:
        raise ValueError("tool_calls must be a non-empty list of calls")
    if len(value) > MAX_TOOL_CALLS:
        raise ValueError(f"a message holds at most {MAX_TOOL_CALLS} tool calls")
    calls = [_one_call(call) for call in value]
    ids = [call["id"] for call in calls]
    if len(set(ids)) != len(ids):
        raise ValueError("the tool calls of one message must have different ids")
    return calls


def check_tool_metadata(role: Role, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with its tool keys checked and normalised for a message of ``role``, or
    :class:`ValueError`: calls belong on an assistant message, a call id on a tool result."""
    out = dict(metadata)
    if TOOL_CALLS_KEY in out:
        if role is not Role.ASSISTANT:
            raise ValueError("only an assistant message can carry tool_calls")
        out[TOOL_CALLS_KEY] = stored_tool_calls(out[TOOL_CALLS_KEY])
    if TOOL_CALL_ID_KEY in out:
        if role is not Role.TOOL:
            raise ValueError("only a tool message can carry a tool_call_id")
        out[TOOL_CALL_ID_KEY] = _text_id(out[TOOL_CALL_ID_KEY], "tool_call_id")
    return out


def tool_calls_of(metadata: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    """The calls a stored assistant message records (none when it records none, or a malformed list)."""
    value = metadata.get(TOOL_CALLS_KEY)
    if not value:
        return ()
    try:
        return tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in stored_tool_calls(value))
    except ValueError:
        return ()


def tool_call_id_of(metadata: Mapping[str, Any]) -> str | None:
    """The id of the call a stored tool message answers (``None``: unknown)."""
    value = metadata.get(TOOL_CALL_ID_KEY)
    return value if isinstance(value, str) and value else None
