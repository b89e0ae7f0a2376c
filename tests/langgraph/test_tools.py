"""The memory tools as LangChain tools: built from the one set of definitions, dispatched
through the session, bad calls as ``{"ok": false}`` results, in a LangGraph graph driven by a
fake chat model (ADR-0028)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from fermix_memory import MemorySystem, Session
from fermix_memory.application.tool_definitions import tool_definitions
from fermix_memory.langgraph import memory_tools


@pytest.fixture
def session(memory: MemorySystem) -> Session:
    return memory.session(agent_id="ada", owner_id="alice", conversation="slack:C1", trust="guest")


def test_the_tools_are_the_definitions(session: Session) -> None:
    tools = memory_tools(session)
    assert [(t.name, t.description, t.args_schema) for t in tools] == \
           [(d["name"], d["description"], d["parameters"]) for d in tool_definitions()]
    with pytest.raises(TypeError):
        memory_tools("alice")  # type: ignore[arg-type]


def test_invoke_and_ainvoke_dispatch_through_the_session(session: Session, memory: MemorySystem) -> None:
    store, recall, sources = memory_tools(session)
    assert store.invoke({"key": "flight", "value": "LH 1234 on Friday"})["ok"] is True
    [row] = memory.memories()
    assert (row.owner_id, row.scope_id, row.category, row.key) == ("alice", "slack:C1:", "context", "flight")
    found = asyncio.run(recall.ainvoke({"query": "flight Friday"}))
    assert [m["value"] for m in found["memories"]] == ["LH 1234 on Friday"]
    assert sources.invoke({})["ok"] is True


@pytest.mark.parametrize("arguments", [
    {}, {"key": "k"}, {"key": "k", "value": "v", "owner_id": "bob"}, {"key": 5, "value": "v"},
    {"key": "k", "value": "v" * 2001}, {"key": "!!!", "value": "v"},
    {"key": "k", "value": "v", "config": {}}, {"key": "k", "value": "v", "run_manager": None},
])
def test_a_bad_call_is_an_ok_false_result_never_an_exception(session: Session, memory: MemorySystem,
                                                             arguments: dict[str, Any]) -> None:
    store = memory_tools(session)[0]
    result = store.invoke(arguments)
    assert result["ok"] is False and result["error"]
    message = store.invoke({"type": "tool_call", "id": "call-1", "name": "memory_store", "args": arguments})
    assert isinstance(message, ToolMessage) and json.loads(str(message.content))["ok"] is False
    assert memory.memories() == []


def test_text_input_is_parsed_as_json_arguments_not_raised(session: Session) -> None:
    store = memory_tools(session)[0]
    assert store.invoke("not json")["code"] == "invalid_json"
    assert store.invoke('{"key": "k", "value": "v"}')["ok"] is True


def test_a_closed_memory_is_a_result_too(memory: MemorySystem, session: Session) -> None:
    recall = memory_tools(session)[1]
    memory.close()
    result = recall.invoke({"query": "anything"})
    assert result["ok"] is False and result["code"] == "MemoryClosed"


def test_a_graph_with_a_fake_chat_model_stores_and_recalls(session: Session, memory: MemorySystem) -> None:
    tools = memory_tools(session)
    model = FakeMessagesListChatModel(responses=[
        AIMessage("", tool_calls=[{"id": "c1", "name": "memory_store", "args": {"key": "seat", "value": "Aisle 12C"}},
                                  {"id": "c2", "name": "memory_store", "args": {"key": "seat"}}]),
        AIMessage("", tool_calls=[{"id": "c3", "name": "memory_recall", "args": {"key": "seat"}}]),
        AIMessage("Your seat is 12C."),
    ])

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    out = builder.compile().invoke({"messages": [HumanMessage("Remember my seat, Aisle 12C")]})
    results = {m.tool_call_id: json.loads(str(m.content)) for m in out["messages"] if isinstance(m, ToolMessage)}
    assert results["c1"]["ok"] is True
    assert results["c2"] == {"ok": False, "error": "value is required", "code": "missing_argument"}
    assert [m["value"] for m in results["c3"]["memories"]] == ["Aisle 12C"]
    assert out["messages"][-1].content == "Your seat is 12C."
    assert [r.value for r in memory.memories()] == ["Aisle 12C"]
