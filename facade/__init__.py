"""fermix-memory: durable, auditable memory for LLM agents.

Import :class:`MemorySystem`, open it on a home folder and talk through a session::

    with MemorySystem.open("~/.fermix") as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        s.append("user", "I live in Paris")
"""

from fermix_memory.application.commands import RoleName, ScopeName, SourceName, StyleName, TrustName, WriterName
from fermix_memory.application.compaction import CompactionResult
from fermix_memory.application.errors import (
    BackgroundTimeout,
    ConcurrencyConflict,
    ConfigError,
    DatabaseTooNew,
    ForeignDatabase,
    HomeNotFound,
    IntegrityError,
    MemoryClosed,
    ModelError,
    NotFound,
    PermissionDenied,
    ReadOnlyStore,
    StorageBusy,
    StorageError,
)
from fermix_memory.application.forget import ForgetReport
from fermix_memory.application.memory_writes import OperationOutcome
from fermix_memory.application.ports import ChatMessage, ChatModel, ChatRequest, ChatResponse, MemoryHit, MessageHit
from fermix_memory.application.recall import RecallResult
from fermix_memory.application.reviewer import ReviewResult
from fermix_memory.application.settings import Settings
from fermix_memory.application.turns import CommandResult, PreflightResult
from fermix_memory.domain.errors import DomainError, FermixError, InvalidArgument, InvalidNumber
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, ReplaceOperation
from fermix_memory.domain.values import ConversationKey
from fermix_memory.entrypoints.api import MemorySystem
from fermix_memory.entrypoints.api_turns import AnthropicPrompt, OpenAIPrompt, Prompt
from fermix_memory.entrypoints.session import Session

__all__ = [
    "AddOperation",
    "AnthropicPrompt",
    "ArchiveOperation",
    "BackgroundTimeout",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "CommandResult",
    "CompactionResult",
    "ConcurrencyConflict",
    "ConfigError",
    "ConversationKey",
    "DatabaseTooNew",
    "DomainError",
    "FermixError",
    "ForeignDatabase",
    "ForgetReport",
    "HomeNotFound",
    "IntegrityError",
    "InvalidArgument",
    "InvalidNumber",
    "Memory",
    "MemoryClosed",
    "MemoryHit",
    "MemorySystem",
    "Message",
    "MessageHit",
    "ModelError",
    "NotFound",
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
    "ScopeName",
    "Session",
    "Settings",
    "SourceName",
    "StorageBusy",
    "StorageError",
    "StyleName",
    "TrustName",
    "WriterName",
]
