"""The LangGraph store and LangChain tools tests share a fresh memory home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fermix_memory import MemorySystem


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as memory:
        yield memory
