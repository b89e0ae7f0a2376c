"""How the PostgreSQL store runs a write or read again: when the server undid it to let another
go first (serialisation failures and deadlocks, a few times), or when its connection was lost
before anything was applied (for a bounded time, on new connections)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import RetryError, Retrying, retry_if_exception, wait_random_exponential

from fermix_memory.adapters.postgres.connection import is_retryable
from fermix_memory.application.errors import StorageBusy, StorageError

T = TypeVar("T")
WRITE_ATTEMPTS = 3
RECONNECT_S = 15.0  # how long a write or read lost with its connection is tried again on new ones


class Unsent(Exception):
    """The connection was lost before COMMIT was sent (or during a read): nothing was applied,
    so the work may run again on another connection."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def retried(exc: BaseException) -> bool:
    return isinstance(exc, Unsent) or is_retryable(exc)


def stop(state: Any) -> bool:
    """Serialisation failures: WRITE_ATTEMPTS attempts in all (the first was made before the
    loop); a lost connection: RECONNECT_S seconds."""
    if isinstance(state.outcome.exception(), Unsent):
        return bool(state.seconds_since_start >= RECONNECT_S)
    return bool(state.attempt_number >= WRITE_ATTEMPTS - 1)


def retrying(once: Callable[[], T], doing: str) -> T:
    """``once()``, again when the server undid it to let another go first (a few times) or when
    its connection was lost before anything was applied (for a bounded time, on new
    connections: the pool reconnects when the server is back)."""
    try:
        return once()  # the first attempt without building a retry loop: most calls need none
    except Exception as exc:
        if not retried(exc):
            raise
    try:
        for attempt in Retrying(retry=retry_if_exception(retried), stop=stop, reraise=False,
                                wait=wait_random_exponential(multiplier=0.05, max=1)):
            with attempt:
                return once()
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        if isinstance(cause, Unsent):
            raise StorageError(f"{doing}: the PostgreSQL server could not be reached for {RECONNECT_S:g} s;"
                               f" nothing was applied: {' '.join(str(cause).split())}") from None
        raise StorageBusy(f"{doing}: the write was undone by the server {WRITE_ATTEMPTS} times: {cause}") from None
    raise AssertionError("unreachable")  # pragma: no cover  # Retrying returns or raises
