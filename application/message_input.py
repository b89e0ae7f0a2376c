"""Validation of an incoming message (API, import): typed errors, never a half-made event."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

try:  # the extras that bring it ([openai-agents], [server]): the canonical JSON of plain metadata, faster
    import orjson
except ImportError:  # pragma: no cover - the core without it
    orjson = None  # type: ignore[assignment]

from fermix_memory.domain import values
from fermix_memory.domain.checkpoint import quoted_owners_of
from fermix_memory.domain.errors import DomainError, InvalidConversationKey
from fermix_memory.domain.message_metadata import CheckedMetadata
from fermix_memory.domain.tool_calls import TOOL_CALL_ID_KEY, TOOL_CALLS_KEY, check_tool_metadata
from fermix_memory.domain.values import (
    MAX_CONTENT_CHARS,
    ConversationKey,
    E,
    Role,
    Trust,
    check_identifier,
    is_encodable,
)

if TYPE_CHECKING:  # a reader of stored rows (known_conversation_key) needs neither: imported when a message is built
    from fermix_memory.application.commands import AppendMessage
    from fermix_memory.domain.conversation_events import MessageAppended

MAX_METADATA_BYTES = 64 * 1024
# Metadata that carries the message itself in a framework's own form (an OpenAI Agents SDK item,
# whose images and files come as data URLs): bounded, but as a request to a model is (ADR-0103).
MAX_ITEM_METADATA_BYTES = 32 * 1024 * 1024
MAX_METADATA_DEPTH = 32
# Where a message's import key is kept: in its metadata, under this reserved name (export writes
# it back out as the line's ``message_id``). See ADR-0012.
IMPORT_KEY = "fermix_import_key"


# The canonical JSON of checked metadata (what payloads hold: sorted keys, no spaces, text as it
# is), refusing NaN and the infinities as the checks do.
_CHECKED_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ascii_json_string = json.encoder.encode_basestring_ascii
_TOOL_KEYS = (TOOL_CALLS_KEY, TOOL_CALL_ID_KEY)
_CONTAINERS = frozenset({dict, list, tuple})
_SCALARS = frozenset({int, float, bool, type(None)})
# What orjson writes exactly as the canonical encoder does (sorted text keys, no spaces, text as
# it is): text, integers, booleans, null, and dicts, lists and tuples of them. A float (the
# exponent is written otherwise: ``1e16`` for ``1e+16``), any other type and an integer past 64
# bits (refused by orjson) take the standard encoder.
_EXACT = frozenset({str, int, bool, type(None), dict, list, tuple})
_SORTED_JSON = 0 if orjson is None else orjson.OPT_SORT_KEYS
# orjson's text of at most this many characters per byte of the limit surely fits it (see _checked).
_SURELY_SMALL_PER_BYTE = 13


class InvalidMessage(DomainError):
    """A message field is missing, of the wrong type or out of range."""


# A host names the same few conversations turn after turn; the key is immutable, and sharing one
# instance keeps its ``scope_id`` computed once.
_parsed_key = functools.lru_cache(maxsize=1024)(ConversationKey.parse)
# The same key from its parts (host tuples, stored rows): checked once per conversation.
known_conversation_key = functools.lru_cache(maxsize=4096)(ConversationKey)


def conversation_key(value: object) -> ConversationKey:
    """Accept a ConversationKey, ``"CH:ID[:THREAD]"``, a mapping or a 2/3-tuple."""
    if isinstance(value, ConversationKey):
        return value
    if isinstance(value, str):
        return _parsed_key(value)
    if isinstance(value, dict):
        try:
            return ConversationKey(value["channel"], value["chat_id"], value.get("thread_scope", ""))
        except KeyError as exc:
            raise InvalidConversationKey(f"conversation is missing {exc.args[0]!r}") from None
    if isinstance(value, tuple) and len(value) in (2, 3):
        try:
            return known_conversation_key(*value)
        except TypeError:  # an unhashable part: checked (and refused) without the cache
            return ConversationKey(*value)
    if isinstance(value, list) and len(value) in (2, 3):
        return ConversationKey(*value)
    raise InvalidConversationKey("conversation must be a ConversationKey, 'CHANNEL:CHAT_ID[:THREAD]' or a mapping")


def parse_enum(enum_cls: type[E], value: object, what: str) -> E:
    """The member ``value`` names, or :class:`InvalidMessage` naming the allowed values."""
    return values.parse_enum(enum_cls, value, what, InvalidMessage)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def keyed_metadata(metadata: object, key: str) -> object:
    """A message's metadata with its idempotency key as its import key; metadata that is not a
    mapping is returned as it is, for the message's checks to refuse."""
    if metadata is None:
        return {IMPORT_KEY: key}
    if not isinstance(metadata, Mapping):
        return metadata
    if IMPORT_KEY in metadata and metadata[IMPORT_KEY] != key:
        raise InvalidMessage(f"metadata key {IMPORT_KEY} differs from idempotency_key; give the key once")
    return {**metadata, IMPORT_KEY: key}


def build_message_event(cmd: AppendMessage, at: datetime, own_metadata: dict[str, str] | None = None,
                        metadata_limit: int = MAX_METADATA_BYTES) -> MessageAppended:
    """Check every field of ``cmd`` and return the event that records the message.

    ``tool_calls`` (an assistant message's calls) and ``tool_call_id`` (the call a tool message
    answers) are kept in the metadata under their own names (``domain/tool_calls.py``), and an
    ``idempotency_key`` under :data:`IMPORT_KEY` (ADR-0050). ``own_metadata`` is what the caller
    itself adds to a message without metadata (an import key: checked text), taken as it is,
    without the checks of a message's metadata. ``metadata_limit``: the most bytes the metadata's
    JSON may take (:data:`MAX_METADATA_BYTES` for a host's own metadata)."""
    meta = cmd.metadata if cmd.idempotency_key is None else \
        keyed_metadata(cmd.metadata, check_identifier(cmd.idempotency_key, "idempotency_key"))
    check_identifier(cmd.agent_id, "agent_id")
    check_identifier(cmd.owner_id, "owner_id")
    key = conversation_key(cmd.conversation)
    role = values.parse_enum(Role, cmd.role, "role", InvalidMessage)
    trust = values.parse_enum(Trust, cmd.trust, "trust", InvalidMessage)
    content = cmd.content
    if not isinstance(content, str):
        raise InvalidMessage(f"content must be text, got {type(content).__name__}")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidMessage(f"content is longer than {MAX_CONTENT_CHARS} characters")
    if "\x00" in content:
        raise InvalidMessage("content must not contain NUL characters")
    if not is_encodable(content):
        raise InvalidMessage("content is not valid Unicode text (lone surrogate)")
    check_identifier(cmd.sender, "sender", allow_empty=True)
    check_identifier(cmd.kind, "kind")
    if meta is None:
        meta = {}
    elif not isinstance(meta, Mapping):
        raise InvalidMessage(f"metadata must be a JSON object, got {type(meta).__name__}")
    if cmd.tool_calls is not None or cmd.tool_call_id is not None:
        meta = {**meta, **({} if cmd.tool_calls is None else {TOOL_CALLS_KEY: cmd.tool_calls}),
                **({} if cmd.tool_call_id is None else {TOOL_CALL_ID_KEY: cmd.tool_call_id})}
    if not meta:
        return _event(cmd, at, key, role, trust, {} if own_metadata is None else own_metadata)
    stored = _stored_metadata(meta, role, metadata_limit)
    quoted = quoted_owners_of(str(cmd.kind), str(cmd.sender), str(cmd.owner_id), stored)
    return _event(cmd, at, key, role, trust, stored, quoted)


def _stored_metadata(meta: Mapping[str, Any], role: Role, limit: int = MAX_METADATA_BYTES) -> dict[str, Any]:
    """The metadata as it is stored (JSON, tool calls in their plain form), or :class:`InvalidMessage`.

    One walk checks the nesting (and refuses at once what cannot fit the size limit); one encoding
    gives the canonical JSON that the log's payload and the message's row keep
    (:class:`CheckedMetadata`) and the size the limit is measured on: the bytes of the metadata's
    JSON with ASCII escapes and the default separators (``json.dumps(metadata)``)."""
    tools = [meta[k] for k in _TOOL_KEYS if k in meta]
    if tools:  # kept in their own form (checked below): their nesting is walked, not their size
        _walk(tools, 1, math.inf)
        text_keys, exact = _walk(({k: v for k, v in meta.items() if k not in _TOOL_KEYS},), 0, limit)
    else:
        text_keys, exact = _walk((meta,), 0, limit)
    try:
        plain = check_tool_metadata(role, meta) if tools else dict(meta)
    except ValueError as exc:
        raise InvalidMessage(str(exc)) from None
    if not text_keys:  # keys JSON writes as text (numbers, booleans, null): stored as JSON reads them back
        return _stored_in_general(plain, limit)
    if exact and orjson is not None:  # the tool calls, in their plain form, are text
        try:
            text = orjson.dumps(plain, option=_SORTED_JSON).decode()
            return _checked(text, plain, orjson.loads(text), limit)
        except (orjson.JSONEncodeError, orjson.JSONDecodeError):  # an integer past 64 bits, a lone surrogate
            pass
    try:
        text = _CHECKED_JSON.encode(plain)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"metadata must be JSON-serialisable: {exc}") from None
    return _checked(text, plain, None, limit)


def _checked(text: str, plain: dict[str, Any], values: dict[str, Any] | None, limit: int) -> CheckedMetadata:
    """The stored metadata whose canonical JSON is ``text`` (of ``plain``; ``values``: ``text``
    decoded by orjson, which writes no lone surrogate), once its size passed. A character takes
    at most 12 bytes with ASCII escapes (an astral one, two ``\\uXXXX``) and one more for a
    separator's space: orjson's text within ``limit // 13`` characters surely fits ``limit``."""
    if values is None or len(text) > limit // _SURELY_SMALL_PER_BYTE:
        _check_size(text, plain, limit)
    return CheckedMetadata.of(json.loads(text) if values is None else values, text)


def _stored_in_general(plain: dict[str, Any], limit: int) -> dict[str, Any]:
    """The stored metadata of ``plain`` as JSON reads its encoding back (keys of other types
    become text), or :class:`InvalidMessage`."""
    try:
        encoded = json.dumps(plain, allow_nan=False)
        if "\\u" in encoded:  # text beyond ASCII: a lone surrogate among it cannot be stored
            json.dumps(plain, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"metadata must be JSON-serialisable: {exc}") from None
    if len(encoded.encode()) > limit:
        raise InvalidMessage(f"metadata is larger than {limit} bytes")
    stored: dict[str, Any] = json.loads(encoded)
    return stored


def _check_size(text: str, plain: dict[str, Any], limit: int) -> None:
    """:class:`InvalidMessage` when ``plain``, whose compact JSON is ``text``, is larger than
    ``limit`` bytes as ``json.dumps(plain)`` writes it (ASCII escapes, a space after
    each ':' and ','), or holds a lone surrogate. The spaces are as many as the separators, which
    are among the ':' and ',' of ``text``: counted only when that count decides."""
    if text.isascii():
        size = len(text) + 5 * text.count("\x7f")  # DEL, kept as it is, is escaped as \u007f
    elif not is_encodable(text):
        raise InvalidMessage("metadata must be JSON-serialisable: it holds a lone surrogate (not Unicode text)")
    else:  # the whole text as one ASCII JSON string, without its quotes and the escapes of '"' and '\\'
        size = len(_ascii_json_string(text)) - 2 - text.count('"') - text.count("\\")
    if size + text.count(":") + text.count(",") > limit and (
            size > limit or len(json.dumps(plain, allow_nan=False)) > limit):
        raise InvalidMessage(f"metadata is larger than {limit} bytes")


def _walk(values: Iterable[object], depth: int, ceiling: float) -> tuple[bool, bool]:
    """Whether every object key among ``values`` (held at ``depth``; the metadata itself is at 1)
    is text, and whether every value among them is of an :data:`_EXACT` type. Refuses
    (:class:`InvalidMessage`) objects or arrays nested deeper than :data:`MAX_METADATA_DEPTH` (a
    cycle counts as infinitely deep), and objects and arrays whose JSON surely takes more than
    ``ceiling`` bytes (counting the least their members take), as soon as either shows.
    Iterative: a hostile depth must not exhaust the Python stack."""
    text_keys = exact = True
    least = 0
    stack: list[tuple[Any, int]] = []
    while True:
        for child in values:
            kind = type(child)
            if kind is str:
                continue
            if kind in _SCALARS:
                exact = exact and kind is not float
                continue
            if kind in _CONTAINERS or isinstance(child, Mapping | list | tuple):
                if depth >= MAX_METADATA_DEPTH:
                    raise InvalidMessage(f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep")
                stack.append((child, depth + 1))
            else:
                exact = False
        if not stack:
            return text_keys, exact
        item, depth = stack.pop()
        kind = type(item)
        exact = exact and kind in _EXACT
        if kind is dict or (kind is not list and kind is not tuple and isinstance(item, Mapping)):
            least += 6 * len(item) or 2  # '{}', and '"": ' and ', ' around each member
            if text_keys:
                for key in item:
                    if type(key) is not str:
                        text_keys = False
                        break
            values = item.values()
        else:
            least += 2 * len(item) or 2  # '[]', and ', ' between the items
            values = item
        if least > ceiling:
            raise InvalidMessage(f"metadata is larger than {ceiling:.0f} bytes")


def _created_at(created_at: object, at: datetime) -> datetime:
    if created_at is None:
        return at.astimezone(UTC)
    try:
        if isinstance(created_at, datetime):
            return _aware(created_at).astimezone(UTC)
        if isinstance(created_at, str):
            try:
                return _aware(datetime.fromisoformat(created_at)).astimezone(UTC)
            except ValueError:
                raise InvalidMessage(f"created_at is not an ISO 8601 time: {created_at[:40]!r}") from None
    except OverflowError:  # a time near year 1 or 9999 whose offset pushes it out of range in UTC
        raise InvalidMessage("created_at is out of range once converted to UTC") from None
    raise InvalidMessage("created_at must be an ISO 8601 string or a datetime")


@functools.cache
def _message_class() -> type[MessageAppended]:
    """The event class, imported when the first message is built (then looked up once)."""
    from fermix_memory.domain.conversation_events import MessageAppended

    return MessageAppended


def _event(cmd: AppendMessage, at: datetime, key: ConversationKey, role: Role, trust: Trust,
           metadata: dict[str, Any], quoted_owners: tuple[str, ...] = ()) -> MessageAppended:
    return _message_class()(
        at=at,
        agent_id=str(cmd.agent_id),
        owner_id=str(cmd.owner_id),
        conversation=key,
        sender=str(cmd.sender),
        role=role,
        message_kind=str(cmd.kind),
        content=cmd.content,
        metadata=metadata,
        trust=trust,
        created_at=_created_at(cmd.created_at, at),
        quoted_owners=quoted_owners,
    )
