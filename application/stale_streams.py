"""What other processes' writes make stale in this process's caches (ADR-0064): the store's
change feed names the streams they appended to, without the events; each cache drops what it
keeps of them, and reads it again when next asked for it."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from urllib.parse import quote, unquote

from fermix_memory.application.caches import ConversationStore, MemoryRowCache, PromptFileCache
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.shown_prompt_files import UNRECORDED, may_change_rules_of
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.values import ConversationKey

RULES = "rules"  # not a stream: "rules/AGENT" names an agent whose standing rules may have changed


def rules_named(recorded: Iterable[RecordedEvent]) -> set[str]:
    """What a write's notification names besides its streams: ``rules/AGENT`` for each agent
    whose standing rules its events may change (``shown_prompt_files.may_change_rules_of``)."""
    return {f"{RULES}/{quote(agent, safe='')}" for item in recorded
            if (agent := may_change_rules_of(item.event)) is not None}


class StaleStreams:
    """Called with the streams of other processes' writes: drops the windows of the conversations
    named, the rows of the owners named (a memory stream), the prompt files named (a resource
    stream) and, for an agent whose standing rules may have changed (:func:`rules_named`), the
    ``MEMORY.md`` shown from its rules to owners without one of their own. Other streams
    (reviews, jobs, erasures: erasures reach the caches as events) keep nothing cached."""

    def __init__(self, conversations: ConversationStore, rows: MemoryRowCache, files: PromptFileCache) -> None:
        self._conversations = conversations
        self._rows = rows
        self._files = files

    def __call__(self, streams: Collection[str]) -> None:
        windows: list[tuple[str, ConversationKey]] = []
        owners: set[tuple[str, str]] = set()
        agents: set[str] = set()
        files: list[tuple[str, str, str]] = []
        for stream in streams:
            target = _target(stream)
            if target is None:
                continue
            window, owner, agent, file = target
            if window is not None:
                windows.append(window)
            elif owner is not None:
                owners.add(owner)
            elif agent is not None:
                agents.add(agent)
            elif file is not None:
                files.append(file)
        if windows:
            self._conversations.drop(windows)
        if owners:
            self._rows.drop(where=lambda _, row: row is not None and (row.agent_id, row.owner_id) in owners)
        if files or agents:
            self._files.drop(files, lambda key, shown: key[0] in agents and key[2] == "memory_md"
                             and _from_rules(shown))


# What a stream's name says to drop, one of: a conversation's window, an owner's rows, an agent
# whose standing rules may have changed, a prompt file.
_Target = tuple[tuple[str, ConversationKey] | None, tuple[str, str] | None, str | None, tuple[str, str, str] | None]


@functools.lru_cache(maxsize=4096)
def _target(stream: str) -> _Target | None:
    """What a stream's name says to drop (the same streams come again and again: worked out once
    each); None: nothing."""
    kind, _, rest = stream.partition("/")
    parts = rest.split("/")
    if kind == "conversation" and len(parts) == 2:
        try:
            return (unquote(parts[0]), ConversationKey.from_scope_id(parts[1])), None, None, None
        except DomainError:
            return None  # not a stream this memory writes: nothing of it is cached
    if kind == "memory" and len(parts) == 2:
        return None, (unquote(parts[0]), unquote(parts[1])), None, None
    if kind == RULES and len(parts) == 1:
        return None, None, unquote(parts[0]), None
    if kind == "resource" and len(parts) == 3:
        return None, None, None, (unquote(parts[0]), unquote(parts[1]), unquote(parts[2]))
    return None


def _from_rules(shown: ResourceRevision | None) -> bool:
    """A ``MEMORY.md`` shown from the agent's rules (none recorded for its owner), or none at all."""
    return shown is None or shown.revision == UNRECORDED
