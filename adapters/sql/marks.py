"""The reads of the ``message_marks`` projection (``sql.mark_writes`` writes it): history by
day and by name, a message's marks, the newest message. The same SQL on every dialect; a reader
(``fermix memory list``) imports this, never the parsers that find the marks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from fermix_memory.adapters.sql.history import context_snippet, visible
from fermix_memory.adapters.sql.read_side import ReadSide, clamp_limit
from fermix_memory.adapters.sql.rows import MESSAGE_FIELDS, message_from_row
from fermix_memory.application.query_ports import MessageHit
from fermix_memory.domain.mark_keys import day_mark, name_mark
from fermix_memory.domain.scopes import HistoryFilter

MAX_NAMES = 64  # names one read asks for
_IDS_AT_ONCE = 500  # message ids bound in one statement
# Rows read beyond a limit, for those ``visible`` leaves out (a checkpoint quoting other owners).
_SPARE = 8


def _scope(where: HistoryFilter, alias: str = "m") -> tuple[str, list[Any]]:
    """The condition of the messages ``where`` selects (``sql.history.visible`` checks exactly)."""
    sql = f"{alias}.agent_id = ? AND {alias}.owner_id = ? AND {alias}.scope_tokens <> ''"
    params: list[Any] = [where.agent_id, where.owner_id]
    if where.conversation is not None:
        c = where.conversation
        sql += f" AND {alias}.channel = ? AND {alias}.chat_id = ? AND {alias}.thread_scope = ?"
        params += [c.channel, c.chat_id, c.thread_scope]
    return sql, params


_COLUMNS = ", ".join(f"m.{c}" for c in MESSAGE_FIELDS)
_NEWEST = "m.created_at DESC, m.id DESC"
_CREATED_AT = 2 + MESSAGE_FIELDS.index("created_at")  # its column in a row of a group and the message


def _in_days_sql(scope: str) -> str:
    """Messages of ``scope`` marked with a day of a range, then those said on a day of it (and not
    marked with one), each group newest first. Parameters: the first and last day's marks, the
    scope's, the start of the first day and of the day after the last, the marks again, the
    scope's again, the limit."""
    marked = "SELECT message_id FROM message_marks WHERE mark >= ? AND mark <= ?"
    return (f"SELECT 0, {_COLUMNS} FROM messages m WHERE m.id IN ({marked}) AND {scope}"
            f" UNION ALL SELECT 1, {_COLUMNS} FROM messages m WHERE m.created_at >= ? AND m.created_at < ?"
            f" AND m.id NOT IN ({marked}) AND {scope}"
            f" ORDER BY 1, {_CREATED_AT} DESC, 2 DESC LIMIT ?")


def _hits(rows: Iterable[Sequence[Any]], where: HistoryFilter, n: int, *, ranked: bool) -> list[MessageHit]:
    """The first ``n`` messages of ``rows`` (a number, then the message's columns) ``where`` may see;
    ``ranked``: the number, negated, is the rank (else 0.0)."""
    hits: list[MessageHit] = []
    for row in rows:
        message = message_from_row(row[1:])
        if visible(message, where):
            hits.append(MessageHit(message=message, rank=-float(row[0]) if ranked else 0.0,
                                   snippet=context_snippet(message)))
            if len(hits) >= n:
                break
    return hits


class MarkQueries(ReadSide):
    """The reads of ``message_marks`` (part of ``MemoryQueries``). ``before_marks``, when set, is
    called before each of them: it writes the marks that appends left waiting (SQLite's, ADR-0085),
    so a read finds every committed message's marks."""

    before_marks: Callable[[], object] | None = None

    def _marked(self) -> None:
        if self.before_marks is not None:
            self.before_marks()

    def history_in_days(self, where: HistoryFilter, first: date, last: date, limit: int) -> list[MessageHit]:
        """The messages ``where`` selects that speak of a day from ``first`` to ``last`` (a ``d:``
        mark), then those said on such a day (``created_at``'s UTC day), each group newest first,
        each message once; rank 0.0, the snippet the head of the text."""
        n = clamp_limit(limit)
        if n == 0 or last < first:
            return []
        self._marked()
        scope, params = _scope(where)
        marks = [day_mark(first), day_mark(last)]
        after = (last + timedelta(days=1)).isoformat()
        rows = self._rows(_in_days_sql(scope),
                          [*marks, *params, first.isoformat(), after, *marks, *params, n + _SPARE])
        return _hits(rows, where, n, ranked=False)

    def history_naming(self, where: HistoryFilter, entities: Sequence[str], limit: int) -> list[MessageHit]:
        """The messages ``where`` selects marked with any of the names ``entities`` (``e:`` marks),
        those naming the most of them first, then newest first; rank minus the names matched."""
        n = clamp_limit(limit)
        names = list(dict.fromkeys(name_mark(e) for e in entities if e.strip()))[:MAX_NAMES]
        if n == 0 or not names:
            return []
        self._marked()
        scope, params = _scope(where)
        rows = self._rows(
            f"SELECT count(*), {_COLUMNS} FROM message_marks k JOIN messages m ON m.id = k.message_id"
            f" WHERE k.mark IN ({', '.join('?' * len(names))}) AND {scope}"
            f" GROUP BY m.id ORDER BY 1 DESC, {_NEWEST} LIMIT ?", [*names, *params, n + _SPARE])
        return _hits(rows, where, n, ranked=True)

    def marks_of(self, message_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """The marks of each of ``message_ids`` that has some (sorted); the others are left out."""
        ids = sorted({int(i) for i in message_ids})
        self._marked()
        found: dict[int, list[str]] = {}
        for start in range(0, len(ids), _IDS_AT_ONCE):
            chunk = ids[start:start + _IDS_AT_ONCE]
            for message_id, mark in self._rows(
                    f"SELECT message_id, mark FROM message_marks WHERE message_id IN ({', '.join('?' * len(chunk))})"
                    " ORDER BY message_id, mark", chunk):
                found.setdefault(int(message_id), []).append(str(mark))
        return {i: tuple(marks) for i, marks in found.items()}

    def newest_message_at(self, where: HistoryFilter) -> datetime | None:
        """When the newest message ``where`` selects was said (``None``: it selects none)."""
        scope, params = _scope(where)
        rows = self._rows(f"SELECT {_COLUMNS} FROM messages m WHERE {scope} ORDER BY m.created_at DESC, m.id DESC"
                          f" LIMIT {_SPARE}", params)
        for row in rows:
            message = message_from_row(row)
            if visible(message, where):
                return message.created_at
        return None
