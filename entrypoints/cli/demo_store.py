"""Which store ``fermix demo`` writes into (ADR-0051): the SQLite file of its own home, whatever
``FERMIX_DATABASE_URL`` or the home's ``config.toml`` names, unless ``--database-url`` names a
PostgreSQL database. That database must hold no events, or only those this demo home wrote
there: the home's mark records each database the demo ran in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fermix_memory.entrypoints.api.memory_system import MemorySystem, open_app
from fermix_memory.entrypoints.cli.output import UsageError
from fermix_memory.entrypoints.cli.setup import DEMO_MARK


def demo_memory(home: Path, url: str | None) -> MemorySystem:
    """The demo's memory in ``home`` (already marked by ``demo_home``): its SQLite file, or the
    database at ``url``."""
    from fermix_memory.application.settings_storage import storage_url_problem
    from fermix_memory.entrypoints.home import HEAD_NAME, open_store, resolve_settings
    from fermix_memory.entrypoints.storage import open_postgres

    settings = resolve_settings(home, None)
    if url is None:
        return _opened(home, open_store(home, settings))  # a given store: no URL of the environment applies
    problem = storage_url_problem(url)
    if problem is not None:
        raise UsageError(f"--database-url is {problem}")
    store = open_postgres(url, chains=settings.storage.chains, head_file=home / HEAD_NAME).store
    try:
        _claim(home / DEMO_MARK, url, store.head().position)
    except BaseException:
        store.close()
        raise
    return _opened(home, store)


def _claim(mark: Path, url: str, events: int) -> None:
    """Record ``url`` in the demo's mark, unless the database holds events this home did not write."""
    line = f"database: {url}"
    try:
        text = mark.read_text(encoding="utf-8")
        if line in text.splitlines():
            return
        if events:
            raise UsageError(f"{url} already holds {events} events that this demo home did not write; the demo"
                             " never writes into such a database: name an empty one with --database-url")
        mark.write_text(text + line + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot record the database in {mark}: {exc.strerror or exc}") from None


def _opened(home: Path, store: Any) -> MemorySystem:
    try:
        return MemorySystem(open_app(home, store=store))
    except BaseException:
        store.close()  # bootstrap closes a given store only once it has wired it
        raise
