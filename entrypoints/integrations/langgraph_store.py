"""A LangGraph long-term memory store over fermix memory rows (ADR-0028).

``FermixStore`` is a ``langgraph.store.base.BaseStore`` for one agent: a LangGraph or LangMem
agent keeps its memories as fermix rows, so they share the owner isolation, the audited event
log (every put and delete goes through admission) and ``forget_owner``. One label of each
namespace names the owner (``owner_index``, default 1: ``("memories", owner_id, ...)``); the
whole namespace names a conversation scope of channel ``langgraph-store``; the item is one
``context`` row whose value is ``{"key": ..., "value": {...}}`` as JSON text
(:mod:`~fermix_memory.entrypoints.integrations.langgraph_items`). What cannot map is refused
with a typed error before anything is written. A namespace without an owner label may map to a
``default_owner``, and an operator's store may search every owner (ADR-0059). A get is one
indexed read of its row, a search without a query reads pages of rows in SQL, newest first, and
a batch's puts and deletes are one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from fermix_memory.application.commands import TrustName
from fermix_memory.application.query_ports import KeyedValue, NumberBound
from fermix_memory.application.recall import MAX_RECALL
from fermix_memory.application.write_at_once import is_brief
from fermix_memory.domain.errors import DomainError, InvalidArgument
from fermix_memory.domain.memory import MAX_ITEM_VALUE_CHARS, Memory
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation
from fermix_memory.domain.values import ConversationKey, check_identifier, check_int, preview
from fermix_memory.entrypoints.api.lane import run_sync, run_write
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.extras import require

require("langgraph", "langgraph.store.base")

from langgraph.store.base import (  # noqa: E402
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from fermix_memory.entrypoints.integrations.langgraph_filters import (  # noqa: E402
    check_filter,
    filter_numbers,
    filter_texts,
    item_matches,
)
from fermix_memory.entrypoints.integrations.langgraph_items import (  # noqa: E402
    CATEGORY,
    CHANNEL,
    FilterNotSupported,
    KeyCollision,
    NamespaceNotMapped,
    Place,
    WriteRefused,
    check_labels,
    decode,
    decode_value,
    encode,
    namespace_matches,
    namespace_of,
    owner_of,
    place_of,
    row_key,
    write_command,
)

# A search without a query reads the newest rows a page at a time: the first page is what the
# search returns when no row is left out (at least this many when the SQL cannot look for any of
# a filter's conditions), and each next one twice as large, up to the read side's largest page.
_FIRST_PAGE_WITH_FILTER = 64
_LARGEST_PAGE = 1000
# How many namespaces' places a store remembers (the oldest is forgotten first).
_PLACES_KEPT = 256
_ROOT = ("langgraph",)


class FermixStore(BaseStore):
    """A LangGraph ``BaseStore`` keeping one agent's items as fermix memory rows (ADR-0028).

    ``store = FermixStore(memory, agent_id="ada", trust="guest")``; the namespace label at
    ``owner_index`` names the owner (``("memories", "alice")``: alice). Puts and deletes go
    through admission as ``writer="tool"`` writes with ``trust``; a delete archives the row.
    ``default_owner``: the owner of a namespace too short to hold an owner label
    (``("docs",)``), and of a search prefix without one; ``all_owners=True`` (with
    ``trust="operator"``): a search prefix without an owner label reads every owner (ADR-0059).
    """

    __slots__ = ("_agent_id", "_all_owners", "_default_owner", "_memory", "_owner_index", "_places", "_trust")

    def __init__(self, memory: MemorySystem, *, agent_id: str, trust: TrustName = "guest",
                 owner_index: int = 1, default_owner: str | None = None, all_owners: bool = False) -> None:
        if not isinstance(memory, MemorySystem):
            raise InvalidArgument(f"memory must be a MemorySystem, got {preview(memory)}")
        if trust not in ("guest", "operator"):
            raise InvalidArgument(f"trust must be guest or operator, got {preview(trust)}")
        if not isinstance(all_owners, bool):
            raise InvalidArgument(f"all_owners must be true or false, got {preview(all_owners)}")
        if all_owners and trust != "operator":
            raise InvalidArgument("all_owners=True reads every owner's items: it needs trust='operator'")
        self._memory = memory
        self._agent_id = check_identifier(agent_id, "agent_id")
        self._trust: TrustName = trust
        self._owner_index = check_int(owner_index, "owner_index", minimum=0)
        self._default_owner = None if default_owner is None else check_identifier(default_owner, "default_owner")
        self._all_owners = all_owners
        self._places: dict[tuple[Any, ...], Place] = {}

    @property
    def agent_id(self) -> str:
        return self._agent_id

    # --- batch ------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` as InMemoryStore does: every read sees the store as it was before the
        batch, then the puts are applied (the last put of a namespace and key wins), all of them
        in one transaction."""
        ops = list(ops)
        puts: dict[tuple[tuple[str, ...], str], tuple[Place, str, str | None]] = {}
        for op in ops:  # check everything before reading or writing anything
            if isinstance(op, PutOp):
                place, key = self._place(op.namespace), self._key(op.key)
                if op.ttl is not None:
                    raise InvalidArgument("this store keeps no time-to-live: put with ttl=None")
                text = None if op.value is None else encode(key, op.value)
                puts[(place.namespace, key)] = (place, key, text)
            elif isinstance(op, GetOp):
                self._place(op.namespace)
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
        if puts:
            self._write(list(puts.values()))
        return results

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Literal[False] | list[str] | None = None, *, ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        """What ``BaseStore.put`` does (``batch([PutOp(...)])``), directly for a namespace this
        store has already mapped; this store keeps no time-to-live and no embedding index."""
        try:  # LangGraph keeps the root label "langgraph" for itself
            place = self._places.get(namespace) if type(namespace) is tuple and namespace[:1] != _ROOT else None
        except TypeError:  # labels that are no text (unhashable): refused by the checks
            place = None
        if place is None or value is None or ttl not in (NOT_PROVIDED, None):
            return super().put(namespace, key, value, index, ttl=ttl)  # checked by LangGraph, then by batch
        key = str(key)
        self._write([(place, key, encode(key, value))])
        return None

    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        """One item, or ``None``: what ``batch([GetOp(namespace, key)])`` returns, read directly
        (one indexed read of its row); this store keeps no time-to-live to refresh."""
        return self._get(self._place(namespace), self._key(str(key)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch`, awaited. A batch of a few puts only is a brief write: made at once on the
        awaiting thread when the store can commit it without waiting (ADR-0110; an item's row is
        shown in no prompt file, so its commit renders none), else on the lane, as every batch
        that reads (a get, a search, a delete's row) is."""
        ops = list(ops)
        if is_brief(ops) and all(type(op) is PutOp and op.value is not None for op in ops):
            return await run_write(self._memory._open_app().store.writes_at_once, self.batch, ops)
        return await run_sync(self.batch, ops)

    def _place(self, namespace: object) -> Place:
        """Where ``namespace`` lives (remembered for the namespaces used most recently)."""
        try:
            cached = self._places.get(namespace) if type(namespace) is tuple else None
        except TypeError:  # labels that are no text (unhashable): refused below
            cached = None
        if cached is None:
            cached = place_of(namespace, self._owner_index, self._default_owner)
            if type(namespace) is tuple:  # text labels only, now checked
                if len(self._places) >= _PLACES_KEPT:
                    self._places.pop(next(iter(self._places)))
                self._places[namespace] = cached
        return cached

    # --- reads ------------------------------------------------------------------------------

    def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(self._place(op.namespace), op.key)
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

    def _row(self, place: Place, key: str) -> KeyedValue | None:
        """The id, value and times of the live row holding ``key`` in ``place``: one indexed read."""
        return self._memory.memory_value_by_key(agent_id=self._agent_id, owner_id=place.owner_id,
                                                conversation=place.conversation, key=row_key(key))

    def _get(self, place: Place, key: str) -> Item | None:
        row = self._row(place, key)
        found = None if row is None else decode_value(row.value)
        if row is None or found is None:
            return None
        if found[0] != key:
            raise KeyCollision(f"item keys {key!r} and {found[0]!r} share the row key {row_key(key)!r}")
        return Item(namespace=place.namespace, key=key, value=found[1], created_at=row.created_at,
                    updated_at=row.updated_at)

    def _search_owner(self, op: SearchOp) -> tuple[tuple[str, ...], str | None]:
        """The prefix and the owner whose items a search reads (``None``: every owner)."""
        prefix = check_labels(op.namespace_prefix, "namespace prefix")
        if len(prefix) <= self._owner_index and self._all_owners:
            owner = None
        else:
            owner = owner_of(prefix, self._owner_index, "namespace prefix", self._default_owner)
        if prefix:
            try:
                ConversationKey(CHANNEL, ".".join(prefix))
            except DomainError as exc:
                raise NamespaceNotMapped(f"namespace prefix {prefix!r} cannot be stored ({exc})") from None
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
        skip = op.offset
        wanted = skip + op.limit
        if op.limit == 0:
            return []
        scored: Iterable[tuple[Memory, float | None]]
        if op.query:
            scored = self._ranked(op.query, owner)
        elif not op.filter:  # every row the SQL reads is an item: the offset is the SQL's
            scored = ((row, None) for row in self._newest(prefix, owner, op.limit, start=skip))
            skip, wanted = 0, op.limit
        else:
            texts, numbers = filter_texts(op.filter), filter_numbers(op.filter)
            # Rows the SQL looked for the filter's texts or numbers in nearly all pass: a first page
            # of what is wanted stops the SQL's scan there (ADR-0109).
            first = wanted if texts or numbers else max(wanted, _FIRST_PAGE_WITH_FILTER)
            scored = ((row, None) for row in self._newest(prefix, owner, first, texts, numbers))
        found: list[SearchItem] = []
        for row, score in scored:
            namespace = namespace_of(row)
            if namespace is None or namespace[: len(prefix)] != prefix or (item := decode(row)) is None:
                continue
            if not item_matches(item[1], op.filter):
                continue
            found.append(SearchItem(namespace=namespace, key=item[0], value=item[1], created_at=row.created_at,
                                    updated_at=row.updated_at, score=score))
            if len(found) == wanted:
                break
        return found[skip:]

    def _newest(self, prefix: tuple[str, ...], owner: str | None, page: int,
                containing: tuple[str, ...] = (), numbers: tuple[NumberBound, ...] = (), *,
                start: int = 0) -> Iterator[Memory]:
        """The live rows of the owner (every owner: ``None``) under ``prefix``, most recently
        updated first (id breaks ties), read in pages of SQL for as long as the caller asks;
        ``containing``, ``numbers``: only rows holding these texts and numbers within these bounds
        (a filter's, ``filter_texts``, ``filter_numbers``); ``start``:
        the rows to leave out first."""
        offset, page = start, min(max(page, 1), _LARGEST_PAGE)
        while True:
            rows = self._memory.conversation_memories(agent_id=self._agent_id, owner_id=owner, channel=CHANNEL,
                                                      chat_prefix=".".join(prefix), limit=page, offset=offset,
                                                      unshown_category=CATEGORY, containing=containing,
                                                      numbers=numbers)
            yield from rows
            if len(rows) < page:
                return
            offset, page = offset + len(rows), min(page * 2, _LARGEST_PAGE)

    def _ranked(self, query: str, owner: str | None) -> list[tuple[Memory, float]]:
        """Full-text recall over every conversation of the owner (of every owner holding items:
        ``None``), best first (FTS5 rank: lower is better, so the score is its negation)."""
        owners = [owner] if owner is not None else sorted({row.owner_id for row in self._newest((), None, 1000)})
        hits = [hit for o in owners for hit in self._memory.recall(
            query, agent_id=self._agent_id, owner_id=o, scope="all", limit=MAX_RECALL).memories]
        if len(owners) > 1:
            hits.sort(key=lambda hit: hit.rank)
        return [(hit.memory, -hit.rank) for hit in hits[:MAX_RECALL]]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit = check_int(op.limit, "limit", minimum=0)
        offset = check_int(op.offset, "offset", minimum=0)
        depth = None if op.max_depth is None else check_int(op.max_depth, "max_depth", minimum=0)
        # The namespaces holding items, read without the items (a value may be a large document).
        namespaces = {tuple(chat.split(".")) for chat in self._memory.conversation_chat_ids(
            agent_id=self._agent_id, owner_id=None, channel=CHANNEL, unshown_category=CATEGORY)}
        kept = {ns if depth is None else ns[:depth] for ns in namespaces
                if all(namespace_matches(ns, c) for c in op.match_conditions or ())}
        return sorted(kept)[offset: offset + limit]

    # --- writes -----------------------------------------------------------------------------

    def _write(self, puts: Sequence[tuple[Place, str, str | None]]) -> None:
        """The batch's puts and deletes, each namespace's as one command through admission, all
        of them in one transaction (a crash keeps all or none)."""
        groups: list[tuple[Place, list[Operation]]]
        if len(puts) == 1 and (put := puts[0])[2] is not None:  # one put (``put``): one command
            groups = [(put[0], [AddOperation(category=CATEGORY, key=row_key(put[1]), value=put[2])])]
        else:
            groups = list(self._operations(puts).items())
        if not groups:
            return
        # Commands built from checked values: not parsed again as a host's arguments would be.
        outcomes = self._memory._open_app().write_memories([
            write_command(place, self._agent_id, self._trust, operations) for place, operations in groups],
            MAX_ITEM_VALUE_CHARS)  # an item is a document, not a fact a prompt file shows
        refused = [o for group in outcomes for o in group if o.status == "refused"]
        if refused:
            raise WriteRefused("; ".join(f"{o.op} refused ({o.reason}): {o.detail}" for o in refused))

    def _operations(self, puts: Sequence[tuple[Place, str, str | None]]) -> dict[Place, list[Operation]]:
        """Each place's operations: an add per put, an archive per delete of a row that is there."""
        by_place: dict[Place, list[Operation]] = {}
        for place, key, text in puts:
            if text is not None:
                op: Operation = AddOperation(category=CATEGORY, key=row_key(key), value=text)
            elif (row := self._row(place, key)) is not None:
                op = ArchiveOperation(id=row.id, reason="deleted through the LangGraph store")
            else:
                continue  # deleting what is not there: nothing to record
            by_place.setdefault(place, []).append(op)
        return by_place

    def __repr__(self) -> str:
        return (f"FermixStore(agent_id={self._agent_id!r}, owner_index={self._owner_index}, "
                f"default_owner={self._default_owner!r}, all_owners={self._all_owners})")
