"""How the OpenAI Agents SDK's items map onto fermix messages (ADR-0027): an item to the message
it is recorded as (its role, text, tool call or call id, the item itself kept in the metadata),
and a message of the window back to the items it stands for.

An item read back is built afresh at each read along the path to its text (the item is kept
without its text, which is the message's content): the containers on that path, and the item
itself, are new; what lies beside the path is the stored value, which the window's cache may
hold too, so an item handed out is the caller's to read and to rebuild, never to change within.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from fermix_memory.application.composer import system_part
from fermix_memory.application.message_input import InvalidMessage
from fermix_memory.application.stored_messages import StoredRow, message_of
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.messages import Message
from fermix_memory.domain.tool_calls import tool_call_id_of, tool_calls_of
from fermix_memory.domain.values import MAX_CONTENT_CHARS, ConversationKey, Role, check_identifier

# Where a message keeps the SDK item it was recorded from (persisted: never rename).
ITEM_KEY = "openai_agents_item"
# The message kind of an item with no text and no call fermix can read (reasoning, hosted tool
# calls, references): kept in the window and the log, left out of prompts and search.
OPAQUE_KIND = "agents_item"
# The SDK's placeholder id (``agents.models.fake_id.FAKE_RESPONSES_ID``) on every item of a
# provider that gives none (Chat Completions, LiteLLM): it names no item, so it is no item's key.
PLACEHOLDER_ID = "__fake_id__"
_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM, "developer": Role.SYSTEM}


@attrs.frozen(kw_only=True)
class ItemRecord:
    """What one item becomes: a message's fields (the item itself in ``metadata``)."""

    role: Role
    content: str
    kind: str = "text"
    metadata: dict[str, Any]
    tool_calls: list[dict[str, str]] | None = None
    tool_call_id: str | None = None


def _texts(parts: object) -> list[tuple[int, str]]:
    """The text parts of a content list (``input_text``, ``output_text``, a refusal), by index."""
    if not isinstance(parts, list):
        return []
    found = []
    for i, part in enumerate(parts):
        if isinstance(part, Mapping):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str):
                found.append((i, text))
    return found


def _is_content(text: str) -> bool:
    """Whether ``text`` can be a message's content as it is (not too long, no NUL character)."""
    return len(text) <= MAX_CONTENT_CHARS and "\x00" not in text


def _readable(text: str) -> str:
    """What a message's content shows of a text that cannot be one as it is: NUL characters as
    U+FFFD, and no more than a content holds (the item keeps the text whole)."""
    return text.replace("\x00", "\ufffd")[:MAX_CONTENT_CHARS]


def _split(item: dict[str, Any], field: str) -> tuple[str, dict[str, Any]]:
    """The item's readable text and what the message keeps of the item. A text held in one place
    (``field`` as a string, or the one text part of its list) is stored once, as the message's
    content, and put back on the way out; several parts are joined for the content and the item
    is kept whole, as is an item whose text cannot be a content as it is (longer than a content,
    a NUL in it: a tool's output may be either), whose content shows what it can of it. The
    caller's item is left as it was (the containers on the path are copied)."""
    value = item.get(field)
    if isinstance(value, str):
        if not _is_content(value):
            return _readable(value), {"item": dict(item)}
        return value, {"item": {k: v for k, v in item.items() if k != field}, "text_at": [field]}
    texts = _texts(value)
    if len(texts) == 1 and isinstance(value, list) and _is_content(texts[0][1]):
        index, text = texts[0]
        parts = list(value)
        part = dict(parts[index])
        key = "text" if isinstance(part.get("text"), str) else "refusal"
        del part[key]
        parts[index] = part
        return text, {"item": {**item, field: parts}, "text_at": [field, index, key]}
    return _readable("\n".join(text for _, text in texts)), {"item": dict(item)}


def item_record(item: object) -> ItemRecord:
    """The message an item is recorded as, or :class:`InvalidMessage` for what is no item."""
    arguments = _record_arguments(item)
    return ItemRecord(role=Role(arguments["role"]), content=arguments["content"],
                      kind=arguments.get("kind", "text"), metadata=arguments["metadata"],
                      tool_calls=arguments.get("tool_calls"), tool_call_id=arguments.get("tool_call_id"))


def _record_arguments(item: object) -> dict[str, Any]:
    """:func:`item_record` as the arguments of ``Session.append`` (those at their defaults not given)."""
    if type(item) is not dict:
        if not isinstance(item, Mapping):
            raise InvalidMessage(f"an item must be a JSON object, got {type(item).__name__}")
        item = dict(item)
    kind, role = item.get("type"), item.get("role")
    if kind in (None, "message") and isinstance(role, str) and role in _ROLES:
        text, kept = _split(item, "content")
        return {"role": _ROLES[role].value, "content": text, "metadata": {ITEM_KEY: kept}}
    call_id = item.get("call_id")
    if isinstance(kind, str) and isinstance(call_id, str):
        if kind.endswith("_call") and isinstance(item.get("name"), str):  # function and custom tool calls
            arguments = item.get("arguments", item.get("input"))
            return {"role": "assistant", "content": "", "metadata": {ITEM_KEY: {"item": dict(item)}}, "tool_calls": [
                {"id": call_id, "name": item["name"], "arguments": arguments if isinstance(arguments, str) else "{}"}]}
        if kind.endswith("_call_output"):
            text, kept = _split(item, "output")
            return {"role": "tool", "content": text, "metadata": {ITEM_KEY: kept}, "tool_call_id": call_id}
    return {"role": "assistant", "content": "", "kind": OPAQUE_KIND, "metadata": {ITEM_KEY: {"item": dict(item)}}}


def item_key(item: object) -> str | None:
    """The item's own ``id`` (the SDK gives one to what a model produced), if it is a usable one:
    not the SDK's placeholder, which every item of some providers carries."""
    key = item.get("id") if isinstance(item, Mapping) else None
    if not isinstance(key, str) or key == PLACEHOLDER_ID:
        return None
    try:
        return check_identifier(key, "id")
    except DomainError:
        return None


def message_arguments(item: object) -> dict[str, Any]:
    """The arguments of ``Session.append`` that record ``item`` (its message's fields, and the
    item's own id as the idempotency key), or :class:`InvalidMessage` for what is no item; those
    left at their defaults are not given."""
    arguments = _record_arguments(item)
    key = item_key(item)
    if key is not None:
        arguments["idempotency_key"] = key
    return arguments


def _stored_item(kept: Mapping[str, Any], content: str, *, fresh: bool = False) -> dict[str, Any] | None:
    """The item kept, with ``content`` put back at its ``text_at``: a new item, whose containers
    along that path are new too (the kept one, maybe a cache's, is never changed); ``fresh``: the
    kept item was just parsed for this read alone, and is filled in place."""
    item = kept.get("item")
    path = kept.get("text_at")
    if not isinstance(item, dict):
        return None
    if not fresh:
        item = dict(item)
    if isinstance(path, list) and path:
        target: Any = item
        try:
            for step in path[:-1]:
                inner = target[step]
                if isinstance(inner, dict):
                    inner = inner if fresh else dict(inner)
                elif isinstance(inner, list):
                    inner = inner if fresh else list(inner)
                else:
                    return None
                target[step] = inner
                target = inner
            target[path[-1]] = content
        except (KeyError, IndexError, TypeError):
            return None
    return item


def _loads(text: str) -> Any:
    """JSON as ``json.loads`` reads it; orjson's parser where it agrees (it refuses what ``json``
    may have written beyond JSON itself: NaN, integers past 64 bits, lone surrogates)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def row_items(row: StoredRow, agent_id: str, conversation: ConversationKey) -> list[dict[str, Any]]:
    """:func:`message_items` of a stored row of ``agent_id``'s ``conversation``, the same items:
    one recorded from an item is that item, put back from the row's metadata parsed once (no
    ``Message`` built, nothing copied); any other row through its ``Message``."""
    metadata_json = row.metadata_json
    if ITEM_KEY in metadata_json:
        metadata = _loads(metadata_json)
        kept = metadata.get(ITEM_KEY) if isinstance(metadata, dict) else None
        if isinstance(kept, dict):
            item = _stored_item(kept, row.content, fresh=True)
            if item is not None:
                return [item]
    return message_items(message_of(row, agent_id, conversation))


def message_items(message: Message) -> list[dict[str, Any]]:
    """The items a message of the window stands for: the item it was recorded from, exactly;
    a message recorded by other means (the session API, an import) as the SDK's input items."""
    kept = message.metadata.get(ITEM_KEY)
    if isinstance(kept, Mapping):
        item = _stored_item(kept, message.content)
        if item is not None:
            return [item]
    if message.role is Role.SYSTEM:
        return [{"role": "system", "content": system_part(message)}] if message.content.strip() else []
    if message.role is Role.TOOL:
        call_id = tool_call_id_of(message.metadata)
        if call_id is not None:
            return [{"type": "function_call_output", "call_id": call_id, "output": message.content}]
        return [{"role": "user", "content": f"[tool result] {message.content}"}]
    items: list[dict[str, Any]] = []
    if message.content.strip():
        items.append({"role": message.role.value, "content": message.content})
    items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
              for c in tool_calls_of(message.metadata)]
    return items


def closes_turn(item: object) -> bool:
    """An assistant message: the model answered, the turn is over."""
    return (isinstance(item, Mapping) and item.get("role") == "assistant"
            and item.get("type") in (None, "message"))
