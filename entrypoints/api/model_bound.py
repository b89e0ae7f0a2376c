"""Which calls of the sync API may wait on a model: the worker lane runs them on threads of their
own (api/lane.py, ADR-0055), so that they never hold up the calls that read and append.

Kept apart from the lane so that marking a method imports nothing (no asyncio at start-up)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_MARKED: set[object] = set()


def model_bound(method: F) -> F:
    """Mark ``method`` as one that may wait on a model provider or an embedding model (a review,
    a compaction, a close that lets them finish); it is returned unchanged."""
    _MARKED.add(method)
    return method


def is_model_bound(call: object) -> bool:
    """Whether ``call`` (a marked function, a method bound to it, or a ``functools.partial`` of
    either) may wait on a model."""
    while isinstance(call, functools.partial):
        call = call.func
    return getattr(call, "__func__", call) in _MARKED
