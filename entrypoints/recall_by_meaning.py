"""Whether a memory recalls by meaning, and with which embedder (ADR-0043, ADR-0044).

``[fermix_core.memory] recall_by_meaning`` is ``"auto"`` by default: on when the
``[semantic]`` extra is installed, with the model loading at the first text it embeds, and off
(today's keyword recall, no error) on a core install. ``true`` needs the extra and loads the
model when the memory opens; ``false`` never loads it. ``FERMIX_RECALL_BY_MEANING`` (``auto``,
``true`` or ``false``), when set, wins over the file, so a process can be told without editing
the home's settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fermix_memory.application.embedder import Embedder
from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings import Settings

RECALL_BY_MEANING_ENV = "FERMIX_RECALL_BY_MEANING"
_ENV_VALUES: dict[str, bool | None] = {"auto": None, "true": True, "false": False}


def recall_by_meaning(settings: Settings, env: Mapping[str, str] | None = None) -> bool | None:
    """The setting in effect: ``True``, ``False`` or ``None`` for auto."""
    env = os.environ if env is None else env
    raw = env.get(RECALL_BY_MEANING_ENV, "").strip()
    if not raw:
        return settings.memory.recall_by_meaning
    try:
        return _ENV_VALUES[raw.lower()]
    except KeyError:
        raise ConfigError(f"{RECALL_BY_MEANING_ENV} must be auto, true or false, not {raw!r}") from None


def chosen_embedder(settings: Settings, env: Mapping[str, str] | None = None) -> Embedder | None:
    """The embedder a memory opened with these settings uses, or ``None`` (keyword recall only).

    Raises :class:`~fermix_memory.application.errors.SemanticRecallUnavailable` when recall by
    meaning is turned on (``true``) and the extra is missing or its model cannot be loaded."""
    wanted = recall_by_meaning(settings, env)
    if wanted is False:
        return None
    from fermix_memory.adapters.embedding import extra_installed, load_embedder  # the extra's, only now

    if wanted is None:
        return load_embedder(lazy=True) if extra_installed() else None
    return load_embedder()
