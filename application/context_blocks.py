"""The owner's prompt files in their fence (``domain.fence.memory_context_block``), made once
per pair of revisions a prompt shows rather than once per prompt."""

from __future__ import annotations

from collections.abc import Callable
from weakref import ref

from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.domain.fence import memory_context_block


class ContextBlocks:
    """The owner's files in their fence, kept for as long as both revisions shown live (the prompt
    files' cache holds them; what it lets go, an erased owner's files among them, takes its
    block along): escaping a file is a pass over each of its characters (decoding character
    references when it holds an ``&``: milliseconds for a few kilobytes), and a file changes far
    less often than a prompt is composed. Kept by the revisions' identity, checked on each use."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, int], tuple[Callable[[], object] | None, Callable[[], object] | None, str]] = {}

    def __call__(self, user: ResourceRevision | None, memory: ResourceRevision | None) -> str:
        if user is None and memory is None:
            return ""  # no file yet: no block (``memory_context_block("", "")``)
        key = (id(user), id(memory))
        kept = self._kept.get(key)
        if kept is not None and _held(kept[0]) is user and _held(kept[1]) is memory:
            return kept[2]
        block = memory_context_block(user.content if user else "", memory.content if memory else "")
        if user is not None or memory is not None:
            def drop(_: object) -> None:
                self._kept.pop(key, None)
            self._kept[key] = (None if user is None else ref(user, drop), None if memory is None else ref(memory, drop),
                               block)
        return block

    def __len__(self) -> int:
        return len(self._kept)


def _held(reference: Callable[[], object] | None) -> object:
    return None if reference is None else reference()


context_block = ContextBlocks()
