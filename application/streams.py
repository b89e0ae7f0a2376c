"""Event stream names: one stream per aggregate, so ``UNIQUE(stream, version)`` orders it."""

from __future__ import annotations

import functools
from urllib.parse import quote, unquote

from fermix_memory.domain.log_chain import chain_of
from fermix_memory.domain.values import ConversationKey


@functools.lru_cache(maxsize=4096)  # the same few agent and owner ids name every append's stream
def _q(part: str) -> str:
    return quote(part, safe="")


def conversation_stream(agent_id: str, conversation: ConversationKey) -> str:
    return f"conversation/{_q(agent_id)}/{conversation.scope_id}"


def memory_stream(agent_id: str, owner_id: str) -> str:
    return f"memory/{_q(agent_id)}/{_q(owner_id)}"


def review_stream(agent_id: str, owner_id: str, conversation: ConversationKey) -> str:
    return f"review/{_q(agent_id)}/{_q(owner_id)}/{conversation.scope_id}"


def resource_stream(agent_id: str, owner_id: str, name: str) -> str:
    return f"resource/{_q(agent_id)}/{_q(owner_id)}/{_q(name)}"


def owner_stream(agent_id: str, owner_id: str) -> str:
    """Where erasures of an owner are recorded."""
    return f"owner/{_q(agent_id)}/{_q(owner_id)}"


def parse_owner_stream(stream: str) -> tuple[str, str]:
    """``(agent_id, owner_id)`` of an :func:`owner_stream` or :func:`memory_stream` name."""
    _, agent, owner = stream.split("/")
    return unquote(agent), unquote(owner)


def job_stream(job_id: str) -> str:
    return f"job/{_q(job_id)}"


def source_stream(source_id: str) -> str:
    return f"source/{_q(source_id)}"


TRACE_STREAM = "trace/model-calls"
# Where the home's signed receipts of erasures, the runs of its retention policies and the
# destruction of export keys are recorded (one stream each: they are rare, and ordered).
RECEIPT_STREAM = "privacy/receipts"
RETENTION_STREAM = "privacy/retention"
EXPORT_KEYS_STREAM = "privacy/export-keys"
# Where an import records the payloads of an encrypted export whose position keys were destroyed.
PAYLOADS_LOST_STREAM = "privacy/payloads-lost"


# Streams keyed by an owner (``KIND/AGENT/OWNER[/...]``): an owner's facts, reviews, prompt-file
# revisions and erasures link into one chain, so one owner's writes are ordered together.
_OWNER_KEYED = frozenset({"memory", "review", "resource", "owner"})


def partition_key(stream: str) -> str:
    """What decides a stream's chain (ADR-0031): ``AGENT/OWNER`` for an owner's streams; the
    stream itself for the rest (a conversation, a job, a source, the trace stream), so a
    conversation's messages are ordered together whoever wrote them."""
    kind, _, rest = stream.partition("/")
    if kind in _OWNER_KEYED:
        parts = rest.split("/", 2)
        if len(parts) >= 2:
            return f"{parts[0]}/{parts[1]}"
    return stream


def chain_for(stream: str, chains: int) -> int:
    """The chain (0 to ``chains - 1``) that ``stream``'s events link into (one chain: 0, at once:
    it is on every append of a one-chain log)."""
    return 0 if chains == 1 else _chain_for(stream, chains)


@functools.lru_cache(maxsize=65536)
def _chain_for(stream: str, chains: int) -> int:
    return chain_of(partition_key(stream), chains)
