"""A fact's own expiry (ADR-0082): the time from which the retention run erases its row.

A writer names it as ISO 8601 text with an offset (or a timezone-aware ``datetime``); it is kept
in UTC, so that the stored texts compare as the times they name. The word :data:`NEVER` takes an
expiry off a row. A statement that names none leaves the row's expiry as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.values import preview

NEVER = "never"
EXAMPLE = "2027-03-01T09:00Z"
MAX_EXPIRY_CHARS = 64  # far above any ISO 8601 time, far below what could be costly to read


def expiry_time(raw: object, what: str = "expires_at") -> datetime | None:
    """``raw`` as a UTC time, or ``None`` for :data:`NEVER`. Raises :class:`InvalidArgument` for
    anything else: a value that is neither text nor a datetime, text that is no ISO 8601 time, a
    time without a zone, a time that cannot be told in UTC (beyond the year 9999)."""
    if isinstance(raw, str):
        text = raw.strip()
        if text == NEVER:
            return None
        try:
            if len(text) > MAX_EXPIRY_CHARS:
                raise ValueError(text)
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgument(f"{what} {preview(raw)} is not an ISO 8601 time (years 1 to 9999) such as"
                                  f" {EXAMPLE}, nor {NEVER!r}") from None
    elif isinstance(raw, datetime):
        moment = raw
    else:
        raise InvalidArgument(f"{what} must be an ISO 8601 text such as {EXAMPLE}, got {preview(raw)}")
    if moment.utcoffset() is None:
        raise InvalidArgument(f"{what} {moment.isoformat()} has no time zone: give one, e.g. {EXAMPLE}")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidArgument(f"{what} {moment.isoformat()} is beyond the year 9999 in UTC") from None


class PastExpiry(InvalidArgument):
    """An expiry that is not after the time of the write: the fact would be due already."""


def future_expiry(moment: datetime, now: datetime, what: str = "expires_at") -> datetime:
    """``moment`` if it is after ``now``; a fact that is due already is never stored."""
    if moment <= now:
        raise PastExpiry(f"{what} {moment.isoformat()} is not after now ({now.isoformat()}):"
                         " a fact that has expired is not stored")
    return moment


def stated_expiry(raw: object, current: datetime | None, at: datetime, what: str = "expires_at") -> datetime | None:
    """A row's expiry after a statement at ``at`` naming ``raw``: ``current`` (the row's, ``None``
    for a new row) when it names none, ``None`` for :data:`NEVER`, else the time it names, which
    must be after ``at`` (raises :class:`InvalidArgument`, :class:`PastExpiry` for a time past)."""
    if raw is None:
        return current
    moment = expiry_time(raw, what)
    return None if moment is None else future_expiry(moment, at, what)
