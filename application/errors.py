"""Errors the use cases raise; all derive from :class:`FermixError`."""

from __future__ import annotations

from fermix_memory.domain.errors import FermixError


class StorageError(FermixError):
    """The store failed; nothing of the failed write was applied."""


class StorageBusy(StorageError):
    """The database stayed locked by another writer through every retry."""


class MemoryClosed(StorageError):
    """The memory system was closed: a call made after ``close()``, or background work that was
    still queued when it closed (a review's future then raises this). Nothing of it ran; the next
    turn queues a dropped review or compaction again."""


class ConcurrencyConflict(StorageError):
    """A write expected a stream at one version and found another: someone appended first.
    Nothing of the write was applied; read the stream again and decide again."""


class ReadOnlyStore(StorageError):
    """The memory was opened read-only (or its files cannot be written): a write was refused."""


class DatabaseTooNew(StorageError):
    """``memory.db`` was written by a newer fermix-memory; it is left untouched."""


class ForeignDatabase(StorageError):
    """The file is not a fermix-memory database (or is corrupt); it is left untouched."""


class IntegrityError(StorageError):
    """The event log or a projection failed verification."""


class EventFileError(IntegrityError):
    """An event file that cannot be imported (a bad line, a broken chain) or a target home that
    refuses it (ADR-0030): nothing was written."""


class UnfinishedCopy(StorageError):
    """The store holds a copy of another home that was cut off before its last events
    (``fermix storage migrate`` stopped midway): it is refused until ``storage migrate --resume``
    finishes it (ADR-0051). Nothing was opened or changed."""


class NotFound(FermixError, LookupError):
    """A memory row, resource revision or other named thing does not exist."""


class BackgroundTimeout(FermixError, TimeoutError):
    """Background work (reviews, compaction) was still running when the wait timed out."""


class HomeNotFound(NotFound):
    """There is no memory home (no ``memory.db``) where a command that must not create one looked."""


class ConfigError(FermixError):
    """``config.toml`` has an unknown key, a wrong type or a bad value (names key and file)."""


class ModelError(FermixError):
    """A model provider call failed."""


class ModelUnavailable(ModelError):
    """Timeout, connection error, HTTP 429 or 5xx: the route tries the next provider."""


class ModelBadResponse(ModelError):
    """The provider answered, but not in its protocol's shape (or with a 4xx other than 429)."""


class UnusableAnswer(ModelBadResponse):
    """An answer the request's own check refused. ``str()`` may quote the answer (it is sent
    back to the model for a repair turn); ``without_answer`` names the problem without any of
    the answer's words: what model-call traces keep, since they are nobody's to forget."""

    def __init__(self, message: str, *, without_answer: str) -> None:
        super().__init__(message)
        self.without_answer = without_answer


class ProviderKeyMissing(ConfigError, ModelError):
    """A provider's ``api_key_env`` names a variable that is not set; raised only when that
    provider is called (the route then tries the next one). Names the variable, never a value."""


class RouteExhausted(ModelError):
    """Every provider of a route failed; ``errors`` lists each provider's failure."""

    def __init__(self, message: str, errors: list[ModelError]) -> None:
        super().__init__(message)
        self.errors = errors


class PermissionDenied(FermixError):
    """A guest asked for an operator-only action (chat commands, directives)."""


class SemanticRecallUnavailable(ConfigError):
    """Recall by meaning was asked for, but the optional ``[semantic]`` extra (the embedding model
    and its runtime) is not installed, or its model cannot be loaded. Keyword recall still works."""
