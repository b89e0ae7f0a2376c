"""A stored turn's marks: the days it speaks of and the names it mentions, the keys of the
``message_marks`` projection that recall reads by date and by name.

Pure: relative phrases ("last week", "on Monday") are resolved against the turn's own time, so
the marks of a turn never change once it is said, and a replay of the log makes the same ones."""

from __future__ import annotations

from datetime import datetime

from fermix_memory.domain.entities import entities_in
from fermix_memory.domain.mark_keys import day_mark, name_mark
from fermix_memory.domain.time_expressions import mentioned_days

MAX_MARKS = 32  # per turn: a long text names many things, its first ones are kept
MAX_MARK_CHARS = 100  # per mark: a longer name is not a name
# Only the head of a turn is read for marks: a pasted document or a tool's output would cost the
# write its length in parsing, for marks past MAX_MARKS anyway.
MARKED_CHARS = 4000


def marks_of(text: str, said_at: datetime) -> tuple[str, ...]:
    """The marks of a turn said at ``said_at``, read in its first :data:`MARKED_CHARS` characters:
    its days (``d:`` + ISO day), then its names (``e:`` + name), each once, in order, at most
    :data:`MAX_MARKS` of at most :data:`MAX_MARK_CHARS` characters each (a longer one is left out)."""
    if not text:
        return ()
    text = text[:MARKED_CHARS]
    days, names = mentioned_days(text, said_at), entities_in(text)
    if not names:  # days only: each mark once and short already
        return tuple(map(day_mark, days[:MAX_MARKS]))
    found = [name_mark(name) for name in names if name.strip()]
    if days:
        found = [*map(day_mark, days), *found]
    kept = [m for m in dict.fromkeys(found) if len(m) <= MAX_MARK_CHARS]
    return tuple(kept[:MAX_MARKS])
