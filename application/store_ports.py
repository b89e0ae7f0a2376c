"""The store's ports: the event log and its write transactions, erasure, and the upkeep of its
search index, in the use cases' own words."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs

from fermix_memory.domain.conversation_states import ConversationWindow, ReviewGateState
from fermix_memory.domain.log_chain import LoggedEvent
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.row_lookup import RowLookup
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget

if TYPE_CHECKING:  # the log's events are annotations here: a reader of the projections needs none
    from fermix_memory.domain.event_base import DomainEvent

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class RecordedEvent:
    """An event as stored in the log: its global position and stream version."""

    position: int
    stream: str
    version: int
    event: DomainEvent


# A conversation's window is the domain's (evolve in ``domain.conversation_window``).
ConversationState = ConversationWindow


# The review gate's state is the domain's (decide/evolve in ``domain.review_gate``).
ReviewState = ReviewGateState


class LogHead(Protocol):
    """What anchors the log: its last position (0: an empty log) and its last event's chain hash,
    or, for a log of several chains, the checkpoint over their heads (ADR-0031)."""

    @property
    def position(self) -> int: ...

    @property
    def hash(self) -> str: ...


@attrs.frozen(kw_only=True)
class StreamEvents:
    """One stream as a transaction sees it: its version (how many events were ever appended to
    it, redacted ones included) and its readable events in version order."""

    version: int
    events: tuple[RecordedEvent, ...]


# An append of at least this many events at once is a bulk append (an import's part): a store may
# size itself for it (SQLite widens its writer's page cache), and the search index upkeep merges
# the whole index at the next pause after it (ADR-0045, ADR-0020).
BULK_EVENTS = 100

# A pause of a host's writes: this long without a commit. Background work that would slow the
# appends if it ran among them waits for one (the search index upkeep's merges, ADR-0020; the
# SQLite log's checkpoints, ADR-0046).
PAUSE_S = 0.03


class WriteTransaction(RowLookup, Protocol):
    """What a use case may do inside one atomic write (see :meth:`EventStore.write`): append
    events to streams, read the log, and load a few typed states (all as of this transaction,
    its own appends included)."""

    def append(self, stream: str, events: Sequence[DomainEvent], *,
               expected_version: int | None = None) -> list[int]:
        """Record events (and their projections) at the end of ``stream``; returns their log
        positions. ``expected_version``: the stream's version the caller decided on (0: a new
        stream); another version raises :class:`ConcurrencyConflict` and nothing is appended."""
        ...

    def append_each(self, appends: Sequence[tuple[str, DomainEvent]]) -> list[int]:
        """Record one event at the end of each stream named, in order: exactly what
        :meth:`append` of each ``(stream, event)`` one after the other records (positions,
        versions, chain and projections), in fewer statements; returns their log positions."""
        ...

    def read_stream(self, stream: str) -> StreamEvents:
        """``stream``'s version and readable events, for decisions that replay an aggregate."""
        ...

    def stream_version(self, stream: str) -> int:
        """How many events were ever appended to ``stream``, redacted ones included (0: none)."""
        ...

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterable[RecordedEvent]:
        """Readable events after position ``after`` in log order (only ``stream``'s when given)."""
        ...

    def first_read(self, memory_id: int) -> Memory | None:
        """Row ``memory_id`` as this transaction first read it (``by_id``, ``by_key``), before any
        change the transaction made to it; ``None`` when it read none."""
        ...

    def newest_window_message(self, agent_id: str, conversation: ConversationKey) -> Message | None:
        """The newest message of the conversation's window, as ``conversation_window.newest_in_window``
        folds it from the stream (after the window's start, by ``created_at`` then id, never the
        compaction's checkpoint), as of this transaction; no other write of the conversation's
        chain runs meanwhile."""
        ...

    def last_message_id(self, agent_id: str, conversation: ConversationKey) -> int:
        """The newest message of the agent's conversation (0: none)."""
        ...

    def last_user_message_id(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> int:
        """The newest user-sent message of this owner in the conversation (0: none)."""
        ...

    def memories_of(self, agent_id: str, owner_id: str) -> list[Memory]:
        """Every live (not archived) row of one agent and owner, by id."""
        ...

    def shown_rows(self, agent_id: str, owner_id: str,
                   sections: Sequence[tuple[PromoteTarget, Category, int]]) -> list[Memory]:
        """The live rows of one agent and owner that a prompt file may show, as a set: of each
        ``(target, category, cap)`` section, the ``cap`` most recently updated (``updated_at``,
        then ``id``) that ``rendering.renders`` keeps (``rendering.shown_rows`` of every live row).
        Read by one bounded seek per section: its cost does not grow with the owner's rows."""
        ...

    def agent_rules(self, agent_id: str) -> list[Memory]:
        """The agent's standing rules (``scopes.is_agent_rule``) of every owner, by id."""
        ...

    def agent_owners(self, agent_id: str) -> list[str]:
        """Every owner with messages, memory rows or prompt files of the agent, sorted."""
        ...

    def current_resource(self, agent_id: str, owner_id: str, name: str) -> tuple[int, str] | None:
        """``(revision, content)`` of a resource's current revision (``None``: never written)."""
        ...

    def review_state(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> ReviewState: ...


@attrs.frozen
class ScrubReport:
    """What :meth:`Erasure.scrub` achieved. ``wal_truncated``: no erased byte is left in the store's
    write-ahead log. ``finished``: nothing is left for another run to do (the store no longer
    notes the erasure as pending); it differs from ``wal_truncated`` where the rest is beyond
    what this connection may do (a PostgreSQL role without ``pg_checkpoint``). ``remains``: what
    still holds erased bytes and what clears it, each sentence naming ``store``. ``rewrite_pending``:
    another writer kept the file through the whole wait, so nothing was rewritten yet (ADR-0095)."""

    wal_truncated: bool
    bytes_before: int
    bytes_after: int
    store: str = "memory.db"
    finished: bool = attrs.field(default=attrs.Factory(lambda report: report.wal_truncated, takes_self=True))
    remains: tuple[str, ...] = ()
    rewrite_pending: bool = False


class EventStore(Protocol):
    """The append-only, hash-chained event log and the projections written with it."""

    def write(self, work: Callable[[WriteTransaction], T]) -> T:
        """Run ``work`` in one write transaction; commit, or apply nothing and raise.

        ``work`` may be run again after a busy database; it must only read and append
        through the transaction it is given.
        """
        ...

    @property
    def writes_at_once(self) -> bool:
        """Whether a write asked to commit at once (``application.write_at_once``) may do so here:
        then it commits without waiting or raises ``WriterBusy``, nothing done. Where not, such a
        write must not be asked for: it would wait as usual."""
        ...

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]:
        """Committed readable events after position ``after`` in log order (one stream's when given)."""
        ...

    def last_position(self) -> int:
        """The position of the last committed event (0: an empty log)."""
        ...

    def last_positions(self, stream_prefix: str) -> dict[str, int]:
        """The last log position of every stream whose name starts with ``stream_prefix``."""
        ...

    def head(self) -> LogHead:
        """The log's last ``(position, hash)``: an anchor kept elsewhere (ADR-0011)."""
        ...

    def read_log(self, after: int = 0) -> Iterator[LoggedEvent]:
        """Every committed event after position ``after`` as stored, in log order: redacted ones
        included (payload ``None``), with digests and chain hashes (what an export writes)."""
        ...

    def adopt_chains(self, chains: int) -> None:
        """Give the empty log ``chains`` chains, those of a log it is about to receive; a log
        holding events keeps its own (:class:`IntegrityError`, nothing changed)."""
        ...

    def settle(self, timeout: float | None = None) -> bool:
        """Finish the store's own background work now that the host pauses (SQLite: checkpoint
        its log, ADR-0046); ``False`` when ``timeout`` seconds passed first."""
        ...

    def append_logged(self, events: Sequence[LoggedEvent], *, copy_of: str | None = None,
                      copied: bool = False) -> LogHead:
        """Append events recorded by another log, as they are (positions, versions, times,
        digests and chain hashes kept), in one transaction, writing their projections as live
        appends do; returns the new head. The first must follow this log's head and each must
        link to the one before (its hash recomputes), else :class:`ConcurrencyConflict` (the
        log moved on) or :class:`IntegrityError`, and nothing is appended. Commit listeners
        and after-commit reactions are not called: this is a copy, not a decision.
        ``copy_of``: in the same transaction, before the events, mark this log as an unfinished
        copy of that home; ``copied``: after them, remove the mark (ADR-0051)."""
        ...

    def unfinished_copy(self) -> str | None:
        """The home a copy into this log copies while the copy is not finished (its mark), else ``None``."""
        ...


class SearchIndex(Protocol):
    """Upkeep of the store's history search index, done off the turn's path (ADR-0020)."""

    def merge_step(self, *, whole: bool | None = None) -> bool:
        """Merge a bounded part of the index's segments in a short write of its own; ``False``
        when there was nothing left to merge. Once no level is left to merge, the whole index is
        merged into one segment when its size and growth call for it (``whole=None``), always
        (``True``: after a bulk append), or never (``False``: while appends go on)."""
        ...

    def mark_messages(self, most: int | None = None) -> int:
        """Write the marks of messages whose appends left them to this upkeep (ADR-0085), in
        short writes of their own, ``most`` messages at most (``None``: every one waiting); the
        messages marked (0 on a store opened read-only). Where new rows wait for their full-text
        entries (SQLite, ADR-0091), those are written first, all of them."""
        ...


class ErasureTransaction(Protocol):
    """What erasing may do inside one write transaction, beside its :class:`WriteTransaction`."""

    def agents_of_owner(self, owner_id: str) -> list[str]:
        """Every agent that holds anything of this owner (messages, rows, files, jobs, sources,
        reviews), sorted."""
        ...

    def erasure_candidates(self, owner_id: str, kinds: Collection[str]) -> Iterable[RecordedEvent]:
        """Readable events in log order that are of one of ``kinds`` or may name ``owner_id``:
        every event that can carry their content (and possibly a few others)."""
        ...

    def redact(self, positions: Sequence[int]) -> int:
        """Erase the payloads at ``positions`` (their digests stay in the chain); returns how many
        were asked for. Redacted events are skipped by every read from then on.

        The store remembers, durably and in this transaction, that its files still hold the
        erased bytes until the next :meth:`Erasure.scrub` succeeds."""
        ...


class Erasure(Protocol):
    """Forgetting's own port: redact payloads in a write, then leave no erased byte behind."""

    def erase(self, work: Callable[[WriteTransaction, ErasureTransaction], T]) -> T:
        """Run ``work`` in one write transaction of the store (same rules as :meth:`EventStore.write`)."""
        ...

    def scrub(self) -> ScrubReport:
        """Leave no byte of deleted or redacted content in the store's files (slow, exclusive)."""
        ...

    def scrub_pending(self) -> bool:
        """Whether an erasure committed but its scrub has not finished yet."""
        ...
