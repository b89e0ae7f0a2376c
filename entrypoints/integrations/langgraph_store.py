"""A LangGraph long-term memory store over fermix memory rows (ADR-0028).

``FermixStore`` is a ``langgraph.store.base.BaseStore`` for one agent: a LangGraph or LangMem
agent keeps its memories as fermix rows, so they share the owner isolation, the audited event
log (every put and delete goes through admission) and ``forget_owner``. One label of each
namespace names the owner (``owner_index``, default 1: ``("memories", owner_id, ...)``); the
whole namespace names a conversation scope of channel ``langgraph-store``; the item is one
``context`` row whose value is ``{"key": ..., "value": {...}}`` as JSON text. What cannot map
is refused with a typed error before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from fermix_memory.application.commands import TrustName
from fermix_memory.application.recall import MAX_RECALL
from fermix_memory.domain.errors import (
    DomainError,
    FermixError,
    InvalidArgument,
)
from fermix_memory.domain.memory import MAX_VALUE_CHARS, Memory
from fermix_memory.domain.values import (
    ConversationKey,
    ScopeType,
    check_identifier,
    check_int,
    normalise_key,
    preview,
)
from fermix_memory.entrypoints.api.lane import run_sync
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.extras import require

require("langgraph", "langgraph.store.base")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

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
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


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


def check_labels(namespace: object, what: str = "namespace") -> tuple[str, ...]:
    """The namespace as a tuple of labels LangGraph accepts (non-empty text without ``.``)."""
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise NamespaceNotMapped(f"{what} must be a tuple of text labels, got {preview(namespace)}")
    labels = tuple(namespace)
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise NamespaceNotMapped(f"{what} labels must be non-empty text without '.' or NUL, got {preview(label)}")
    return labels


def owner_of(labels: tuple[str, ...], owner_index: int, what: str) -> str:
    if len(labels) <= owner_index:
        raise NamespaceNotMapped(
            f"{what} {labels!r} has no owner label: this store reads the owner from label {owner_index}")
    try:
        return check_identifier(labels[owner_index], "owner_id")
    except DomainError as exc:
        raise NamespaceNotMapped(f"{what} {labels!r}: the owner label is not usable ({exc})") from None


def place_of(namespace: object, owner_index: int) -> Place:
    """Map an item namespace to its owner and conversation scope, or raise :class:`NamespaceNotMapped`."""
    labels = check_labels(namespace)
    owner_id = owner_of(labels, owner_index, "namespace")
    try:
        conversation = ConversationKey(CHANNEL, ".".join(labels))
    except DomainError as exc:
        raise NamespaceNotMapped(f"namespace {labels!r} cannot be stored ({exc})") from None
    return Place(labels, owner_id, conversation)


def namespace_of(row: Memory) -> tuple[str, ...] | None:
    """The item namespace a row holds, or ``None`` for a row that is no store item."""
    if row.scope_type is not ScopeType.CONVERSATION or not row.scope_id.startswith(_SCOPE_PREFIX):
        return None
    try:
        key = ConversationKey.from_scope_id(row.scope_id)
    except DomainError:
        return None
    return tuple(key.chat_id.split("."))


def row_key(key: str) -> str:
    """The fermix key of an item key: itself when canonical, else a digest (ADR-0028)."""
    try:
        if normalise_key(key) == key and not _DIGEST_KEY.fullmatch(key):
            return key
    except DomainError:
        pass
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return _DIGEST_PREFIX + digest[:40]


def encode(key: str, value: object) -> str:
    """The row value of an item: ``{"key": key, "value": value}`` as JSON text, or
    :class:`ValueNotStorable` when it would not come back equal or is too long."""
    if not isinstance(value, Mapping):
        raise ValueNotStorable(f"an item value must be a dict, got {preview(value)}")
    document = {"key": key, "value": dict(value)}
    try:
        text = json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        same = json.loads(text) == document
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueNotStorable(f"an item value must be plain JSON (objects with text keys, lists, text, "
                               f"numbers, booleans, null): {exc}") from None
    if not same:
        raise ValueNotStorable("an item value must be plain JSON: it would not come back equal "
                               "(tuples, non-text keys or other types)")
    text = _REWRITTEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if len(text) > MAX_VALUE_CHARS:
        raise ValueNotStorable(f"the item is {len(text)} characters as JSON (with its key), "
                               f"limit {MAX_VALUE_CHARS}")
    return text


def decode(row: Memory) -> tuple[str, dict[str, Any]] | None:
    """The item key and value a row holds, or ``None`` for a row that is no store item."""
    try:
        document = json.loads(row.value)
    except ValueError:
        return None
    if not isinstance(document, dict) or set(document) != {"key", "value"}:
        return None
    key, value = document["key"], document["value"]
    if not isinstance(key, str) or not isinstance(value, dict):
        return None
    return key, value


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def _operator(value: object, operator: str, operand: object) -> bool:
    if operator == "$eq":
        return value == operand
    if operator == "$ne":
        return value != operand
    left, right = _number(value), _number(operand)
    if left is None or right is None:
        return False  # a comparison with something that is no number matches nothing
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right


def matches(value: object, condition: object) -> bool:
    """InMemoryStore's filter semantics: nested dicts match field by field, lists element by
    element, ``{"$op": operand}`` applies the operators, anything else is ``==``."""
    if isinstance(condition, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in condition):
            return all(_operator(value, op, operand) for op, operand in condition.items())
        if not isinstance(value, Mapping):
            return False
        return all(matches(value.get(k), v) for k, v in condition.items())
    if isinstance(condition, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(condition)
                and all(matches(v, c) for v, c in zip(value, condition, strict=True)))
    return value == condition


def check_filter(condition: object) -> None:
    """Refuse an operator the filter semantics do not define (before anything is read)."""
    if isinstance(condition, Mapping):
        for k, v in condition.items():
            if isinstance(k, str) and k.startswith("$") and k not in _OPERATORS:
                known = ", ".join(sorted(_OPERATORS))
                raise FilterNotSupported(f"filter operator {k!r} is not supported (use {known})")
            check_filter(v)
    elif isinstance(condition, list | tuple):
        for c in condition:
            check_filter(c)


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


def _item(namespace: tuple[str, ...], key: str, value: dict[str, Any], row: Memory) -> Item:
    return Item(namespace=namespace, key=key, value=value, created_at=row.created_at, updated_at=row.updated_at)


def _recency(row: Memory) -> tuple[datetime, int]:
    return row.updated_at, row.id


class FermixStore(BaseStore):
    """A LangGraph ``BaseStore`` keeping one agent's items as fermix memory rows (ADR-0028).

    ``store = FermixStore(memory, agent_id="ada", trust="guest")``; the namespace label at
    ``owner_index`` names the owner (``("memories", "alice")``: alice). Puts and deletes go
    through admission as ``writer="tool"`` writes with ``trust``; a delete archives the row.
    """

    __slots__ = ("_agent_id", "_memory", "_owner_index", "_trust")

    def __init__(self, memory: MemorySystem, *, agent_id: str, trust: TrustName = "guest",
                 owner_index: int = 1) -> None:
        if not isinstance(memory, MemorySystem):
            raise InvalidArgument(f"memory must be a MemorySystem, got {preview(memory)}")
        if trust not in ("guest", "operator"):
            raise InvalidArgument(f"trust must be guest or operator, got {preview(trust)}")
        self._memory = memory
        self._agent_id = check_identifier(agent_id, "agent_id")
        self._trust: TrustName = trust
        self._owner_index = check_int(owner_index, "owner_index", minimum=0)

    @property
    def agent_id(self) -> str:
        return self._agent_id

    # --- batch ------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` as InMemoryStore does: every read sees the store as it was before the
        batch, then the puts are applied (the last put of a namespace and key wins)."""
        ops = list(ops)
        puts: dict[tuple[tuple[str, ...], str], tuple[Place, str, str | None]] = {}
        for op in ops:  # check everything before reading or writing anything
            if isinstance(op, PutOp):
                place, key = place_of(op.namespace, self._owner_index), self._key(op.key)
                if op.ttl is not None:
                    raise InvalidArgument("this store keeps no time-to-live: put with ttl=None")
                text = None if op.value is None else encode(key, op.value)
                puts[(place.namespace, key)] = (place, key, text)
            elif isinstance(op, GetOp):
                place_of(op.namespace, self._owner_index)
                self._key(op.key)
            elif isinstance(op, SearchOp):
                self._search_owner(op)
                check_filter(op.filter)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    check_labels(condition.path, "match path")
            else:
                raise InvalidArgument(f"unknown store operation {type(op).__name__}")
        results = [self._read(op) for op in ops]
        self._write(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await run_sync(self.batch, ops)

    # --- reads ------------------------------------------------------------------------------

    def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(place_of(op.namespace, self._owner_index), op.key)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        return None

    @staticmethod
    def _key(key: object) -> str:
        if not isinstance(key, str):
            raise InvalidArgument(f"an item key must be text, got {preview(key)}")
        return key

    def _row(self, place: Place, key: str) -> Memory | None:
        """The live row holding ``key`` in ``place``."""
        hits = self._memory.recall(agent_id=self._agent_id, owner_id=place.owner_id,
                                   conversation=place.conversation, key=row_key(key)).memories
        scope_id = place.conversation.scope_id
        rows = [hit.memory for hit in hits
                if hit.memory.scope_type is ScopeType.CONVERSATION and hit.memory.scope_id == scope_id]
        return rows[0] if rows else None

    def _get(self, place: Place, key: str) -> Item | None:
        row = self._row(place, key)
        found = None if row is None else decode(row)
        if row is None or found is None:
            return None
        if found[0] != key:
            raise KeyCollision(f"item keys {key!r} and {found[0]!r} share the row key {row.key!r}")
        return _item(place.namespace, key, found[1], row)

    def _search_owner(self, op: SearchOp) -> tuple[tuple[str, ...], str]:
        prefix = check_labels(op.namespace_prefix, "namespace prefix")
        owner = owner_of(prefix, self._owner_index, "namespace prefix")
        check_int(op.limit, "limit", minimum=0)
        check_int(op.offset, "offset", minimum=0)
        if op.query and op.offset + op.limit > MAX_RECALL:
            raise FilterNotSupported(f"a search with a query reaches the {MAX_RECALL} best matches: "
                                     f"offset + limit must be at most {MAX_RECALL}")
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise FilterNotSupported(f"filter must be a dict, got {preview(op.filter)}")
        return prefix, owner

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix, owner = self._search_owner(op)
        scored: list[tuple[Memory, float | None]]
        if op.query:
            # Full-text recall over every conversation of the owner, best first (FTS5 rank:
            # lower is better, so the score is its negation).
            hits = self._memory.recall(op.query, agent_id=self._agent_id, owner_id=owner, scope="all",
                                       limit=MAX_RECALL).memories
            scored = [(hit.memory, -hit.rank) for hit in hits]
        else:
            rows = self._memory.memories(agent_id=self._agent_id, owner_id=owner, include_archived=False)
            scored = [(row, None) for row in sorted(rows, key=_recency, reverse=True)]
        found: list[SearchItem] = []
        for row, score in scored:
            namespace = namespace_of(row)
            if namespace is None or namespace[: len(prefix)] != prefix or (item := decode(row)) is None:
                continue
            if not all(matches(item[1].get(k), v) for k, v in (op.filter or {}).items()):
                continue
            found.append(SearchItem(namespace=namespace, key=item[0], value=item[1], created_at=row.created_at,
                                    updated_at=row.updated_at, score=score))
        return found[op.offset: op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit = check_int(op.limit, "limit", minimum=0)
        offset = check_int(op.offset, "offset", minimum=0)
        depth = None if op.max_depth is None else check_int(op.max_depth, "max_depth", minimum=0)
        rows = self._memory.memories(agent_id=self._agent_id, include_archived=False)
        namespaces = {ns for row in rows if (ns := namespace_of(row)) is not None and decode(row) is not None}
        kept = {ns if depth is None else ns[:depth] for ns in namespaces
                if all(namespace_matches(ns, c) for c in op.match_conditions or ())}
        return sorted(kept)[offset: offset + limit]

    # --- writes -----------------------------------------------------------------------------

    def _write(self, puts: Sequence[tuple[Place, str, str | None]]) -> None:
        """Each namespace's puts and deletes in one audited write through admission."""
        by_place: dict[Place, list[dict[str, Any]]] = {}
        for place, key, text in puts:
            if text is not None:
                op: dict[str, Any] = {"op": "add", "category": CATEGORY, "key": row_key(key), "value": text}
            elif (row := self._row(place, key)) is not None:
                op = {"op": "archive", "id": row.id, "reason": "deleted through the LangGraph store"}
            else:
                continue  # deleting what is not there: nothing to record
            by_place.setdefault(place, []).append(op)
        for place, operations in by_place.items():
            outcomes = self._memory.write_memory(
                operations, agent_id=self._agent_id, owner_id=place.owner_id, writer="tool", trust=self._trust,
                conversation=place.conversation, source_type=SOURCE_TYPE)
            refused = [o for o in outcomes if o.status == "refused"]
            if refused:
                raise WriteRefused("; ".join(f"{o.op} refused ({o.reason}): {o.detail}" for o in refused))

    def __repr__(self) -> str:
        return f"FermixStore(agent_id={self._agent_id!r}, owner_index={self._owner_index})"
