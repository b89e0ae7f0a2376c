"""Use cases on conversation history: append, retract, clear the window, import / export JSON Lines."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Protocol

from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.message_input import (
    IMPORT_KEY,
    MAX_ITEM_METADATA_BYTES,
    MAX_METADATA_BYTES,
    build_message_event,
)
from fermix_memory.application.ports import Clock
from fermix_memory.application.store_ports import EventStore, WriteTransaction
from fermix_memory.application.streams import conversation_stream
from fermix_memory.domain.conversation_events import ConversationWindowCleared, MessageAppended, MessageRetracted
from fermix_memory.domain.conversation_window import RetractNewest, retraction_of
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.event_base import DomainEvent, Provenance
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, check_identifier

IMPORT_KEYS = frozenset(
    {"agent_id", "owner_id", "channel", "chat_id", "thread_scope", "role", "sender", "content", "kind",
     "trust", "created_at", "metadata", "message_id"}
)
REQUIRED_IMPORT_KEYS = ("agent_id", "owner_id", "channel", "chat_id", "role", "sender", "content")
_REQUIRED = frozenset(REQUIRED_IMPORT_KEYS)
MAX_REPORTED_LINES = 20
# Messages an import appends by one ``append_each`` (and between two calls of its progress).
IMPORT_BATCH = 1000
# The canonical JSON of a line, whose digest is the import key of a line without ``message_id``
# (``json.dumps`` with these options makes an encoder at each call).
_LINE_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
CONTENT_KEY_PREFIX = "sha256:"


class HistoryImportError(DomainError):
    """History file lines are invalid; nothing of the import was written.

    ``problems`` lists the first :data:`MAX_REPORTED_LINES` bad lines as ``(number, message)``;
    ``more`` counts the bad lines after those.
    """

    def __init__(self, problems: Sequence[tuple[int, str]], more: int = 0) -> None:
        self.problems = list(problems)
        self.more = more
        self.line = self.problems[0][0]
        super().__init__("; ".join(self.lines()))

    def lines(self) -> list[str]:
        """One line per reported problem, then how many more there were."""
        lines = [f"line {number}: {message}" for number, message in self.problems]
        if self.more:
            lines.append(f"and {self.more} more bad line{'s' if self.more != 1 else ''}")
        return lines


class ImportKeyReader(Protocol):
    """The import keys a conversation's stream already holds, each with the id of the (first)
    message holding it, read inside a writing transaction; ``only``: that key alone, or those
    keys (a tuple: the keys of a batch of appends, read at once), if held (an idempotent append,
    ADR-0050). :func:`recorded_import_keys` works on any store; a store may give a cheaper
    reading of the same keys (ADR-0037)."""

    def __call__(self, tx: WriteTransaction, stream: str, only: str | tuple[str, ...] | None = None
                 ) -> dict[str, int]: ...


def recorded_import_keys(tx: WriteTransaction, stream: str, only: str | tuple[str, ...] | None = None
                         ) -> dict[str, int]:
    """The import keys the stream's messages carry (redacted and retracted messages excluded: a
    retracted message's key is free again, ADR-0102)."""
    wanted = None if only is None else {only} if isinstance(only, str) else set(only)
    held: list[tuple[str, int]] = []
    retracted: set[int] = set()
    for recorded in tx.read_events(stream=stream):
        event = recorded.event
        if isinstance(event, MessageAppended) and IMPORT_KEY in event.metadata:
            key = str(event.metadata[IMPORT_KEY])
            if wanted is None or key in wanted:
                held.append((key, recorded.position))
        elif isinstance(event, MessageRetracted):
            retracted.add(event.message_id)
    keys: dict[str, int] = {}
    for key, position in held:
        if position not in retracted:
            keys.setdefault(key, position)
    return keys


def content_key(canonical: str, repeat: int) -> str:
    """The import key of a line without ``message_id``: its canonical JSON and how many identical
    lines (counting itself) came before it (ADR-0012)."""
    digest = hashlib.sha256(f"{canonical}\n{repeat}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256:{digest[:32]}"


class _ContentKeys:
    """Gives each message without an import key the key its exported line would have had without
    ``message_id`` (:func:`content_key`), counting repeats in the order it is given messages."""

    def __init__(self) -> None:
        self._repeats: dict[str, int] = {}

    def key(self, record: dict[str, Any]) -> str:
        canonical = _LINE_ENCODER.encode(record)
        self._repeats[canonical] = n = self._repeats.get(canonical, 0) + 1
        return content_key(canonical, n)


def content_keys(tx: WriteTransaction, stream: str) -> set[str]:
    """The keys :func:`export_lines` gives the stream's messages that hold no import key (those
    appended through the API without ``idempotency_key``), so that an export imported into its own
    home is recognised; a retracted message, which export leaves out, is left out here too."""
    appended: list[tuple[int, MessageAppended]] = []
    retracted: set[int] = set()
    for recorded in tx.read_events(stream=stream):
        event = recorded.event
        if isinstance(event, MessageAppended) and IMPORT_KEY not in event.metadata:
            appended.append((recorded.position, event))
        elif isinstance(event, MessageRetracted):
            retracted.add(event.message_id)
    keys = _ContentKeys()
    return {keys.key(export_record(event.message(position)))
            for position, event in appended if position not in retracted}


class HistoryService:
    def __init__(self, store: EventStore, clock: Clock, import_keys: ImportKeyReader = recorded_import_keys) -> None:
        self._store = store
        self._clock = clock
        self._import_keys = import_keys

    def append(self, message: AppendMessage) -> int:
        """Validate and durably record one message; returns its id once committed.

        With an ``idempotency_key`` (the host's own id of the message) the key is the message's
        import key: a conversation that already holds it gets nothing new, and the id of the
        message holding it comes back (ADR-0050)."""
        event = build_message_event(message, self._clock.now())
        stream, events = conversation_stream(event.agent_id, event.conversation), [event]
        key: str | None = message.idempotency_key  # checked, and kept as the import key, by the builder
        if key is None:
            return self._store.write(lambda tx: tx.append(stream, events)[0])

        def once(tx: WriteTransaction) -> int:
            held = self._import_keys(tx, stream, key)
            return held[key] if key in held else tx.append(stream, events)[0]

        return self._store.write(once)

    def append_many(self, messages: Sequence[AppendMessage], *, metadata_limit: int = MAX_METADATA_BYTES) -> list[int]:
        """Validate every message, then record them all in ONE transaction (all of them, or none);
        their ids, in the order given. An ``idempotency_key`` works as in :meth:`append`: a message
        whose key its conversation already holds, or an earlier message of the same call holds,
        is not recorded again, and the holder's id comes back for it. ``metadata_limit``: the
        most bytes each message's metadata may take (an integration's own items: ADR-0103)."""
        at = self._clock.now()
        # every one checked before a write
        events = [build_message_event(m, at, metadata_limit=metadata_limit) for m in messages]
        if not events:
            return []
        streams = [conversation_stream(e.agent_id, e.conversation) for e in events]
        keys = [m.idempotency_key for m in messages]
        asked: dict[str, dict[str, None]] = {}  # each stream's keys, in order, once each
        for stream, key in zip(streams, keys, strict=True):
            if key is not None:
                asked.setdefault(stream, {})[key] = None

        def work(tx: WriteTransaction) -> list[int]:
            # The keys already held: one reading per conversation, whatever the batch holds.
            held = {(stream, key): ~at for stream, wanted in asked.items()
                    for key, at in self._import_keys(tx, stream, tuple(wanted)).items()}
            pending: list[tuple[str, DomainEvent]] = []
            # Each message's id: an index into ``pending`` (>= 0), or ``~id`` of the message holding its key.
            slots: list[int] = []
            for stream, event, key in zip(streams, events, keys, strict=True):
                slot = None if key is None else held.get((stream, key))
                if slot is None:
                    slot = len(pending)
                    pending.append((stream, event))
                    if key is not None:
                        held[stream, key] = slot
                slots.append(slot)
            positions = tx.append_each(pending)
            return [positions[slot] if slot >= 0 else ~slot for slot in slots]

        return self._store.write(work)

    def clear_window(self, agent_id: str, conversation: ConversationKey, provenance: Provenance) -> int:
        """``/new`` / ``/clear``: later turns start from an empty window (nothing is deleted)."""
        at = self._clock.now()

        def work(tx: WriteTransaction) -> int:
            last = tx.last_message_id(agent_id, conversation)
            tx.append(conversation_stream(agent_id, conversation), [ConversationWindowCleared(
                at=at, agent_id=agent_id, conversation=conversation, up_to_message_id=last,
                provenance=provenance)])
            return last

        return self._store.write(work)

    def retract_newest(self, agent_id: str, conversation: ConversationKey, provenance: Provenance) -> Message | None:
        """Take back the newest message of the window (ADR-0027): recorded as ``message.retracted``,
        nothing is deleted from the log. Returns the message taken back (``None``: the window
        holds none)."""
        cmd = RetractNewest(at=self._clock.now(), agent_id=agent_id, conversation=conversation, provenance=provenance)

        def work(tx: WriteTransaction) -> Message | None:
            # The window's end as the projection holds it: a pop costs what one message costs,
            # however long the conversation (it folded the whole stream before).
            newest = tx.newest_window_message(agent_id, conversation)
            if newest is None:
                return None
            tx.append(conversation_stream(agent_id, conversation),
                      retraction_of(newest.id, newest.trust, newest.owner_id, cmd))
            return newest

        return self._store.write(work)

    def parse_jsonl(self, lines: Sequence[str], progress: Callable[[int, int], None] | None = None
                    ) -> list[MessageAppended]:
        """Validate every line (:func:`parse_history`), stamped with the clock's time."""
        return parse_history(lines, self._clock.now(), progress)

    def import_events(self, events: list[MessageAppended],
                      progress: Callable[[int, int], None] | None = None) -> list[int]:
        """Record parsed messages in ONE transaction: all of them, or none. A message whose
        import key its conversation already holds is skipped (re-importing a file adds nothing);
        returns the ids of the messages recorded."""

        def work(tx: WriteTransaction) -> list[int]:
            known: dict[tuple[str, str], set[str]] = {}
            derived: set[tuple[str, str]] = set()  # the streams whose content keys are in ``known``
            ids: list[int] = []
            pending: list[tuple[str, DomainEvent]] = []
            streams: dict[tuple[str, str], str] = {}
            for done, event in enumerate(events, start=1):
                where = (event.agent_id, event.conversation.scope_id)
                stream = streams.get(where)
                if stream is None:
                    stream = streams[where] = conversation_stream(event.agent_id, event.conversation)
                    known[where] = set(self._import_keys(tx, stream))
                key = str(event.metadata.get(IMPORT_KEY, ""))
                if key.startswith(CONTENT_KEY_PREFIX) and key not in known[where] and where not in derived:
                    # A line exported from un-keyed messages: read their keys (once, and only then).
                    derived.add(where)
                    known[where] |= content_keys(tx, stream)
                if not key or key not in known[where]:
                    pending.append((stream, event))
                    known[where].add(key)
                if done % IMPORT_BATCH == 0 or done == len(events):
                    ids.extend(tx.append_each(pending))
                    pending = []
                    if progress is not None:
                        progress(done, len(events))
            return ids

        return self._store.write(work)


def parse_history(lines: Sequence[str], at: datetime, progress: Callable[[int, int], None] | None = None
                  ) -> list[MessageAppended]:
    """Validate every line; if any is bad, raise one error listing the bad lines.

    Needs nothing but the lines: a command can check a file before it creates a home. Each
    event carries its import key (the line's ``message_id``, else one derived from the
    line's content and how often that same content came before in the file; ADR-0012).
    """
    events: list[MessageAppended] = []
    problems: list[tuple[int, str]] = []
    bad = 0
    seen: dict[tuple[str, str, str], int] = {}  # (agent, conversation, key) -> first line
    repeats: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if progress is not None and (number % 1000 == 0 or number == len(lines)):
            progress(number, len(lines))
        if not isinstance(line, str):
            bad += 1
            if len(problems) < MAX_REPORTED_LINES:
                problems.append((number, f"each line must be text, got {type(line).__name__}"))
            continue
        if not line or line.isspace():
            continue
        try:
            event = _parse_line(line, at, repeats)
            where = (event.agent_id, event.conversation.scope_id, str(event.metadata[IMPORT_KEY]))
            if where in seen:
                raise DomainError(f"message_id {where[2]!r} is already used on line {seen[where]}")
            seen[where] = number
            events.append(event)
        except DomainError as exc:
            bad += 1
            if len(problems) < MAX_REPORTED_LINES:
                problems.append((number, str(exc)))
    if problems:
        raise HistoryImportError(problems, bad - len(problems))
    return events



def _parse_line(line: str, at: datetime, repeats: dict[str, int]) -> MessageAppended:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DomainError(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise DomainError("JSON nested too deeply") from None
    if not isinstance(record, dict):
        raise DomainError("each line must be one JSON object")
    if not record.keys() <= IMPORT_KEYS:
        unknown = sorted(record.keys() - IMPORT_KEYS)
        raise DomainError(f"unknown key(s): {', '.join(k[:40] for k in unknown[:5])}")
    if not record.keys() >= _REQUIRED:
        missing = [k for k in REQUIRED_IMPORT_KEYS if k not in record]
        raise DomainError(f"missing key(s): {', '.join(missing)}")
    channel = record["channel"]
    if isinstance(channel, str) and ":" in channel:
        raise DomainError("channel must not contain ':' (conversations are written CHANNEL:CHAT_ID[:THREAD])")
    metadata = record.get("metadata")
    if isinstance(metadata, dict) and IMPORT_KEY in metadata:
        raise DomainError(f"metadata key {IMPORT_KEY} is reserved; give the line a message_id instead")
    if "message_id" in record:
        key = check_identifier(record["message_id"], "message_id")
    else:
        canonical = _LINE_ENCODER.encode(record)
        repeats[canonical] = repeats.get(canonical, 0) + 1
        key = content_key(canonical, repeats[canonical])
    if isinstance(metadata, dict):
        metadata = {**metadata, IMPORT_KEY: key}
    # A line without metadata: its message's metadata is the key alone, which the checks of a
    # message's metadata always pass (a checked identifier, or a digest).
    return build_message_event(AppendMessage(
        agent_id=record["agent_id"], owner_id=record["owner_id"],
        conversation=(channel, record["chat_id"], record.get("thread_scope", "")),
        role=record["role"], sender=record["sender"], content=record["content"],
        kind=record.get("kind", "text"), trust=record.get("trust", "guest"),
        metadata=metadata, created_at=record.get("created_at"),
        # An export holds what any message may hold: an integration's own items too (ADR-0103).
    ), at, None if metadata is not None else {IMPORT_KEY: key}, metadata_limit=MAX_ITEM_METADATA_BYTES)


def export_record(message: Message) -> dict[str, Any]:
    """One message in the SPEC §12 JSON Lines shape (what import reads back); its import key,
    if it has one, as ``message_id``."""
    c = message.conversation
    metadata = dict(message.metadata)
    key = metadata.pop(IMPORT_KEY, None)
    record = {
        "agent_id": message.agent_id, "owner_id": message.owner_id, "channel": c.channel,
        "chat_id": c.chat_id, "thread_scope": c.thread_scope, "role": message.role.value,
        "sender": message.sender, "content": message.content, "kind": message.kind,
        "trust": message.trust.value, "created_at": message.created_at.isoformat(),
        "metadata": metadata,
    }
    if isinstance(key, str):
        record["message_id"] = key
    return record


def export_lines(messages: Iterable[Message]) -> Iterator[str]:
    """The messages as JSON Lines, in the order given (log order), each with a ``message_id``: its
    import key, else the key its line would get without one (:class:`_ContentKeys`, counted per
    line as an import counts them), so the export imported into its own home adds nothing."""
    keys = _ContentKeys()
    for message in messages:
        record = export_record(message)
        if "message_id" not in record:
            record["message_id"] = keys.key(record)
        yield json.dumps(record, ensure_ascii=False, sort_keys=True)
