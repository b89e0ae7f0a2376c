"""Fixtures of a home made as a host makes it, and of its SQLite storage opened without the
background upkeep: for tests that drive a catch-up step by step (ADR-0085, ADR-0091)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.home import open_store
from fermix_memory.entrypoints.storage import Storage, sqlite_storage


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with MemorySystem.open(tmp_path / "home"):  # a home made as a host makes it
        pass
    return tmp_path / "home"


@pytest.fixture
def storage(home: Path) -> Iterator[Storage]:
    opened = sqlite_storage(open_store(home))  # no background upkeep
    try:
        yield opened
    finally:
        opened.store.close()
