"""Dates in recall (ADR-0075): the days a question names become windows, and the turns said on
those days or speaking of them (the ``d:`` marks a turn's own relative phrases were resolved to
when it was stored) join the other lists; a question that is only a date filter ("what did we
talk about on 3 May?") is answered by those turns alone."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Protocol

import attrs

from fermix_memory.application.query_ports import MessageHit
from fermix_memory.domain.query_words import CHAT_WORDS, content_words
from fermix_memory.domain.scopes import HistoryFilter
from fermix_memory.domain.time_expressions import DayWindow, read_dates

# How many of a window's turns are read: a busy day of chat.
MAX_DATED = 100
# Any anchor reads an absolute date the same; this one is used only to learn whether a question
# names a date at all before the anchor it needs is looked up.
_ANY_ANCHOR = datetime(2000, 1, 1, tzinfo=UTC)


class DatedHistory(Protocol):
    """What dates in recall ask of the store (``MemoryQueries`` has them)."""

    def history_in_days(self, where: HistoryFilter, first: date, last: date, limit: int) -> list[MessageHit]: ...

    def newest_message_at(self, where: HistoryFilter) -> datetime | None: ...


@attrs.frozen
class DatedQuery:
    """A question's day windows, and whether they are all it asks."""

    windows: tuple[DayWindow, ...]
    only_dates: bool


def dated_query(queries: DatedHistory, query: str, history: HistoryFilter, as_of: datetime | None,
                now: datetime | None) -> DatedQuery | None:
    """The windows ``query`` names, relative phrases counted from ``as_of``; without one, from the
    newest turn of ``history`` (a conversation imported from the past is asked about as it stood),
    else ``now``. ``None`` when it names no day (or only relative ones and there is no anchor)."""
    reading = read_dates(query, as_of or _ANY_ANCHOR)
    if not reading.windows:
        return None
    if reading.relative and as_of is None:
        anchor = queries.newest_message_at(history) or now
        if anchor is None:
            return None
        reading = read_dates(query, anchor)
        if not reading.windows:
            return None
    rest = [word for word in content_words(reading.rest) if word not in CHAT_WORDS]
    return DatedQuery(windows=reading.windows, only_dates=not rest)


def dated_turns(queries: DatedHistory, history: HistoryFilter, dated: DatedQuery, limit: int) -> list[MessageHit]:
    """The turns of every window: those speaking of its days first, then those said on them."""
    found: dict[int, MessageHit] = {}
    for window in dated.windows:
        for hit in queries.history_in_days(history, window.first, window.last, limit):
            found.setdefault(hit.message.id, hit)
    return list(found.values())[:limit]
