"""A transaction's newest message of a conversation's window, read from each store's projection,
is the one ``conversation_window.newest_in_window`` folds from the stream: after clears and
compactions (never the checkpoint), retractions, times out of order and ties; on every store."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from fermix_memory.application.streams import conversation_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.checkpoint import CHECKPOINT_KIND, CHECKPOINT_SENDER
from fermix_memory.domain.conversation_window import newest_in_window
from fermix_memory.domain.values import Trust
from tests.contract.conftest import AT, CHAT, Ports, message, provenance

STREAM = conversation_stream("ada", CHAT)


def said(text: str, minutes: int = 0, **changes: object) -> ev.MessageAppended:
    return attrs.evolve(message(text), created_at=AT + timedelta(minutes=minutes), **changes)


def retracted(message_id: int) -> ev.MessageRetracted:
    return ev.MessageRetracted(at=AT, agent_id="ada", owner_id="alice", conversation=CHAT, message_id=message_id,
                               provenance=provenance())


def cleared(up_to: int) -> ev.ConversationWindowCleared:
    return ev.ConversationWindowCleared(at=AT, agent_id="ada", conversation=CHAT, up_to_message_id=up_to,
                                        provenance=provenance())


def compacted(up_to: int, checkpoint: int) -> ev.HistoryCompacted:
    return ev.HistoryCompacted(at=AT, agent_id="ada", conversation=CHAT, up_to_message_id=up_to,
                               checkpoint_message_id=checkpoint, replaced_count=up_to, provenance=provenance())


def agree(ports: Ports) -> None:
    """The store's answer, and the fold of the stream it holds, name the same message."""
    found = ports.write(lambda tx: tx.newest_window_message("ada", CHAT))
    folded = ports.write(lambda tx: newest_in_window((r.position, r.event) for r in tx.read_events(stream=STREAM)))
    assert (found and (found.id, found.content, found.trust)) == (
        folded and (folded[0], folded[1].content, folded[1].trust))


@pytest.mark.parametrize("script", ["times", "ties", "retract", "clear", "compact", "empty", "only_checkpoint"])
def test_the_store_finds_the_message_the_fold_finds(ports: Ports, script: str) -> None:
    agree(ports)  # nothing at all
    if script == "times":  # the window's order is by time, not by id
        ports.append(STREAM, said("late", 30), said("early", 5), said("middle", 10, trust=Trust.OPERATOR))
    elif script == "ties":
        ports.append(STREAM, said("a", 3), said("b", 3), said("c", 2))
    elif script == "retract":
        [a, b] = ports.append(STREAM, said("a", 1), said("b", 2))
        ports.append(STREAM, retracted(b))
        agree(ports)
        ports.append(STREAM, retracted(a))
    elif script == "clear":
        [a] = ports.append(STREAM, said("before", 1))
        ports.append(STREAM, cleared(a))
        agree(ports)
        ports.append(STREAM, said("after", 0))  # older by its time, newer by the window
    elif script == "compact":
        [a, b] = ports.append(STREAM, said("a", 1), said("b", 2))
        [summary] = ports.append(STREAM, said("summary", 9, message_kind=CHECKPOINT_KIND, sender=CHECKPOINT_SENDER))
        ports.append(STREAM, compacted(a, summary))
        agree(ports)  # b, never the newer checkpoint
        ports.append(STREAM, retracted(b))
    elif script == "only_checkpoint":
        [a] = ports.append(STREAM, said("a", 1))
        [summary] = ports.append(STREAM, said("summary", 9, message_kind=CHECKPOINT_KIND, sender=CHECKPOINT_SENDER))
        ports.append(STREAM, compacted(a, summary))
    agree(ports)
