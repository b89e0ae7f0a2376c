"""The second hop of recall (ADR-0077): the names the best turns speak of (their ``e:`` marks)
bring the turns that speak of the same person, place or thing under that name, though they share
no word with the question ("Where does Kwame's sister work?" finds "My sister Mei is visiting",
whose name finds "Mei got the job at the aquarium")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fermix_memory.application.query_ports import MessageHit
from fermix_memory.domain.entities import entities_in
from fermix_memory.domain.mark_keys import NAME
from fermix_memory.domain.query_words import content_words
from fermix_memory.domain.scopes import HistoryFilter

# The hop starts from this many of the best turns and follows at most this many names; a name
# more turns than this speak of (a speaker's, the chat's running topic) says nothing and is not
# followed.
HOP_FROM = 3
HOP_NAMES = 4
HOP_COMMON = 12
# A question of fewer content words than this is not expanded: it says too little for its best
# turns to be about what it asks.
HOP_MIN_WORDS = 3


class NamedHistory(Protocol):
    """What the second hop asks of the store (``MemoryQueries`` has them)."""

    def marks_of(self, message_ids: Sequence[int]) -> dict[int, tuple[str, ...]]: ...

    def history_naming(self, where: HistoryFilter, entities: Sequence[str], limit: int) -> list[MessageHit]: ...


def hop_names(queries: NamedHistory, query: str, best: Sequence[MessageHit]) -> list[str]:
    """The names the first of ``best`` speak of that the question does not already say, nor are
    the people speaking (a speaker's name is in half the turns of a chat: it says nothing)."""
    if not best:
        return []
    words = content_words(query)
    if len(words) < HOP_MIN_WORDS:
        return []
    top = best[:HOP_FROM]
    marks = queries.marks_of([hit.message.id for hit in top])
    known = {*entities_in(query), *words, *(hit.message.sender.casefold() for hit in best)}
    names: dict[str, None] = {}
    for hit in top:
        for mark in marks.get(hit.message.id, ()):
            name = mark[len(NAME):]
            if mark.startswith(NAME) and name not in known and not known.intersection(name.split()):
                names.setdefault(name, None)
    return list(names)[:HOP_NAMES]


def second_hop(queries: NamedHistory, history: HistoryFilter, query: str, best: Sequence[MessageHit]
               ) -> list[MessageHit]:
    """The turns naming what ``best``'s first turns speak of, the first turn's names first (empty
    when there is nothing to follow)."""
    found: dict[int, MessageHit] = {}
    for name in hop_names(queries, query, best):
        naming = queries.history_naming(history, [name], HOP_COMMON + 1)
        if len(naming) <= HOP_COMMON:
            for hit in naming:
                found.setdefault(hit.message.id, hit)
    return list(found.values())
