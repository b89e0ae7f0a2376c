"""How the LangGraph store's items map onto fermix memory rows (ADR-0028): a namespace to its
owner and conversation scope, an item key to a row key, a value to the row's JSON text; what
cannot map is refused with a typed error. What a search filter means is ``langgraph_filters``'."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from fermix_memory.application.commands import Identifier, Label, WriteMemory
from fermix_memory.domain.errors import (
    DomainError,
    FermixError,
    InvalidArgument,
)
from fermix_memory.domain.memory import MAX_ITEM_VALUE_CHARS, Memory
from fermix_memory.domain.operations import Operation
from fermix_memory.domain.scopes import WriterKind
from fermix_memory.domain.values import (
    ConversationKey,
    ScopeType,
    Trust,
    check_identifier,
    is_canonical_key,
    members_by_value,
    preview,
)
from fermix_memory.entrypoints.extras import require

require("langgraph", "langgraph.store.base")

from langgraph.store.base import InvalidNamespaceError, MatchCondition  # noqa: E402

CHANNEL = "langgraph-store"
_SCOPE_PREFIX = CHANNEL + ":"
CATEGORY = "context"
SOURCE_TYPE = "langgraph"
# A row key is the item key itself when it is already a canonical fermix key, else this prefix
# and 160 bits of the key's SHA-256 (a canonical key of that very shape is digested too).
_DIGEST_PREFIX = "k."
_DIGEST_KEY = re.compile(r"k\.[0-9a-f]{40}")
# What admission would rewrite in a value's text (DEL) or refuse (lone surrogates): escaped
# in the JSON text instead, so the value comes back exactly.
_REWRITTEN = re.compile("[\x7f\ud800-\udfff]")
# An item's JSON text: compact, text as it is, no NaN (built once: ``json.dumps`` with options
# builds an encoder at each call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# Its C encoding function, made once (``JSONEncoder.encode`` makes one at each call): the same
# text; without the encoder's table of objects being encoded (a value holding itself is a
# RecursionError instead of a ValueError: either is refused), so it keeps no state between calls.
_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_PARTS = (None if _MAKE_ENCODER is None else
                 _MAKE_ENCODER(None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False,
                               False))


def _json_text(document: dict[str, Any]) -> str:
    """``_ENCODER.encode(document)``."""
    if _ENCODE_PARTS is None:
        return _ENCODER.encode(document)
    return "".join(_ENCODE_PARTS(document, 0))


class StoreError(FermixError):
    """Base class of what the LangGraph store refuses or cannot do."""


class NamespaceNotMapped(InvalidArgument, InvalidNamespaceError, StoreError):
    """A namespace (or a search prefix) has no fermix owner and conversation scope to map to."""


class ValueNotStorable(InvalidArgument, StoreError):
    """An item value is not a JSON object that comes back equal, or its text is too long."""


class FilterNotSupported(InvalidArgument, StoreError):
    """A search filter uses an operator the store does not know, or the paging is out of range."""


class WriteRefused(StoreError):
    """Admission refused a put or delete (the refusal is recorded in the log)."""


class KeyCollision(StoreError):
    """Two item keys share a row key (a 160-bit digest collision): never silently mixed up."""


@attrs.frozen
class Place:
    """Where an item namespace lives in fermix: whose rows, in which conversation scope."""

    namespace: tuple[str, ...]
    owner_id: str
    conversation: ConversationKey


def write_command(place: Place, agent_id: str, trust: str, operations: Sequence[Operation]) -> WriteMemory:
    """The command writing one namespace's operations, built from values already checked (the
    place's owner and conversation, the store's agent id and trust, operations the store made):
    what the host-input converter makes of the same arguments, without parsing them again."""
    return WriteMemory(operations=tuple(operations), agent_id=Identifier(agent_id),
                       owner_id=Identifier(place.owner_id), writer=WriterKind.TOOL,
                       trust=members_by_value(Trust)[trust],
                       conversation=place.conversation, source_type=Label(SOURCE_TYPE))


def check_labels(namespace: object, what: str = "namespace") -> tuple[str, ...]:
    """The namespace as a tuple of labels LangGraph accepts (non-empty text without ``.``)."""
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise NamespaceNotMapped(f"{what} must be a tuple of text labels, got {preview(namespace)}")
    labels = tuple(namespace)
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise NamespaceNotMapped(f"{what} labels must be non-empty text without '.' or NUL, got {preview(label)}")
    return labels


def _unmapped(what: str, labels: tuple[str, ...], owner_index: int, search: bool) -> NamespaceNotMapped:
    how = ("FermixStore(..., default_owner='shared') keeps namespaces without one under that owner"
           + (", FermixStore(..., trust='operator', all_owners=True) searches every owner" if search else ""))
    return NamespaceNotMapped(f"{what} {labels!r} has no owner label: this store reads the owner from label "
                              f"{owner_index} (owner_index); {how} (ADR-0059)")


def owner_of(labels: tuple[str, ...], owner_index: int, what: str, default_owner: str | None = None) -> str:
    """The owner a namespace (or a search prefix) names: its label at ``owner_index``, else
    ``default_owner`` when there is one, else :class:`NamespaceNotMapped` saying how to map it."""
    if len(labels) <= owner_index:
        if default_owner is None:
            raise _unmapped(what, labels, owner_index, search=what != "namespace")
        return default_owner
    try:
        return check_identifier(labels[owner_index], "owner_id")
    except DomainError as exc:
        raise NamespaceNotMapped(f"{what} {labels!r}: the owner label is not usable ({exc})") from None


def place_of(namespace: object, owner_index: int, default_owner: str | None = None) -> Place:
    """Map an item namespace to its owner and conversation scope, or raise :class:`NamespaceNotMapped`."""
    labels = check_labels(namespace)
    if not labels:
        raise NamespaceNotMapped("a namespace needs at least one label")
    owner_id = owner_of(labels, owner_index, "namespace", default_owner)
    try:
        conversation = ConversationKey(CHANNEL, ".".join(labels))
    except DomainError as exc:
        raise NamespaceNotMapped(f"namespace {labels!r} cannot be stored ({exc})") from None
    return Place(labels, owner_id, conversation)


def namespace_of(row: Memory) -> tuple[str, ...] | None:
    """The item namespace a row holds, or ``None`` for a row that is no store item."""
    if row.scope_type is not ScopeType.CONVERSATION or not row.scope_id.startswith(_SCOPE_PREFIX):
        return None
    return _namespace_of_scope(row.scope_id)


@functools.lru_cache(maxsize=4096)  # a pure function of the scope id; a search reads many rows of few namespaces
def _namespace_of_scope(scope_id: str) -> tuple[str, ...] | None:
    try:
        key = ConversationKey.from_scope_id(scope_id)
    except DomainError:
        return None
    return tuple(key.chat_id.split("."))


def row_key(key: str) -> str:
    """The fermix key of an item key: itself when canonical, else a digest (ADR-0028)."""
    return _row_key(key) if type(key) is str else _row_key.__wrapped__(key)


@functools.lru_cache(maxsize=4096)  # a pure function of the key, asked on every get and put
def _row_key(key: str) -> str:
    if is_canonical_key(key) and not _DIGEST_KEY.fullmatch(key):
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return _DIGEST_PREFIX + digest[:40]


# How deep :func:`_plain` looks before leaving a value to the read-back (which tells the same).
_PLAIN_DEPTH = 32
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: object, depth: int) -> bool:
    """Whether ``value`` is plain JSON that comes back equal from its text: dicts with text keys,
    lists, text, numbers (finite: the encoder refuses the others), booleans and null, of exactly
    these types. ``False`` only says "not known to be": the caller reads the text back."""
    if type(value) in _SCALARS:
        return True
    if depth <= 0:
        return False
    if type(value) is dict:
        for k, v in value.items():  # a loop, not all(...): an item's put walks its value
            if type(k) is not str or (type(v) not in _SCALARS and not _plain(v, depth - 1)):
                return False
        return True
    if type(value) is list:
        return all(type(v) in _SCALARS or _plain(v, depth - 1) for v in value)
    return False


def _escaped(text: str) -> str:
    """JSON ``text`` with :data:`_REWRITTEN`'s characters written as ``\\uXXXX`` (as stored)."""
    return _REWRITTEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encode(key: str, value: object) -> str:
    """The row value of an item: ``{"key": key, "value": value}`` as JSON text, or
    :class:`ValueNotStorable` when it would not come back equal or is too long."""
    if not isinstance(value, Mapping):
        raise ValueNotStorable(f"an item value must be a dict, got {preview(value)}")
    document = {"key": key, "value": dict(value)}
    try:
        text = _json_text(document)
        # Plain JSON comes back equal: no need to read the text back to tell.
        same = _plain(document["value"], _PLAIN_DEPTH) or json.loads(text) == document
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueNotStorable(f"an item value must be plain JSON (objects with text keys, lists, text, "
                               f"numbers, booleans, null): {exc}") from None
    if not same:
        raise ValueNotStorable("an item value must be plain JSON: it would not come back equal "
                               "(tuples, non-text keys or other types)")
    if _REWRITTEN.search(text) is not None:
        text = _escaped(text)
    if len(text) > MAX_ITEM_VALUE_CHARS:
        raise ValueNotStorable(f"the item is {len(text)} characters as JSON (with its key), "
                               f"limit {MAX_ITEM_VALUE_CHARS}")
    return text


def text_as_stored(text: str) -> str:
    """A text's JSON as :func:`encode` writes it in an item's row (a filter's texts are looked for so)."""
    return _escaped(_ENCODER.encode(text))


def decode(row: Memory) -> tuple[str, dict[str, Any]] | None:
    """The item key and value a row holds, or ``None`` for a row that is no store item."""
    return decode_value(row.value)


def decode_value(text: str) -> tuple[str, dict[str, Any]] | None:
    """The item key and value of a row's value text, or ``None`` when it holds no store item."""
    try:
        document = json.loads(text)
    except ValueError:
        return None
    if type(document) is not dict or len(document) != 2:
        return None
    key, value = document.get("key"), document.get("value")
    if not isinstance(key, str) or not isinstance(value, dict):
        return None
    return key, value


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """A ``list_namespaces`` condition: ``prefix`` or ``suffix``, ``"*"`` matching any label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise FilterNotSupported(f"namespace match type must be prefix or suffix, got {preview(condition.match_type)}")
    return all(p == "*" or n == p for n, p in pairs)
