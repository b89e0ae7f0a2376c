"""A LangGraph long-term memory store over fermix memory rows (ADR-0028).

``FermixStore`` is a ``langgraph.store.base.BaseStore`` for one agent: a LangGraph or LangMem
agent keeps its memories as fermix rows, so they share the owner isolation, the audited event
log (every put and delete goes through admission) and ``forget_owner``. One label of each
namespace names the owner (``owner_index``, default 1: ``("memories", owner_id, ...)``); the
whole namespace names a conversation scope of channel ``langgraph-store``; the item is one
``context`` row whose value is ``{"key": ..., "value": {...}}`` as JSON text
(:mod:`~fermix_memory.entrypoints.integrations.langgraph_items`). What cannot map is refused
with a typed error before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from fermix_memory.application.commands import TrustName
from fermix_memory.application.recall import MAX_RECALL
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import ScopeType, check_identifier, check_int, preview
from fermix_memory.entrypoints.api.lane import run_sync
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.extras import require

require("langgraph", "langgraph.store.base")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from fermix_memory.entrypoints.integrations.langgraph_items import (  # noqa: E402
    CATEGORY,
    SOURCE_TYPE,
    FilterNotSupported,
    KeyCollision,
    Place,
    WriteRefused,
    check_filter,
    check_labels,
    decode,
    encode,
    matches,
    namespace_matches,
    namespace_of,
    owner_of,
    place_of,
    row_key,
)


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
