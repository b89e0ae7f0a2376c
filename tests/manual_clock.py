"""A clock tests move by hand (the product reads time only through its Clock port)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class TestClock:
    """Aware UTC time that only moves when the test says so."""

    __test__ = False

    def __init__(self, start: datetime = START) -> None:
        self.t = start

    def now(self) -> datetime:
        return self.t

    def advance(self, **delta: float) -> None:
        self.t += timedelta(**delta)
