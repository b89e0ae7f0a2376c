"""The read side's ports: the projections as the use cases read them, and the vectors of
messages and rows (ADR-0043)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import attrs

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter
from fermix_memory.domain.values import ConversationKey

if TYPE_CHECKING:
    from fermix_memory.application.stored_messages import StoredRow


class WindowAtPosition(NamedTuple):
    """A conversation's window as one statement read it, with the log's position it was read at."""

    position: int  # the log's last position, as ``last_position`` reads it
    checkpoint_message_id: int | None  # the checkpoint of the last compaction, if any
    # The window's messages after its start, in window order (None: not read): as the statement
    # returned them, ``StoredRow``'s fields in its order, named by the reader that reads one by name.
    rows: list[StoredRow] | list[tuple[Any, ...]] | None


class KeyedValue(NamedTuple):
    """What a keyed read of one live row returns: its id, value and times, not the whole row."""

    id: int
    value: str
    created_at: datetime
    updated_at: datetime


@attrs.frozen
class NumberBound:
    """A pre-filter on a row's value (a JSON document): at one of ``paths`` (each the object keys
    leading into the document) a number from ``low`` to ``high`` (``None``: unbounded; ``true``
    and ``false`` count as 1 and 0), or, where ``text_passes``, any text (a number written as text,
    left to the caller). The rows it leaves out hold no such value; a store may ignore it (it
    decides nothing alone)."""

    paths: tuple[tuple[str, ...], ...]
    low: float | None = None
    high: float | None = None
    text_passes: bool = False


@attrs.frozen(kw_only=True)
class MemoryHit:
    memory: Memory
    rank: float
    snippet: str
    # Found by meaning: the cosine similarity of its vector to the query's (-1..1, higher is closer).
    similarity: float | None = None


@attrs.frozen(kw_only=True)
class MessageHit:
    message: Message
    rank: float
    snippet: str
    # Set on a turn returned as the reply to a matching question: the id of the turn that matched.
    context_of: int | None = None
    # Found by meaning: the cosine similarity of its vector to the query's (-1..1, higher is closer).
    similarity: float | None = None


@attrs.frozen(kw_only=True)
class OwnerSummary:
    """An agent and an owner it holds memory rows of: how many are live, how many archived."""

    agent_id: str
    owner_id: str
    live: int
    archived: int


@attrs.frozen(kw_only=True)
class ResourceRevision:
    """One revision of a versioned resource (``user_md``, ``memory_md``) of an agent and owner."""

    agent_id: str
    owner_id: str
    name: str
    revision: int
    content: str
    content_sha256: str
    reason: str
    created_at: datetime


class MemoryQueries(Protocol):
    """Read side of the projections."""

    def memory(self, memory_id: int) -> Memory | None: ...

    def memories(self, where: MemoryFilter, *, include_archived: bool = False) -> list[Memory]: ...

    def memory_by_key(self, where: MemoryFilter, key: str) -> list[Memory]: ...

    def value_by_key(self, agent_id: str, owner_id: str, scope_id: str, key: str) -> KeyedValue | None:
        """The live row holding ``key`` in the conversation scope ``scope_id``: one read by the
        unique index of the key, only its id, value and times."""
        ...

    def memories_under(self, agent_id: str, owner_id: str | None, scope_type: str, starts: Sequence[str], *,
                       limit: int, offset: int = 0, unshown_category: str | None = None,
                       containing: Sequence[str] = (), numbers: Sequence[NumberBound] = ()) -> list[Memory]:
        """A page of the live rows of ``agent_id`` (and ``owner_id``, when given) of ``scope_type``
        whose scope id begins with one of ``starts``, most recently updated first (id breaks ties);
        ``unshown_category``: only that category's rows that no prompt file shows; ``containing``:
        only rows whose value holds each text (at least those: a pre-filter, case aside);
        ``numbers``: only rows within each bound (at least those)."""
        ...

    def scopes_under(self, agent_id: str, owner_id: str | None, scope_type: str, starts: Sequence[str], *,
                     unshown_category: str | None = None) -> list[str]:
        """The scope ids of :meth:`memories_under`'s rows, each once, sorted (no value read)."""
        ...

    def search_memories(self, query: str, where: MemoryFilter, limit: int) -> list[MemoryHit]: ...

    def messages(
        self, agent_id: str, conversation: ConversationKey, *, after_id: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Window messages of a conversation after ``after_id``, oldest first (last ``limit``)."""
        ...

    def window_tail(self, agent_id: str, conversation: ConversationKey,
                    limit: int) -> tuple[int | None, list[StoredRow]]:
        """The checkpoint of the conversation's state and the newest ``limit`` messages after its
        window's start, oldest first, in one statement (``application.window_tail``)."""
        ...

    def search_history(self, query: str, where: HistoryFilter, limit: int) -> list[MessageHit]: ...

    def history_in_days(self, where: HistoryFilter, first: date, last: date, limit: int) -> list[MessageHit]:
        """The messages ``where`` selects that speak of a day from ``first`` to ``last`` (a ``d:``
        mark, ``domain.message_marks``), then those said on such a day (``created_at``'s UTC day),
        each group newest first, each message once; rank 0.0, the snippet the head of the text."""
        ...

    def history_naming(self, where: HistoryFilter, entities: Sequence[str], limit: int) -> list[MessageHit]:
        """The messages ``where`` selects marked with any of the names ``entities`` (``e:`` marks),
        those naming the most of them first (rank: minus how many), then newest first."""
        ...

    def marks_of(self, message_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """The marks of each of ``message_ids`` that has some, sorted (one without marks is left out)."""
        ...

    def newest_message_at(self, where: HistoryFilter) -> datetime | None:
        """When the newest message ``where`` selects was said (``None``: it selects none)."""
        ...


@attrs.frozen
class QueuedText:
    """A message (``kind="message"``) or memory row (``"memory"``) waiting for its vector, with
    the text its vector is made of."""

    kind: str
    id: int
    text: str


class VectorIndex(Protocol):
    """Vectors of messages and memory rows, a projection filled in the background (ADR-0043)."""

    def queue_new(self) -> int:
        """Queue the texts written since the last call that the store did not queue as they were
        written (SQLite's messages: their append stays free of vector work); how many."""
        ...

    def queued(self, limit: int) -> list[QueuedText]:
        """Up to ``limit`` texts that wait for a vector."""
        ...

    def store_vectors(self, label: str, items: Sequence[QueuedText], vectors: Sequence[bytes]) -> int:
        """Keep each item's vector (labelled) and take it off the queue, in one short write; an
        item whose text changed or went since it was read is skipped. How many were kept."""
        ...

    def queue_other_labels(self, label: str) -> int:
        """Queue again every text whose vector has another label (a changed embedder)."""
        ...

    def waiting(self) -> int:
        """How many texts wait for a vector."""
        ...

    def search_memories_by_vector(self, vector: bytes, label: str, where: MemoryFilter,
                                  limit: int) -> list[MemoryHit]:
        """The live rows ``where`` selects whose ``label`` vectors are closest to ``vector``."""
        ...

    def search_history_by_vector(self, vector: bytes, label: str, where: HistoryFilter,
                                 limit: int) -> list[MessageHit]:
        """The messages ``where`` selects (as ``search_history`` sees them) closest to ``vector``."""
        ...

    def search_by_vector_soon(self, label: str, memories: MemoryFilter | None, history: HistoryFilter | None,
                              limit: int) -> Callable[[bytes], tuple[list[MemoryHit], list[MessageHit]]]:
        """A call that gives, for a vector, what :meth:`search_memories_by_vector` (rows ``memories``
        selects; none for ``None``) and :meth:`search_history_by_vector` (messages ``history``
        selects) give: the scopes' vectors are read here, so a query's vector computed meanwhile
        only ranks them and reads the best rows (ADR-0086)."""
        ...
