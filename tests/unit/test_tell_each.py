"""A listener that fails after a commit is logged and the others are still told (the write stands)."""

from __future__ import annotations

import logging

import pytest

from fermix_memory.adapters.sql.event_store import tell_each


def test_a_failing_listener_is_logged_and_the_next_one_is_still_told(caplog: pytest.LogCaptureFixture) -> None:
    told: list[str] = []

    def broken(value: str) -> None:
        raise RuntimeError("listener bug")

    with caplog.at_level(logging.ERROR, logger="fermix_memory.storage"):
        tell_each([broken, told.append], "events", "commit listener %r failed")
    assert told == ["events"]
    assert "commit listener" in caplog.text and "listener bug" in caplog.text
