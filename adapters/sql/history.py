"""What history search does alike on every dialect once its candidates are ranked: the exact
scope check, and a matching question bringing the turn after it (ADR-0019)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fermix_memory.adapters.sql.rows import message_from_row
from fermix_memory.application.query_ports import MessageHit
from fermix_memory.domain.checkpoint import readable_by_its_owner
from fermix_memory.domain.messages import Message, is_question
from fermix_memory.domain.scopes import HistoryFilter

CONTEXT_SNIPPET_CHARS = 240


def visible(message: Message, where: HistoryFilter) -> bool:
    """Exact scope check: the token narrows the search, equality makes isolation exact."""
    if message.agent_id != where.agent_id or message.owner_id != where.owner_id:
        return False
    if not readable_by_its_owner(message):  # a checkpoint holding other owners' words
        return False
    return where.conversation is None or message.conversation == where.conversation


def context_snippet(message: Message) -> str:
    """The snippet of a turn brought along as context: its text, cut at :data:`CONTEXT_SNIPPET_CHARS`."""
    text = message.content
    return text if len(text) <= CONTEXT_SNIPPET_CHARS else text[:CONTEXT_SNIPPET_CHARS].rstrip() + "…"


def add_hit(hits: list[MessageHit], shown: set[int], where: HistoryFilter, n: int, message: Message, score: float,
            snippet: str, after: Sequence[Any]) -> None:
    """Add the hit of a ranked ``message`` (unless ``where`` may not see it, or it is shown
    already), then, while fewer than ``n`` hits, the turn after it when the message asks
    something: ``after`` holds that turn's :data:`MESSAGE_FIELDS` (all NULL when there is none),
    read into a ``Message`` only then."""
    if not visible(message, where) or message.id in shown:
        return
    hits.append(MessageHit(message=message, rank=-score, snippet=snippet))
    shown.add(message.id)
    reply = message_from_row(after) if after[0] is not None and is_question(message.content) else None
    if len(hits) < n and reply is not None and reply.id not in shown and visible(reply, where):
        hits.append(MessageHit(message=reply, rank=-score, snippet=context_snippet(reply), context_of=message.id))
        shown.add(reply.id)
