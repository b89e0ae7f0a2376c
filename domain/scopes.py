"""Scope resolution (R-SCOPE, R-ISOLATION): which rows a reader may see, where writes go.

Every filter this module produces is pinned to one ``agent_id`` and one ``owner_id``: no
reader ever sees another owner's rows or messages, whatever scope it asks for. The one thing
shared between owners is the agent's standing rules (:func:`is_agent_rule`): they reach every
owner's ``MEMORY.md``, never their recall.
"""

from __future__ import annotations

import enum

import attrs

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Scope, ScopeType, Trust


class RecallScope(enum.StrEnum):
    CURRENT = "current"
    OWNER = "owner"
    ALL = "all"


class RecallSource(enum.StrEnum):
    MEMORIES = "memories"
    HISTORY = "history"
    ALL = "all"


class RecallMode(enum.StrEnum):
    """How recall matches (ADR-0043): by words, by meaning (vectors), or both fused."""

    KEYWORD = "keyword"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


class WriterKind(enum.StrEnum):
    """Who writes a row decides its scope (reference, "Scope resolution")."""

    REVIEWER = "reviewer"
    TOOL = "tool"
    JOB = "job"
    OPERATOR = "operator"


@attrs.frozen(kw_only=True)
class Reader:
    """The context a read happens in: a conversation turn, or a scheduled job run."""

    agent_id: str
    owner_id: str
    conversation: ConversationKey | None = None
    job_source_id: str | None = None

    @property
    def is_job(self) -> bool:
        return self.job_source_id is not None


@attrs.frozen(kw_only=True)
class MemoryFilter:
    """Rows of ``agent_id``/``owner_id`` whose ``(scope_type, scope_id)`` matches one entry.

    A ``None`` scope id matches every id of that scope type (still within the owner).
    """

    agent_id: str
    owner_id: str
    scopes: tuple[tuple[ScopeType, str | None], ...]

    def admits(self, row: Memory) -> bool:
        if row.agent_id != self.agent_id or row.owner_id != self.owner_id:
            return False
        return any(
            row.scope_type is stype and (sid is None or sid == row.scope_id) for stype, sid in self.scopes
        )


@attrs.frozen(kw_only=True)
class HistoryFilter:
    """Messages of ``agent_id``/``owner_id``; one conversation, or all when ``None``."""

    agent_id: str
    owner_id: str
    conversation: ConversationKey | None = None


def memory_filter(reader: Reader, scope: RecallScope = RecallScope.CURRENT) -> MemoryFilter:
    """The rows ``reader`` may see for ``scope``.

    - a job run sees only its own job-scoped rows, whatever it asks;
    - ``owner``: the owner's profile (owner-scoped rows);
    - ``current``: the profile, the agent's working knowledge and this conversation's rows;
    - ``all``: the profile, working knowledge and every conversation's rows of this owner.
    """
    base = {"agent_id": reader.agent_id, "owner_id": reader.owner_id}
    if reader.job_source_id is not None:
        return MemoryFilter(**base, scopes=((ScopeType.JOB, reader.job_source_id),))
    owner = (ScopeType.OWNER, reader.owner_id)
    agent = (ScopeType.AGENT, reader.agent_id)
    if scope is RecallScope.OWNER:
        return MemoryFilter(**base, scopes=(owner,))
    if scope is RecallScope.ALL:
        return MemoryFilter(**base, scopes=(owner, agent, (ScopeType.CONVERSATION, None)))
    scopes: tuple[tuple[ScopeType, str | None], ...] = (owner, agent)
    if reader.conversation is not None:
        scopes += ((ScopeType.CONVERSATION, reader.conversation.scope_id),)
    return MemoryFilter(**base, scopes=scopes)


def history_filter(reader: Reader, scope: RecallScope = RecallScope.CURRENT) -> HistoryFilter | None:
    """The messages ``reader`` may search, or ``None`` (job runs never see history)."""
    if reader.job_source_id is not None:
        return None
    if scope is RecallScope.CURRENT and reader.conversation is not None:
        return HistoryFilter(
            agent_id=reader.agent_id, owner_id=reader.owner_id, conversation=reader.conversation
        )
    return HistoryFilter(agent_id=reader.agent_id, owner_id=reader.owner_id)


def write_scope(writer: WriterKind, category: Category, reader: Reader) -> Scope | None:
    """Where ``writer`` puts a row of ``category`` (``None``: this writer cannot write here)."""
    if reader.job_source_id is not None or writer is WriterKind.JOB:
        return Scope.job(reader.job_source_id) if reader.job_source_id else None
    if writer is WriterKind.TOOL:
        return Scope.conversation(reader.conversation) if reader.conversation else None
    if category.is_profile:
        return Scope.owner(reader.owner_id)
    return Scope.agent(reader.agent_id)


def is_agent_rule(row: Memory) -> bool:
    """True if ``row`` is one of the agent's standing rules, shown to every owner of the agent.

    A live, agent-scoped ``directive`` row that renders into ``MEMORY.md``. Admission lets only
    an operator-trusted write add, change, archive or restore a directive, so every such row
    is the operator's; agent-scoped ``context`` rows and conversation- or job-scoped
    directives stay private to their owner.
    """
    return (
        row.category == Category.DIRECTIVE
        and row.scope_type == ScopeType.AGENT
        and row.promote_target == PromoteTarget.MEMORY_MD
        and row.archived_at is None
    )


def erases_on_request(row: Memory, reader: Reader, trust: Trust) -> bool:
    """True if a request to forget ``row`` (one ``reader`` is shown) erases it for good rather
    than archiving it: an operator's request, or the owner's own request about their own fact
    (their profile, or a row of the conversation they are in). The agent's working knowledge
    and a job run's rows are only archived, so they can be restored."""
    if reader.is_job or (row.agent_id, row.owner_id) != (reader.agent_id, reader.owner_id):
        return False
    if trust is Trust.OPERATOR:
        return True
    if row.scope_type == ScopeType.OWNER:
        return row.scope_id == reader.owner_id
    conversation = reader.conversation
    return row.scope_type == ScopeType.CONVERSATION and conversation is not None \
        and row.scope_id == conversation.scope_id
