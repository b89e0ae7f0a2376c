"""The optional extras behind the ways in (``[mcp]``, ``[openai-agents]``, ``[langgraph]``).

An integration module calls :func:`require` before it imports its framework, so that a host
without the extra gets one clear error naming what to install, not a bare ``ModuleNotFoundError``
from deep inside the module.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fermix_memory.domain.errors import FermixError


class MissingExtra(FermixError, ImportError):
    """An integration was imported without the optional extra that brings its framework."""


def require(extra: str, module: str) -> ModuleType:
    """Import ``module`` (a package of the ``extra``), or raise :class:`MissingExtra` naming the
    extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(
            f"this integration needs the [{extra}] extra: pip install 'fermix-memory[{extra}]' "
            f"(could not import {module}: {exc})"
        ) from exc
