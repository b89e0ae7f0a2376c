"""fermix-memory: durable, auditable memory for LLM agents.

Import :class:`MemorySystem`, open it on a home folder and talk through a session::

    with MemorySystem.open("~/.fermix") as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        s.append("user", "I live in Paris")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fermix_memory.application.commands import (
        ModeName,
        RoleName,
        ScopeName,
        SourceName,
        StyleName,
        TrustName,
        WriterName,
    )
    from fermix_memory.application.compaction import CompactionResult
    from fermix_memory.application.errors import (
        BackgroundTimeout,
        ConcurrencyConflict,
        ConfigError,
        DatabaseTooNew,
        EventFileError,
        ForeignDatabase,
        HomeNotFound,
        IntegrityError,
        MemoryClosed,
        ModelError,
        NotFound,
        PermissionDenied,
        ReadOnlyStore,
        SemanticRecallUnavailable,
        StorageBusy,
        StorageError,
        UnfinishedCopy,
    )
    from fermix_memory.application.forget import ConversationForgetReport, ForgetReport, MemoryForgetReport
    from fermix_memory.application.memory_writes import OperationOutcome
    from fermix_memory.application.model_ports import ChatMessage, ChatModel, ChatRequest, ChatResponse
    from fermix_memory.application.query_ports import KeyedValue, MemoryHit, MessageHit, NumberBound
    from fermix_memory.application.recall import RecallResult
    from fermix_memory.application.reviewer import ReviewResult
    from fermix_memory.application.settings import Settings
    from fermix_memory.application.turns import CommandResult, PreflightResult
    from fermix_memory.domain.errors import DomainError, FermixError, InvalidArgument, InvalidIdentifier, InvalidNumber
    from fermix_memory.domain.jobs import JobRun, JobStatus, MemorySource, ScheduledJob
    from fermix_memory.domain.memory import Memory
    from fermix_memory.domain.messages import Message
    from fermix_memory.domain.operations import AddOperation, ArchiveOperation, ReplaceOperation
    from fermix_memory.domain.values import ConversationKey
    from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
    from fermix_memory.entrypoints.api.async_session import AsyncSession
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.api.session import Session
    from fermix_memory.entrypoints.api.turns import AnthropicPrompt, OpenAIPrompt, Prompt

# Each public name and the module that defines it: imported on first use, so that starting the
# ``fermix`` command (whose modules live in this package) loads only what its command needs.
_HOMES = {
    "AddOperation": "fermix_memory.domain.operations",
    "AnthropicPrompt": "fermix_memory.entrypoints.api.turns",
    "ArchiveOperation": "fermix_memory.domain.operations",
    "AsyncMemorySystem": "fermix_memory.entrypoints.api.async_memory_system",
    "AsyncSession": "fermix_memory.entrypoints.api.async_session",
    "BackgroundTimeout": "fermix_memory.application.errors",
    "ChatMessage": "fermix_memory.application.model_ports",
    "ChatModel": "fermix_memory.application.model_ports",
    "ChatRequest": "fermix_memory.application.model_ports",
    "ChatResponse": "fermix_memory.application.model_ports",
    "CommandResult": "fermix_memory.application.turns",
    "CompactionResult": "fermix_memory.application.compaction",
    "ConcurrencyConflict": "fermix_memory.application.errors",
    "ConfigError": "fermix_memory.application.errors",
    "ConversationKey": "fermix_memory.domain.values",
    "DatabaseTooNew": "fermix_memory.application.errors",
    "DomainError": "fermix_memory.domain.errors",
    "EventFileError": "fermix_memory.application.errors",
    "FermixError": "fermix_memory.domain.errors",
    "ForeignDatabase": "fermix_memory.application.errors",
    "ForgetReport": "fermix_memory.application.forget",
    "ConversationForgetReport": "fermix_memory.application.forget",
    "MemoryForgetReport": "fermix_memory.application.forget",
    "HomeNotFound": "fermix_memory.application.errors",
    "IntegrityError": "fermix_memory.application.errors",
    "InvalidArgument": "fermix_memory.domain.errors",
    "InvalidIdentifier": "fermix_memory.domain.errors",
    "InvalidNumber": "fermix_memory.domain.errors",
    "JobRun": "fermix_memory.domain.jobs",
    "JobStatus": "fermix_memory.domain.jobs",
    "MemorySource": "fermix_memory.domain.jobs",
    "ScheduledJob": "fermix_memory.domain.jobs",
    "KeyedValue": "fermix_memory.application.query_ports",
    "Memory": "fermix_memory.domain.memory",
    "MemoryClosed": "fermix_memory.application.errors",
    "MemoryHit": "fermix_memory.application.query_ports",
    "MemorySystem": "fermix_memory.entrypoints.api.memory_system",
    "Message": "fermix_memory.domain.messages",
    "MessageHit": "fermix_memory.application.query_ports",
    "ModelError": "fermix_memory.application.errors",
    "NotFound": "fermix_memory.application.errors",
    "NumberBound": "fermix_memory.application.query_ports",
    "OpenAIPrompt": "fermix_memory.entrypoints.api.turns",
    "OperationOutcome": "fermix_memory.application.memory_writes",
    "PermissionDenied": "fermix_memory.application.errors",
    "PreflightResult": "fermix_memory.application.turns",
    "Prompt": "fermix_memory.entrypoints.api.turns",
    "ReadOnlyStore": "fermix_memory.application.errors",
    "SemanticRecallUnavailable": "fermix_memory.application.errors",
    "load_embedder": "fermix_memory.adapters.embedding",
    "RecallResult": "fermix_memory.application.recall",
    "ReplaceOperation": "fermix_memory.domain.operations",
    "ReviewResult": "fermix_memory.application.reviewer",
    "RoleName": "fermix_memory.application.commands",
    "ScopeName": "fermix_memory.application.commands",
    "Session": "fermix_memory.entrypoints.api.session",
    "Settings": "fermix_memory.application.settings",
    "SourceName": "fermix_memory.application.commands",
    "ModeName": "fermix_memory.application.commands",
    "StorageBusy": "fermix_memory.application.errors",
    "StorageError": "fermix_memory.application.errors",
    "UnfinishedCopy": "fermix_memory.application.errors",
    "StyleName": "fermix_memory.application.commands",
    "TrustName": "fermix_memory.application.commands",
    "WriterName": "fermix_memory.application.commands",
}

__all__ = [
    "AddOperation",
    "AnthropicPrompt",
    "ArchiveOperation",
    "AsyncMemorySystem",
    "AsyncSession",
    "BackgroundTimeout",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "CommandResult",
    "CompactionResult",
    "ConcurrencyConflict",
    "ConfigError",
    "ConversationForgetReport",
    "ConversationKey",
    "DatabaseTooNew",
    "DomainError",
    "EventFileError",
    "FermixError",
    "ForeignDatabase",
    "ForgetReport",
    "HomeNotFound",
    "IntegrityError",
    "InvalidArgument",
    "InvalidIdentifier",
    "InvalidNumber",
    "JobRun",
    "JobStatus",
    "KeyedValue",
    "Memory",
    "MemoryClosed",
    "MemoryForgetReport",
    "MemoryHit",
    "MemorySource",
    "MemorySystem",
    "Message",
    "MessageHit",
    "ModeName",
    "ModelError",
    "NotFound",
    "NumberBound",
    "OpenAIPrompt",
    "OperationOutcome",
    "PermissionDenied",
    "PreflightResult",
    "Prompt",
    "ReadOnlyStore",
    "RecallResult",
    "ReplaceOperation",
    "ReviewResult",
    "RoleName",
    "ScheduledJob",
    "ScopeName",
    "SemanticRecallUnavailable",
    "Session",
    "Settings",
    "SourceName",
    "StorageBusy",
    "StorageError",
    "StyleName",
    "TrustName",
    "UnfinishedCopy",
    "WriterName",
    "load_embedder",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'fermix_memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
