"""The memory home: which folder it is, what it holds (``config.toml``, ``memory.db``, the log
head kept beside the database) and opening its SQLite store as :func:`bootstrap` does."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_memory.adapters.config_toml import load_settings
from fermix_memory.application.errors import ConfigError, HomeNotFound, StorageError
from fermix_memory.application.settings import Settings, settings_from_argument

if TYPE_CHECKING:
    from fermix_memory.adapters.sqlite.event_store import SqliteEventStore

DEFAULT_HOME = Path("~/.fermix")
DB_NAME = "memory.db"
CONFIG_NAME = "config.toml"
HEAD_NAME = "head"  # the last log head this home saw, outside the database (ADR-0011)


def resolve_home(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """``home`` if given, else ``$FERMIX_HOME``, else ``~/.fermix``."""
    env = os.environ if env is None else env
    if home is not None:
        return Path(home).expanduser()
    if env.get("FERMIX_HOME"):
        return Path(env["FERMIX_HOME"]).expanduser()
    return DEFAULT_HOME.expanduser()


def resolve_settings(home: Path, config: Settings | Mapping[str, Any] | None) -> Settings:
    """``config`` as settings; ``None``: the home's own ``config.toml`` (defaults when it has none)."""
    if config is None:
        return load_settings(home / CONFIG_NAME)
    if isinstance(config, Settings):
        return config
    if isinstance(config, Mapping):
        return settings_from_argument(config)
    raise ConfigError("config must be a Settings object, a mapping or None")


def require_home(home: Path) -> None:
    """Raise :class:`HomeNotFound` unless ``home`` holds a ``memory.db`` (nothing is created)."""
    if not (home / DB_NAME).is_file():
        what = "no such folder" if not home.exists() else f"no {DB_NAME} in it"
        raise HomeNotFound(
            f"no memory home at {home} ({what}); 'fermix setup init', 'fermix history import'"
            " or the embedding API create one"
        )


def make_home(home: Path) -> None:
    """Create the home folder (and its parents) when missing."""
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StorageError(f"cannot create the memory home {home}: {error.strerror or error}") from None


def open_store(home: Path, settings: Settings | None = None, *, readonly: bool = False) -> SqliteEventStore:
    """The event store of ``home`` as :func:`bootstrap` opens it (``settings``: the home's own
    config when not given)."""
    from fermix_memory.adapters.sqlite.event_store import SqliteEventStore

    settings = settings or resolve_settings(home, None)
    return SqliteEventStore(home / DB_NAME, durability=settings.memory.durability, head_file=home / HEAD_NAME,
                            readonly=readonly)
