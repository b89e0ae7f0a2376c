"""Homes of a test on either store: ``store_of`` (a fixture run once on SQLite, once on
PostgreSQL) gives, per home name, the configuration of its store — its own SQLite file, or its
own new PostgreSQL database (the same one every time the home is opened); ``opened`` opens it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem

Config = Callable[[str], "dict[str, Any] | None"]


@pytest.fixture(params=["sqlite", "postgres"])
def store_of(request: pytest.FixtureRequest) -> Iterator[Config]:
    if request.param == "sqlite":
        yield lambda name: None
        return
    server = request.getfixturevalue("postgres_server")
    urls: dict[str, str] = {}

    def config(name: str) -> dict[str, Any]:
        if name not in urls:
            urls[name] = server.fresh_database()
        return {"fermix_core": {"storage": {"url": urls[name]}}}

    yield config
    for url in urls.values():
        server.drop_database(url)


def opened(tmp_path: Path, name: str, store_of: Config) -> MemorySystem:
    return MemorySystem.open(tmp_path / name, config=store_of(name))
