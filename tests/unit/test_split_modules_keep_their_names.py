"""The modules split by purpose keep the names other code imports from them, and each stays small."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

KEPT = {
    "fermix_memory.adapters.sqlite.audit": (
        "verify_database", "replay_into", "fold_log", "check_chain", "table_checksums",
        "VerifyReport", "Progress", "fts_integrity",
    ),
    # what every store's audit shares (ADR-0056)
    "fermix_memory.adapters.sql.audit": ("log_entries", "LogEntry", "VerifyReport", "Progress"),
    "fermix_memory.entrypoints.cli": (
        "main", "run", "build_parser", "command_tree", "log_lines", "wants_json", "shows_default", "Progress",
        "EXIT_OK", "EXIT_ERROR",
    ),
    "fermix_memory.domain.events": (
        "Provenance", "OwnerRef", "Erasure", "NO_OWNER_CONTENT", "DomainEvent", "MessageAppended",
        "ConversationWindowCleared", "HistoryCompacted", "CompactionFailed", "MemoryAdded", "MemoryReplaced",
        "MemoryArchived", "MemoryRestored", "OperationRefused", "ReviewClaimed", "ReviewCompleted", "ReviewFailed",
        "ReviewSkipped", "MemorySourceRegistered", "ScheduledJobSaved", "JobRunRecorded", "ResourceRevised",
        "ResourceRolledBack", "ModelCallTraced", "OwnerForgotten", "ALL_EVENTS", "EVENTS_BY_KIND", "REFERRING_KINDS",
    ),
    "fermix_memory.domain.reviewer_answer": (
        "NOTHING_TO_SAVE", "MAX_ANSWER_BYTES", "MAX_OPERATIONS", "MAX_MEMORY_ID", "OPERATIONS_SCHEMA_NAME",
        "OPERATIONS_SCHEMA", "parse_reviewer_answer", "operation_to_dict",
    ),
    "fermix_memory.adapters.providers.rules.extractor": ("extract_operations", "MAX_TEXT_CHARS"),
    "fermix_memory.application.tools": (
        "MemoryTools", "ToolContext", "InvalidToolContext", "TOOL_NAMES", "MAX_ARGUMENT_CHARS", "tool_definitions",
        "openai_tool_definitions", "anthropic_tool_definitions", "validate_arguments", "parse_arguments",
    ),
    "fermix_memory.application.settings": (
        "Settings", "MemorySettings", "CompactionSettings", "ProviderSettings", "TimeoutSettings",
        "RealtimeSettings", "SECTIONS", "knobs_of", "settings_from_mapping",
    ),
}


@pytest.mark.parametrize("module", sorted(KEPT))
def test_split_module_still_exports_its_names(module: str) -> None:
    loaded = importlib.import_module(module)
    assert [name for name in KEPT[module] if not hasattr(loaded, name)] == []


@pytest.mark.parametrize("module", sorted(KEPT))
def test_split_module_and_its_parts_stay_under_350_lines(module: str) -> None:
    path = Path(importlib.import_module(module).__file__ or "")
    stem = path.stem.removesuffix("s")  # tools -> tool_*, settings -> settings_*
    parts = [path, *path.parent.glob(f"{stem}_*.py"), *path.parent.glob(f"{path.stem}_*.py")]
    too_long = {p.name: n for p in set(parts) if (n := len(p.read_text(encoding="utf-8").splitlines())) > 350}
    assert too_long == {}


def test_no_domain_module_is_over_350_lines() -> None:
    domain = Path(importlib.import_module("fermix_memory.domain.values").__file__ or "").parent
    too_long = {p.name: n for p in domain.glob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > 350}
    assert too_long == {}
