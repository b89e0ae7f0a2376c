"""The event loop ``fermix serve`` runs on (ADR-0094): uvloop's when it is installed, asyncio's
otherwise; the server answers the same either way (tests/server/test_serve_process.py serves
real turns on whichever this environment has)."""

from __future__ import annotations

import asyncio
import sys

import pytest

pytest.importorskip("uvicorn")

from fermix_memory.entrypoints.server.command import event_loop_factory


async def _answer() -> str:
    await asyncio.sleep(0)
    return "answered"


def test_without_uvloop_the_server_runs_on_asyncios_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if it were not installed
    assert event_loop_factory() is None
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        assert runner.run(_answer()) == "answered"
        assert isinstance(runner.get_loop(), asyncio.BaseEventLoop)


def test_with_uvloop_installed_the_server_runs_on_its_loop() -> None:
    uvloop = pytest.importorskip("uvloop")
    factory = event_loop_factory()
    assert factory is not None
    with asyncio.Runner(loop_factory=factory) as runner:
        assert runner.run(_answer()) == "answered"
        assert isinstance(runner.get_loop(), uvloop.Loop)
