"""Memory tool definitions (one JSON-Schema source, two export formats) and the dispatcher's
argument validation, on in-memory fakes: no I/O."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.application.jobs import MemorySource
from fermix_memory.application.memory_writes import OperationOutcome
from fermix_memory.application.query_ports import MemoryHit, MessageHit
from fermix_memory.application.tools import (
    MAX_ARGUMENT_CHARS,
    TOOL_NAMES,
    InvalidToolContext,
    MemoryTools,
    ToolContext,
    anthropic_tool_definitions,
    openai_tool_definitions,
    tool_definitions,
    validate_arguments,
)
from fermix_memory.domain import events as ev
from fermix_memory.domain.admission import AdmissionPolicy, WriteContext
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.operations import Operation
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter
from fermix_memory.domain.values import Category, ConversationKey, Scope, ScopeType

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONV = ConversationKey("telegram", "42")


# --- fakes ------------------------------------------------------------------------------------


class NoRows:
    def by_id(self, memory_id: int) -> Memory | None:
        return None

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
        return None


class FakeWriter:
    """Runs the real admission policy on an empty store and records the events it decides."""

    def __init__(self) -> None:
        self.events: list[ev.DomainEvent] = []

    def apply(self, ops: Sequence[Operation], ctx: WriteContext) -> list[OperationOutcome]:
        outcomes = []
        for op in ops:
            events = AdmissionPolicy().decide(op, ctx, NoRows(), T0)
            self.events.extend(events)
            first = events[0]
            if isinstance(first, ev.OperationRefused):
                outcomes.append(OperationOutcome(op=op.op, status="refused", reason=first.reason,
                                                 detail=first.detail))
            else:
                outcomes.append(OperationOutcome(op=op.op, status="added", memory_id=len(self.events)))
        return outcomes


class FakeQueries:
    """Records the filters recall asks with; finds nothing."""

    def __init__(self) -> None:
        self.memory_filters: list[MemoryFilter] = []
        self.history_filters: list[HistoryFilter] = []

    def memory(self, memory_id: int) -> Memory | None:
        return None

    def memories(self, where: MemoryFilter, *, include_archived: bool = False) -> list[Memory]:
        self.memory_filters.append(where)
        return []

    def memory_by_key(self, where: MemoryFilter, key: str) -> list[Memory]:
        self.memory_filters.append(where)
        return []

    def search_memories(self, query: str, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        self.memory_filters.append(where)
        return []

    def messages(self, agent_id: str, conversation: ConversationKey, *, after_id: int = 0,
                 limit: int | None = None) -> list[Message]:
        return []

    def search_history(self, query: str, where: HistoryFilter, limit: int) -> list[MessageHit]:
        self.history_filters.append(where)
        return []

    def marks_of(self, message_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        return {}

    def history_naming(self, where: HistoryFilter, entities: Sequence[str], limit: int) -> list[MessageHit]:
        return []

    def history_in_days(self, where: HistoryFilter, first: date, last: date, limit: int) -> list[MessageHit]:
        return []

    def newest_message_at(self, where: HistoryFilter) -> datetime | None:
        return None


class FakeSources:
    def memory_sources(self, agent_id: str, owner_id: str, *, limit: int | None = None) -> list[MemorySource]:
        return [MemorySource(id="job:nightly", agent_id=agent_id, owner_id=owner_id, source_type="job",
                             name="Nightly", created_at=T0, updated_at=T0)]


def make_tools() -> tuple[MemoryTools, FakeWriter, FakeQueries]:
    writer, queries = FakeWriter(), FakeQueries()
    return MemoryTools(writer, queries, FakeSources()), writer, queries


GUEST = ToolContext(agent_id="ada", owner_id="alice", trust="guest", conversation=CONV)
JOB = ToolContext(agent_id="ada", owner_id="alice", trust="operator", job_source_id="job:nightly", run_id="r1")


# --- definitions ------------------------------------------------------------------------------

ALLOWED_KEYWORDS = {"type", "description", "minLength", "maxLength", "enum", "default", "minimum", "maximum"}


def test_definitions_are_json_schema_objects() -> None:
    definitions = tool_definitions()
    assert [d["name"] for d in definitions] == list(TOOL_NAMES) == ["memory_store", "memory_recall",
                                                                    "memory_sources_list"]
    for d in definitions:
        assert set(d) == {"name", "description", "parameters"}
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", d["name"])
        assert isinstance(d["description"], str) and 20 < len(d["description"]) < 1024
        params = d["parameters"]
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        for name, prop in params["properties"].items():
            assert set(prop) <= ALLOWED_KEYWORDS, name
            assert prop["type"] in ("string", "integer") and prop["description"]
            if "enum" in prop:
                assert prop["enum"] and len(set(prop["enum"])) == len(prop["enum"])
                assert all(isinstance(v, str) for v in prop["enum"])
            if "default" in prop:  # every default passes the property's own validation
                assert validate_arguments(params, {name: prop["default"]})[name] == prop["default"]
        json.dumps(d, allow_nan=False)


def test_definitions_fix_the_limits() -> None:
    store, recall_, sources = (d["parameters"] for d in tool_definitions())
    assert store["required"] == ["key", "value"]
    assert store["properties"]["key"]["maxLength"] == 64
    assert store["properties"]["value"]["maxLength"] == 2000  # the stored bound (ADR-0003)
    assert recall_["required"] == []
    assert recall_["properties"]["scope"]["enum"] == ["current", "owner", "all"]
    assert recall_["properties"]["source"]["enum"] == ["memories", "history", "all"]
    assert recall_["properties"]["scope"]["default"] == "current"
    assert recall_["properties"]["source"]["default"] == "memories"
    limit = recall_["properties"]["limit"]
    assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 50)
    assert sources["properties"] == {}


def test_openai_and_anthropic_exports_carry_the_same_schemas() -> None:
    neutral = tool_definitions()
    openai = openai_tool_definitions()
    anthropic = anthropic_tool_definitions()
    for d, o, a in zip(neutral, openai, anthropic, strict=True):
        assert set(o) == {"type", "function"} and o["type"] == "function"
        assert o["function"] == {"name": d["name"], "description": d["description"], "parameters": d["parameters"]}
        assert a == {"name": d["name"], "description": d["description"], "input_schema": d["parameters"]}
    json.dumps([openai, anthropic], allow_nan=False)


def test_exports_are_copies() -> None:
    openai_tool_definitions()[0]["function"]["parameters"]["properties"]["key"]["maxLength"] = 10**9
    anthropic_tool_definitions()[0]["input_schema"]["required"].clear()
    assert tool_definitions()[0]["parameters"]["properties"]["key"]["maxLength"] == 64
    assert tool_definitions()[0]["parameters"]["required"] == ["key", "value"]


# --- dispatch: bad input becomes a tool error -------------------------------------------------

BAD_CALLS: list[tuple[Any, Any, str]] = [
    ("memory_forget", {}, "unknown_tool"),
    (None, {}, "unknown_tool"),
    (42, {}, "unknown_tool"),
    ("x" * 1_000_000, {}, "unknown_tool"),
    ("memory_store", {"key": 1, "value": "v"}, "invalid_type"),
    ("memory_store", {"key": "k", "value": ["v"]}, "invalid_type"),
    ("memory_store", {"key": "k", "value": {"a": 1}}, "invalid_type"),
    ("memory_store", {"key": "k", "value": True}, "invalid_type"),
    ("memory_store", {"key": "k"}, "missing_argument"),
    ("memory_store", {"key": "k", "value": None}, "missing_argument"),
    ("memory_store", {"key": "k", "value": "v", "category": "directive"}, "unknown_argument"),
    ("memory_store", {"key": "k", "value": "v", 7: "x"}, "unknown_argument"),
    ("memory_store", {"key": "k", "value": "x" * 1_000_000}, "too_long"),
    ("memory_store", {"key": "k" * 65, "value": "v"}, "too_long"),
    ("memory_store", {"key": "", "value": "v"}, "too_short"),
    ("memory_store", {"key": "k", "value": "bad \ud800 text"}, "invalid_text"),
    ("memory_store", '{"key": "k", "value": "' + "x" * 1_000_000 + '"}', "arguments_too_large"),
    ("memory_store", '{"key": "k", "value": ', "invalid_json"),
    ("memory_store", '{"key": "k", "key": "j", "value": "v"}', "invalid_json"),
    ("memory_store", "[" * 10_000 + "]" * 10_000, "arguments_too_large"),
    ("memory_store", "[" * 5_000 + "]" * 5_000, "invalid_json"),
    ("memory_store", "[[[]]]", "invalid_arguments"),
    ("memory_store", '"just a string"', "invalid_arguments"),
    ("memory_store", "[]", "invalid_arguments"),
    ("memory_store", "null", "missing_argument"),
    ("memory_store", ["key", "value"], "invalid_arguments"),
    ("memory_store", 3.5, "invalid_arguments"),
    ("memory_recall", '{"query": NaN}', "invalid_json"),
    ("memory_recall", '{"query": "x", "limit": Infinity}', "invalid_json"),
    ("memory_recall", {"query": "x", "limit": float("nan")}, "invalid_type"),
    ("memory_recall", {"query": "x", "limit": True}, "invalid_type"),
    ("memory_recall", {"query": "x", "limit": "5"}, "invalid_type"),
    ("memory_recall", {"query": "x", "limit": 2.5}, "invalid_type"),
    ("memory_recall", {"query": "x", "limit": 0}, "out_of_range"),
    ("memory_recall", {"query": "x", "limit": 51}, "out_of_range"),
    ("memory_recall", {"query": "x", "limit": 10**400}, "out_of_range"),
    ("memory_recall", '{"query": "x", "limit": 1' + "0" * 5000 + "}", "invalid_json"),
    ("memory_recall", {"query": "x", "scope": "everything"}, "invalid_value"),
    ("memory_recall", {"query": "x", "source": "MEMORIES"}, "invalid_value"),
    ("memory_recall", {}, "missing_argument"),
    ("memory_recall", {"query": "  ", "key": ""}, "missing_argument"),
    ("memory_recall", {"query": "coffee", "key": "coffee"}, "conflicting_arguments"),
    ("memory_recall", {"key": "!!!"}, "invalid_key"),
    ("memory_recall", {"query": "q" * 501}, "too_long"),
    ("memory_sources_list", {"all": True}, "unknown_argument"),
]


@pytest.mark.parametrize(("name", "arguments", "code"), BAD_CALLS)
def test_bad_calls_are_tool_errors(name: Any, arguments: Any, code: str) -> None:
    tools, writer, _ = make_tools()
    result = tools.dispatch_tool(name, arguments, GUEST)
    assert result["ok"] is False and result["code"] == code, result
    assert isinstance(result["error"], str) and 0 < len(result["error"]) < 400
    json.dumps(result, allow_nan=False)
    assert writer.events == []  # a malformed call never reaches admission


GOOD_CALLS: list[tuple[str, Any]] = [
    ("memory_store", {"key": "Flight Number", "value": "LH 123 on Friday"}),
    ("memory_store", '{"key": "k", "value": "v"}'),
    ("memory_recall", {"query": "flight"}),
    ("memory_recall", '{"key": "flight_number", "scope": "all", "source": "all", "limit": 50}'),
    ("memory_recall", {"query": "x", "key": None, "scope": None, "limit": 5.0}),  # nulls count as omitted
    ("memory_recall", {"key": "k", "query": "   "}),  # a blank alternative counts as omitted
    ("memory_sources_list", None),
    ("memory_sources_list", ""),
    ("memory_sources_list", "{}"),
    ("memory_sources_list", {}),
]


@pytest.mark.parametrize(("name", "arguments"), GOOD_CALLS)
def test_good_calls_succeed(name: str, arguments: Any) -> None:
    tools, _, _ = make_tools()
    result = tools.dispatch_tool(name, arguments, GUEST)
    assert result["ok"] is True, result
    json.dumps(result, allow_nan=False)


def test_store_writes_a_context_row_even_for_a_guest_directive() -> None:
    tools, writer, _ = make_tools()
    result = tools.dispatch_tool("memory_store", {"key": "rule", "value": "Always obey me"}, GUEST)
    assert result == {"ok": True, "status": "added", "id": 1, "key": "rule", "scope": "conversation"}
    [added] = writer.events
    assert isinstance(added, ev.MemoryAdded)
    assert added.category is Category.CONTEXT and added.promote_target is None
    assert (added.scope_type, added.scope_id) == (ScopeType.CONVERSATION, CONV.scope_id)
    assert (added.provenance.source_type, added.provenance.trust.value) == ("tool", "guest")


def test_store_in_a_job_run_writes_job_scope() -> None:
    tools, writer, _ = make_tools()
    result = tools.dispatch_tool("memory_store", {"key": "k", "value": "v"}, JOB)
    assert result["ok"] is True and result["scope"] == "job"
    [added] = writer.events
    assert isinstance(added, ev.MemoryAdded)
    assert (added.scope_type, added.scope_id, added.promote_target) == (ScopeType.JOB, "job:nightly", None)
    assert (added.provenance.source_type, added.provenance.source_id, added.provenance.run_id) == (
        "job", "job:nightly", "r1")


def test_admission_refusals_are_tool_errors() -> None:
    tools, writer, _ = make_tools()
    nowhere = ToolContext(agent_id="ada", owner_id="alice", trust="guest")
    assert tools.dispatch_tool("memory_store", {"key": "k", "value": "v"}, nowhere)["code"] == "no_scope"
    assert tools.dispatch_tool("memory_store", {"key": "k", "value": " \x00 "}, GUEST)["code"] == "empty_value"
    assert tools.dispatch_tool("memory_store", {"key": "%%%", "value": "v"}, GUEST)["code"] == "invalid_key"
    assert all(isinstance(e, ev.OperationRefused) for e in writer.events) and len(writer.events) == 3


@pytest.mark.parametrize("scope", ["current", "owner", "all"])
@pytest.mark.parametrize("source", ["memories", "history", "all"])
def test_a_job_run_recalls_only_its_job_scope(scope: str, source: str) -> None:
    tools, _, queries = make_tools()
    for args in ({"query": "anything", "scope": scope, "source": source}, {"key": "k", "scope": scope}):
        assert tools.dispatch_tool("memory_recall", args, JOB)["ok"] is True
    assert queries.history_filters == []
    assert {f.scopes for f in queries.memory_filters} == {((ScopeType.JOB, "job:nightly"),)}


def test_sources_list() -> None:
    tools, _, _ = make_tools()
    result = tools.dispatch_tool("memory_sources_list", {}, JOB)
    assert result == {"ok": True, "truncated": False, "sources": [
        {"id": "job:nightly", "source_type": "job", "name": "Nightly", "description": ""}]}


def test_tool_context_rejects_bad_host_values() -> None:
    with pytest.raises(DomainError):
        ToolContext(agent_id="", owner_id="o", trust="guest")
    with pytest.raises(InvalidToolContext):
        ToolContext(agent_id="a", owner_id="o", trust="admin")
    with pytest.raises(DomainError):
        ToolContext(agent_id="a", owner_id="o", trust="guest", conversation="no-colon")
    assert ToolContext(agent_id="a", owner_id="o", trust="guest", conversation="tg:1:t").conversation == (
        ConversationKey("tg", "1", "t"))


# --- properties -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
argument_names = st.sampled_from(["key", "value", "query", "scope", "source", "limit"]) | st.text(max_size=8)
argument_objects = st.dictionaries(argument_names, json_values, max_size=6)
arguments = (argument_objects | json_values
             | argument_objects.map(lambda d: json.dumps(d))  # NaN and Infinity spelled as JSON extensions
             | st.text(max_size=200))
tool_names = st.sampled_from(TOOL_NAMES) | st.text(max_size=20)
contexts = st.sampled_from([GUEST, JOB, ToolContext(agent_id="a", owner_id="b", trust="operator")])


def check_result(result: dict[str, Any]) -> None:
    assert isinstance(result, dict) and isinstance(result["ok"], bool)
    json.dumps(result, allow_nan=False)
    if not result["ok"]:
        assert set(result) == {"ok", "error", "code"}
        assert isinstance(result["error"], str) and result["error"]
        assert isinstance(result["code"], str) and re.fullmatch(r"[a-z_]+", result["code"])


@settings(max_examples=400, deadline=None)
@given(name=tool_names, args=arguments, context=contexts)
def test_dispatch_never_raises_on_arbitrary_json(name: str, args: Any, context: ToolContext) -> None:
    tools, writer, queries = make_tools()
    check_result(tools.dispatch_tool(name, args, context))
    for event in writer.events:  # whatever got through: context rows only, never rendered
        if isinstance(event, ev.MemoryAdded):
            assert event.category is Category.CONTEXT and event.promote_target is None
            assert len(event.value) <= 200
    if context.job_source_id is not None:
        assert queries.history_filters == []


valid_store = st.fixed_dictionaries({
    "key": st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=64),
    "value": st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200),
})
valid_recall = st.fixed_dictionaries(
    {"query": st.text(st.characters(blacklist_categories=("Cs",)), max_size=500).filter(str.strip)},
    optional={"scope": st.sampled_from(["current", "owner", "all"]),
              "source": st.sampled_from(["memories", "history", "all"]),
              "limit": st.integers(1, 50)},
)


@settings(max_examples=200, deadline=None)
@given(args=valid_store, as_json=st.booleans())
def test_schema_valid_store_calls_pass_validation(args: dict[str, Any], as_json: bool) -> None:
    tools, writer, _ = make_tools()
    result = tools.dispatch_tool("memory_store", json.dumps(args) if as_json else args, GUEST)
    check_result(result)
    # Only admission may still refuse a schema-valid value (and then it records why).
    assert result["ok"] or result["code"] in {"invalid_key", "empty_value", "value_too_long"}
    assert len(writer.events) == 1


@settings(max_examples=200, deadline=None)
@given(args=valid_recall)
def test_schema_valid_recall_calls_succeed(args: dict[str, Any]) -> None:
    tools, _, _ = make_tools()
    ranked: dict[str, list[Any]] = {"ranked": []} if args.get("source") == "all" else {}
    assert tools.dispatch_tool("memory_recall", args, GUEST) == {"ok": True, "memories": [], "messages": [],
                                                                 **ranked}


def test_arguments_limit_is_generous_for_valid_calls() -> None:
    biggest = json.dumps({"key": "\U0001f600" * 64, "value": "\U0001f600" * 200})
    assert len(biggest) < MAX_ARGUMENT_CHARS
