"""Items of a provider that names none: the SDK gives every one of them its placeholder id
(``__fake_id__``). It names no item, so no item is skipped as already recorded: the session keeps
every turn, as the SDK's own ``SQLiteSession`` does.

Driven by the SDK's Runner and its own Chat Completions model, against a loopback server that
speaks the protocol (no network, tracing off)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, SQLiteSession, function_tool
from agents.models.fake_id import FAKE_RESPONSES_ID
from openai import AsyncOpenAI

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.integrations.agents_items import PLACEHOLDER_ID
from fermix_memory.openai_agents import FermixAgentsSession
from tests.integration.loopback_models import LoopbackModelServer, Reply

NO_TRACES = RunConfig(tracing_disabled=True)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home", config={}) as opened:
        yield opened


def calls_tool(server: LoopbackModelServer, call_id: str, city: str) -> Reply:
    """A Chat Completions answer that calls ``weather`` (what a model asks of a tool)."""
    return Reply(json={
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": 0, "model": "loopback",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": "weather", "arguments": json.dumps({"city": city})}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def test_the_placeholder_is_the_sdks_own() -> None:
    assert PLACEHOLDER_ID == FAKE_RESPONSES_ID


def test_every_turn_of_a_chat_completions_model_is_kept_as_the_sdks_session_keeps_it(
        memory: MemorySystem, tmp_path: Path) -> None:
    ours = FermixAgentsSession.open(memory, "chat-1", agent_id="ada", owner_id="alice", review=False)
    theirs = SQLiteSession("chat-1", db_path=tmp_path / "sdk.db")
    with LoopbackModelServer("openai") as server:
        model = OpenAIChatCompletionsModel(model="loopback", openai_client=AsyncOpenAI(
            base_url=server.base_url, api_key="loopback", max_retries=0))
        agent = Agent(name="Ada", instructions="Be brief.", model=model, tools=[weather])
        for session in (ours, theirs):
            server.script(calls_tool(server, "call_1", "Paris"), server.ok("Sunny in Paris."),
                          calls_tool(server, "call_2", "Lyon"), server.ok("Sunny in Lyon too."),
                          server.ok("You asked about Paris and Lyon."))
            for question in ("Weather in Paris?", "And Lyon?", "What did I ask?"):
                Runner.run_sync(agent, question, session=session, run_config=NO_TRACES)
    kept: list[Any] = asyncio.run(ours.get_items())
    assert kept == asyncio.run(theirs.get_items())
    assert [item.get("id") for item in kept].count(FAKE_RESPONSES_ID) == 5, "three replies and two calls"
    assert [m.content for m in memory.history("ada", "openai-agents:chat-1") if m.role.value == "assistant"
            and m.content] == ["Sunny in Paris.", "Sunny in Lyon too.", "You asked about Paris and Lyon."]
    theirs.close()


def test_items_with_the_placeholder_are_each_recorded_and_a_real_id_still_once(memory: MemorySystem) -> None:
    session = FermixAgentsSession.open(memory, "chat-2", agent_id="ada", owner_id="alice", review=False)

    def reply(text: str, item_id: str) -> dict[str, Any]:
        return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

    first, second = reply("first", FAKE_RESPONSES_ID), reply("second", FAKE_RESPONSES_ID)
    named = reply("named", "msg_1")
    asyncio.run(session.add_items([first, named]))  # type: ignore[list-item]
    asyncio.run(session.add_items([second, named]))  # type: ignore[list-item]  # a real id is one item
    assert asyncio.run(session.get_items()) == [first, named, second]
