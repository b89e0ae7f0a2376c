"""Retention policies (ADR-0080): what they cover, when it falls due, and what is due now. Pure.

A policy names a duration (``after``) and exactly one selector: a memory category (rows whose
last statement is older than ``after``), a channel prefix (conversations whose key starts with it
and whose newest message is older than ``after``) or a trust (conversations in which every
message has that trust, idle for ``after``); ``agent_id`` keeps it to one agent's. A row with its
own expiry time is due at that time, under the name :data:`EXPIRES_AT`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.values import Category, ConversationKey, Trust, check_identifier

# The name under which a row's own ``expires_at`` erases it.
EXPIRES_AT = "expires_at"
SELECTORS = ("category", "channel_prefix", "trust")
KEYS = ("name", "after", *SELECTORS, "agent_id")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_AFTER_S = 1000 * 366 * 86400  # a thousand years
MAX_PREFIX_CHARS = 256
_DURATION = re.compile(r"([0-9]{1,15})([smhdw])")


class PolicyError(DomainError):
    """A retention policy as written is not usable: ``key`` names the key at fault."""

    def __init__(self, key: str, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.index = index


@attrs.frozen(kw_only=True)
class RetentionPolicy:
    """One ``[[fermix_core.retention.policy]]``: ``selector`` is ``category``, ``channel_prefix``
    or ``trust`` and ``value`` what it selects; ``after`` as written (``30d``) and as a span."""

    name: str
    after: str
    span: timedelta
    selector: str
    value: str
    agent_id: str | None = None

    @property
    def covers_rows(self) -> bool:
        return self.selector == "category"


def parse_duration(text: object) -> timedelta:
    """``30d`` and the like: a whole number then s, m, h, d or w; more than zero, at most a
    thousand years."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise PolicyError("after", 'after must be a whole number then s, m, h, d or w, like "30d"')
    seconds = int(match.group(1)) * UNITS[match.group(2)]
    if not 0 < seconds <= MAX_AFTER_S:
        raise PolicyError("after", "after must be more than zero and at most a thousand years")
    return timedelta(seconds=seconds)


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry[key]
    if not isinstance(value, str):
        raise PolicyError(key, f"{key} must be a string")
    return value


def _identifier(entry: Mapping[str, Any], key: str) -> str:
    value = _text(entry, key)
    try:
        check_identifier(value, key)
    except DomainError as exc:
        raise PolicyError(key, str(exc)) from None
    return value


def _selected(entry: Mapping[str, Any]) -> tuple[str, str]:
    given = [key for key in SELECTORS if key in entry]
    if len(given) != 1:
        key = given[1] if len(given) > 1 else "category"
        raise PolicyError(key, "a policy needs exactly one of category, channel_prefix and trust")
    selector = given[0]
    value = _text(entry, selector)
    if selector == "category" and value not in {c.value for c in Category}:
        raise PolicyError(selector, "category must be one of " + ", ".join(c.value for c in Category))
    if selector == "trust" and value not in {t.value for t in Trust}:
        raise PolicyError(selector, 'trust must be "guest" or "operator"')
    if selector == "channel_prefix" and not 0 < len(value) <= MAX_PREFIX_CHARS:
        raise PolicyError(selector, f"channel_prefix must be 1 to {MAX_PREFIX_CHARS} characters")
    return selector, value


def parse_policy(entry: Mapping[str, Any]) -> RetentionPolicy:
    """One policy from its table; :class:`PolicyError` naming the key at fault."""
    for key in entry:
        if key not in KEYS:
            raise PolicyError(str(key), f"unknown key {key} (known keys: {', '.join(sorted(KEYS))})")
    for key in ("name", "after"):
        if key not in entry:
            raise PolicyError(key, f"{key} is required")
    name = _identifier(entry, "name")
    if name == EXPIRES_AT:
        raise PolicyError("name", f"{EXPIRES_AT} names a row's own expiry; give the policy another name")
    selector, value = _selected(entry)
    agent_id = _identifier(entry, "agent_id") if "agent_id" in entry else None
    return RetentionPolicy(name=name, after=_text(entry, "after"), span=parse_duration(entry["after"]),
                           selector=selector, value=value, agent_id=agent_id)


def parse_policies(entries: Sequence[Mapping[str, Any]]) -> tuple[RetentionPolicy, ...]:
    """Every policy, in order; :class:`PolicyError` (its ``index`` set) at the first at fault,
    a name used twice included."""
    policies: list[RetentionPolicy] = []
    for index, entry in enumerate(entries):
        try:
            policy = parse_policy(entry)
            if any(p.name == policy.name for p in policies):
                raise PolicyError("name", f"name {policy.name} is used by an earlier policy; names must be unique")
        except PolicyError as exc:
            raise PolicyError(exc.key, str(exc), index) from None
        policies.append(policy)
    return tuple(policies)


# --- what falls due ---------------------------------------------------------------------------


def aware(moment: datetime) -> datetime:
    """A stored time without an offset is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@attrs.frozen(kw_only=True)
class ConversationSummary:
    """One conversation as retention sees it: its newest message (time and id) and the trusts its
    messages have."""

    agent_id: str
    conversation: ConversationKey
    newest: datetime
    last_message_id: int
    trusts: frozenset[str]


@attrs.frozen(kw_only=True)
class RowSummary:
    """One memory row as retention sees it: its last statement's time and its own expiry."""

    memory_id: int
    agent_id: str
    owner_id: str
    category: str
    updated_at: datetime
    expires_at: datetime | None = None


def conversation_due_at(policy: RetentionPolicy, summary: ConversationSummary) -> datetime | None:
    """When ``policy`` erases the conversation; ``None`` when it does not cover it."""
    if policy.covers_rows or policy.agent_id not in (None, summary.agent_id):
        return None
    if policy.selector == "channel_prefix":
        if not str(summary.conversation).startswith(policy.value):
            return None
    elif summary.trusts != {policy.value}:
        return None
    return aware(summary.newest) + policy.span


def row_due_at(policy: RetentionPolicy, row: RowSummary) -> datetime | None:
    """When ``policy`` erases the row; ``None`` when it does not cover it."""
    if not policy.covers_rows or policy.agent_id not in (None, row.agent_id) or row.category != policy.value:
        return None
    return aware(row.updated_at) + policy.span


@attrs.frozen(kw_only=True)
class Due:
    """An item's earliest due time and the policy that makes it due then."""

    policy: str
    at: datetime


def _earliest(found: Iterable[tuple[str, datetime | None]]) -> Due | None:
    best: Due | None = None
    for name, at in found:
        if at is not None and (best is None or at < best.at):
            best = Due(policy=name, at=at)
    return best


def conversation_due(policies: Sequence[RetentionPolicy], summary: ConversationSummary) -> Due | None:
    """The first time any policy erases the conversation (the earlier policy wins a tie)."""
    return _earliest((p.name, conversation_due_at(p, summary)) for p in policies)


def row_due(policies: Sequence[RetentionPolicy], row: RowSummary) -> Due | None:
    """The first time a policy or the row's own expiry erases it (a policy wins a tie)."""
    found = [(p.name, row_due_at(p, row)) for p in policies]
    found.append((EXPIRES_AT, None if row.expires_at is None else aware(row.expires_at)))
    return _earliest(found)


@attrs.frozen(kw_only=True)
class PolicyOutlook:
    """One policy (or :data:`EXPIRES_AT`) now: what is due, and when the next item falls due."""

    name: str
    conversations: tuple[ConversationSummary, ...] = ()
    rows: tuple[RowSummary, ...] = ()
    next_due: datetime | None = None

    @property
    def due_count(self) -> int:
        return len(self.conversations) + len(self.rows)


@attrs.frozen(kw_only=True)
class Outlook:
    """What is due ``now`` under each policy, in config order (:data:`EXPIRES_AT` last)."""

    policies: tuple[PolicyOutlook, ...]

    @property
    def due_count(self) -> int:
        return sum(p.due_count for p in self.policies)

    @property
    def next_due(self) -> datetime | None:
        """When the next item not due now falls due (``None``: none will)."""
        times = [p.next_due for p in self.policies if p.next_due is not None]
        return min(times) if times else None


def outlook(policies: Sequence[RetentionPolicy], conversations: Iterable[ConversationSummary],
            rows: Iterable[RowSummary], now: datetime) -> Outlook:
    """Sort every candidate under the policy that erases it first: due now (its time is not after
    ``now``), or counted in that policy's next due time."""
    names = [p.name for p in policies] + [EXPIRES_AT]
    due_c: dict[str, list[ConversationSummary]] = {name: [] for name in names}
    due_r: dict[str, list[RowSummary]] = {name: [] for name in names}
    later: dict[str, datetime] = {}
    for summary in conversations:
        found = conversation_due(policies, summary)
        if found is not None:
            _place(found, now, later, due_c[found.policy], summary)
    for row in rows:
        found = row_due(policies, row)
        if found is not None:
            _place(found, now, later, due_r[found.policy], row)
    return Outlook(policies=tuple(
        PolicyOutlook(name=name, conversations=tuple(due_c[name]), rows=tuple(due_r[name]), next_due=later.get(name))
        for name in names))


def _place(found: Due, now: datetime, later: dict[str, datetime], due: list[Any], item: object) -> None:
    if found.at <= now:
        due.append(item)
    elif found.policy not in later or found.at < later[found.policy]:
        later[found.policy] = found.at
