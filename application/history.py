"""Use cases on conversation history: append, clear the window, import / export JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from fermix_memory.application.message_input import build_message_event
from fermix_memory.application.ports import Clock, EventStore, WriteTransaction
from fermix_memory.application.streams import conversation_stream
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.events import ConversationWindowCleared, MessageAppended, Provenance
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey

IMPORT_KEYS = frozenset(
    {"agent_id", "owner_id", "channel", "chat_id", "thread_scope", "role", "sender", "content", "kind",
     "trust", "created_at", "metadata"}
)
REQUIRED_IMPORT_KEYS = ("agent_id", "owner_id", "channel", "chat_id", "role", "sender", "content")


class HistoryImportError(DomainError):
    """A history file line is invalid; nothing of the import was written."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def append_event(tx: WriteTransaction, event: MessageAppended) -> int:
    return tx.append(conversation_stream(event.agent_id, event.conversation), [event])[0]


class HistoryService:
    def __init__(self, store: EventStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def append(self, **fields: Any) -> int:
        """Validate and durably record one message; returns its id once committed."""
        event = build_message_event(at=self._clock.now(), **fields)
        return self._store.write(lambda tx: append_event(tx, event))

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

    def parse_jsonl(self, lines: Sequence[str], progress: Callable[[int, int], None] | None = None
                    ) -> list[MessageAppended]:
        """Validate every line first; the first bad one raises with its line number."""
        at = self._clock.now()
        events = []
        for number, line in enumerate(lines, start=1):
            if progress is not None and (number % 1000 == 0 or number == len(lines)):
                progress(number, len(lines))
            if not isinstance(line, str):
                raise HistoryImportError(number, f"each line must be text, got {type(line).__name__}")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HistoryImportError(number, f"not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise HistoryImportError(number, "JSON nested too deeply") from None
            if not isinstance(record, dict):
                raise HistoryImportError(number, "each line must be one JSON object")
            unknown = sorted(set(record) - IMPORT_KEYS)
            if unknown:
                raise HistoryImportError(number, f"unknown key(s): {', '.join(unknown)}")
            missing = [k for k in REQUIRED_IMPORT_KEYS if k not in record]
            if missing:
                raise HistoryImportError(number, f"missing key(s): {', '.join(missing)}")
            try:
                events.append(build_message_event(
                    agent_id=record["agent_id"], owner_id=record["owner_id"],
                    conversation=(record["channel"], record["chat_id"], record.get("thread_scope", "")),
                    role=record["role"], sender=record["sender"], content=record["content"],
                    kind=record.get("kind", "text"), trust=record.get("trust", "guest"),
                    metadata=record.get("metadata"), created_at=record.get("created_at"), at=at,
                ))
            except DomainError as exc:
                raise HistoryImportError(number, str(exc)) from None
        return events

    def import_events(self, events: list[MessageAppended]) -> list[int]:
        """Record parsed messages in ONE transaction: all of them, or none."""
        return self._store.write(lambda tx: [append_event(tx, e) for e in events])


def export_record(message: Message) -> dict[str, Any]:
    """One message in the SPEC §12 JSON Lines shape (what import reads back)."""
    c = message.conversation
    return {
        "agent_id": message.agent_id, "owner_id": message.owner_id, "channel": c.channel,
        "chat_id": c.chat_id, "thread_scope": c.thread_scope, "role": message.role.value,
        "sender": message.sender, "content": message.content, "kind": message.kind,
        "trust": message.trust.value, "created_at": message.created_at.isoformat(),
        "metadata": message.metadata,
    }


def export_lines(messages: Iterable[Message]) -> Iterator[str]:
    for message in messages:
        yield json.dumps(export_record(message), ensure_ascii=False, sort_keys=True)
