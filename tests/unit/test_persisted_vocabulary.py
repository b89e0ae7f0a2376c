"""Every string that is stored, exported or read by the model, written out as literals.

A ``memory.db`` keeps event kinds, enum values, refusal reasons and metadata keys for ever, an
exported history keeps its line keys, and the model recognises its fences by their tags: a
changed spelling makes old homes unreadable or the fence unrecognisable, and a comparison of a
constant with itself would not notice. So each value is written here as a literal, and a value
that is renamed, dropped or added anywhere in the package fails this test until it is written
here too (and, for a stored value, an upcaster or a migration is written with it).
"""

from __future__ import annotations

import ast
import enum
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import attrs

import fermix_memory
from fermix_memory.adapters.prompt_files_fs import FILE_NAMES
from fermix_memory.application import history, prompt_files, streams, turns
from fermix_memory.domain import checkpoint, fence, jobs, operations, reviewer_answer, tool_calls
from fermix_memory.domain import events as ev
from fermix_memory.domain.values import ConversationKey

ROOT = Path(__file__).resolve().parents[2]

# kind -> schema version, for every event class of the log.
EVENT_KINDS = {
    "message.appended": 1,
    "message.retracted": 1,
    "conversation.window_cleared": 1,
    "conversation.compacted": 1,
    "conversation.compaction_failed": 1,
    "memory.added": 3,
    "memory.replaced": 3,
    "memory.archived": 2,
    "memory.restored": 1,
    "memory.operation_refused": 1,
    "review.claimed": 1,
    "review.completed": 1,
    "review.failed": 1,
    "review.skipped": 1,
    "memory_source.registered": 1,
    "scheduled_job.saved": 1,
    "job_run.recorded": 1,
    "resource.revised": 1,
    "resource.rolled_back": 1,
    "model.call_traced": 1,
    "owner.forgotten": 2,
    "memory.forgotten": 1,
    "conversation.forgotten": 1,
    "erasure.receipted": 1,
    "retention.ran": 1,
    "export_keys.destroyed": 1,
    "import.payloads_lost": 1,
}

# Every enum of the package (module.Class) -> its members' names and values.
ENUMS = {
    "fermix_memory.domain.values.Trust": {"OPERATOR": "operator", "GUEST": "guest"},
    "fermix_memory.domain.values.PromoteTarget": {"USER_MD": "user_md", "MEMORY_MD": "memory_md"},
    "fermix_memory.domain.values.Category": {
        "IDENTITY": "identity", "PREFERENCE": "preference", "INTEREST": "interest", "GOAL": "goal",
        "CONTEXT": "context", "DIRECTIVE": "directive",
    },
    "fermix_memory.domain.values.ScopeType": {
        "OWNER": "owner", "AGENT": "agent", "CONVERSATION": "conversation", "JOB": "job",
    },
    "fermix_memory.domain.values.Role": {"USER": "user", "ASSISTANT": "assistant", "SYSTEM": "system", "TOOL": "tool"},
    "fermix_memory.domain.scopes.RecallScope": {"CURRENT": "current", "OWNER": "owner", "ALL": "all"},
    "fermix_memory.domain.scopes.RecallSource": {"MEMORIES": "memories", "HISTORY": "history", "ALL": "all"},
    "fermix_memory.domain.scopes.RecallMode": {"KEYWORD": "keyword", "SEMANTIC": "semantic", "HYBRID": "hybrid"},
    "fermix_memory.domain.scopes.WriterKind": {
        "REVIEWER": "reviewer", "TOOL": "tool", "JOB": "job", "OPERATOR": "operator",
    },
    "fermix_memory.domain.jobs.JobStatus": {"RUNNING": "running", "SUCCEEDED": "succeeded", "FAILED": "failed"},
    "fermix_memory.application.commands.Style": {"OPENAI": "openai", "ANTHROPIC": "anthropic"},
}

# The reasons admission records in memory.operation_refused (and returns to the host).
REFUSAL_REASONS = {
    "unknown_memory", "unknown_category", "guest_directive", "invalid_value", "empty_value", "value_too_long",
    "invalid_key", "invalid_confidence", "invalid_id", "not_visible", "no_scope", "category_changes_scope",
    "key_conflict", "older_than_operator", "invalid_expiry", "past_expiry",
}

# The keys of a line of an exported (and importable) history file.
HISTORY_LINE_KEYS = {
    "agent_id", "owner_id", "channel", "chat_id", "thread_scope", "role", "sender", "content", "kind", "trust",
    "created_at", "metadata", "message_id",
}

LAYERS = ("domain", "application", "adapters", "entrypoints")


def every_module() -> list[ModuleType]:
    """The package and every module of its four layers, imported."""
    modules = [fermix_memory]
    for layer in LAYERS:
        package = importlib.import_module(f"fermix_memory.{layer}")
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            modules.append(importlib.import_module(info.name))
    return modules


def all_subclasses(cls: type) -> set[str]:
    """The dotted names of every subclass (by name: attrs replaces a slotted class by a new one,
    and the replaced class may linger among the subclasses until it is collected)."""
    found = cls.__subclasses__()
    return {f"{c.__module__}.{c.__qualname__}" for c in found}.union(*(all_subclasses(c) for c in found))


def test_every_event_kind_and_schema() -> None:
    assert {cls.kind: cls.schema for cls in ev.ALL_EVENTS} == EVENT_KINDS
    assert set(ev.EVENTS_BY_KIND) == set(EVENT_KINDS)


def test_every_event_class_is_registered() -> None:
    every_module()
    assert all_subclasses(ev.DomainEvent) == {f"{c.__module__}.{c.__qualname__}" for c in ev.ALL_EVENTS}


def test_every_enum_and_its_values() -> None:
    found = {
        f"{value.__module__}.{value.__qualname__}": {m.name: m.value for m in value}
        for module in every_module() for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, enum.Enum) and value.__module__ == module.__name__
    }
    assert found == ENUMS


def test_refusal_reasons() -> None:
    tree = ast.parse((ROOT / "domain" / "admission.py").read_text(encoding="utf-8"))
    found = {
        node.args[0].value for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Refusal"
        and node.args and isinstance(node.args[0], ast.Constant)
    }
    assert found == REFUSAL_REASONS


def test_the_fences_and_headings_the_model_reads() -> None:
    tags = {name: value for name, value in vars(fence).items() if name.endswith("_TAG")}
    assert tags == {
        "OPEN_TAG": "<memory-context>", "CLOSE_TAG": "</memory-context>",
        "SUMMARY_OPEN_TAG": "<conversation-summary>", "SUMMARY_CLOSE_TAG": "</conversation-summary>",
        "NOTE_OPEN_TAG": "<conversation-note>", "NOTE_CLOSE_TAG": "</conversation-note>",
    }
    assert fence.USER_MD_HEADING == "# USER.md (about the user)"
    assert fence.MEMORY_MD_HEADING == "# MEMORY.md (working context and rules)"
    assert (fence.SAFE_LT, fence.SAFE_GT) == ("\u2039", "\u203a")


def test_the_reviewer_answer_vocabulary() -> None:
    assert reviewer_answer.NOTHING_TO_SAVE == "Nothing to save."
    assert (operations.AddOperation.op, operations.ReplaceOperation.op, operations.ArchiveOperation.op) == (
        "add", "replace", "archive")
    assert reviewer_answer.OPERATIONS_SCHEMA_NAME == "memory_operations"
    shapes = reviewer_answer.OPERATIONS_SCHEMA["properties"]["operations"]["items"]["anyOf"]  # type: ignore[index]
    assert [shape["properties"]["op"]["const"] for shape in shapes] == ["add", "replace", "archive"]
    assert shapes[0]["properties"]["category"]["enum"] == [
        "identity", "preference", "interest", "goal", "context", "directive"]


def test_resource_names_and_their_files() -> None:
    assert prompt_files.RESOURCE_NAMES == ("user_md", "memory_md")
    assert FILE_NAMES == {"user_md": "USER.md", "memory_md": "MEMORY.md"}


def test_stored_message_kinds_and_metadata_keys() -> None:
    assert attrs.fields_dict(ev.MessageAppended)["message_kind"].default == "text"
    assert (checkpoint.CHECKPOINT_KIND, checkpoint.CHECKPOINT_SENDER) == ("checkpoint", "compactor")
    assert checkpoint.QUOTED_OWNERS_KEY == "quoted_owners"
    assert history.IMPORT_KEY == "fermix_import_key"
    assert (tool_calls.TOOL_CALLS_KEY, tool_calls.TOOL_CALL_ID_KEY) == ("tool_calls", "tool_call_id")
    assert (jobs.JOB_SOURCE_TYPE, jobs.JOB_SOURCE_PREFIX) == ("job", "job:")


def test_what_the_openai_agents_session_stores() -> None:
    from fermix_memory.entrypoints.integrations import openai_agents as oa

    assert (oa.ITEM_KEY, oa.OPAQUE_KIND, oa.DEFAULT_CHANNEL) == ("openai_agents_item", "agents_item", "openai-agents")
    assert oa.item_record({"role": "user", "content": "hi"}).metadata == {
        "openai_agents_item": {"item": {"role": "user"}, "text_at": ["content"]}}
    assert oa.item_record({"type": "reasoning", "summary": []}).metadata == {
        "openai_agents_item": {"item": {"type": "reasoning", "summary": []}}}


def test_the_history_file_line_keys() -> None:
    assert history.IMPORT_KEYS == HISTORY_LINE_KEYS
    assert history.REQUIRED_IMPORT_KEYS == ("agent_id", "owner_id", "channel", "chat_id", "role", "sender", "content")


def test_event_stream_names() -> None:
    key = ConversationKey("tg", "1", "t")
    assert streams.conversation_stream("a b", key) == "conversation/a%20b/tg:1:t"
    assert streams.memory_stream("a", "o/1") == "memory/a/o%2F1"
    assert streams.review_stream("a", "o", key) == "review/a/o/tg:1:t"
    assert streams.resource_stream("a", "o", "user_md") == "resource/a/o/user_md"
    assert streams.owner_stream("a", "o") == "owner/a/o"
    assert streams.job_stream("j") == "job/j"
    assert streams.source_stream("s") == "source/s"
    assert streams.TRACE_STREAM == "trace/model-calls"


def test_chat_commands() -> None:
    assert turns.COMMANDS == ("/compact", "/new", "/clear")
