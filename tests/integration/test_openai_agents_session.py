"""The OpenAI Agents SDK session over fermix memory, driven by the SDK's own Runner (ADR-0027).

The model is a fake ``agents.Model`` of ours that answers from a script: no network, tracing off.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from agents.memory import Session as AgentsSession
from agents.memory import SessionSettings
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from openai.types.responses.response_reasoning_item import ResponseReasoningItem, Summary

from fermix_memory import DomainError, InvalidNumber, MemorySystem
from fermix_memory.application.errors import PermissionDenied
from fermix_memory.application.message_input import InvalidMessage
from fermix_memory.domain import events as ev
from fermix_memory.domain.conversation_window import RetractionRefused
from fermix_memory.domain.fence import CLOSE_TAG, OPEN_TAG
from fermix_memory.domain.values import Role
from fermix_memory.openai_agents import FermixAgentsSession, memory_instructions, memory_tools
from tests.waits import HANG_GUARD_S

AGENT, OWNER = "ada", "alice"
NO_TRACES = RunConfig(tracing_disabled=True)


def said(text: str, item_id: str = "msg_1") -> ResponseOutputMessage:
    return ResponseOutputMessage(id=item_id, type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(text=text, type="output_text", annotations=[])])


def calls(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{call_id}", call_id=call_id, type="function_call", name=name,
                                    arguments=json.dumps(arguments))


def thinks(text: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(id="rs_1", type="reasoning", summary=[Summary(text=text, type="summary_text")])


class ScriptedModel(Model):
    """Answers each call with the next scripted output; records what it was given."""

    def __init__(self, *turns: Sequence[Any]) -> None:
        self.turns = [list(t) for t in turns]
        self.inputs: list[Any] = []
        self.instructions: list[str | None] = []
        self.tools: list[list[str]] = []

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, *, previous_response_id: str | None,
                           conversation_id: str | None, prompt: Any) -> ModelResponse:
        self.inputs.append(copy.deepcopy(input))
        self.instructions.append(system_instructions)
        self.tools.append([t.name for t in tools])
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this script does not stream")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as opened:  # no provider: the offline rules reviewer
        yield opened


def agents_session(memory: MemorySystem, session_id: str = "chat-1", trust: Any = "guest") -> FermixAgentsSession:
    return FermixAgentsSession.open(memory, session_id, agent_id=AGENT, owner_id=OWNER, trust=trust)


def test_it_satisfies_the_sdk_session_protocol(memory: MemorySystem) -> None:
    s = agents_session(memory)
    assert isinstance(s, AgentsSession)
    assert s.session_id == "openai-agents:chat-1" and s.session.owner_id == OWNER
    wrapped = FermixAgentsSession(memory.session(agent_id=AGENT, owner_id=OWNER, conversation="telegram:42"))
    assert wrapped.session_id == "telegram:42"


def test_run_sync_records_the_turn_and_the_next_run_sees_it(memory: MemorySystem) -> None:
    s = agents_session(memory)
    model = ScriptedModel([said("Noted.")], [said("You live in Paris.", "msg_2")])
    agent = Agent(name="Ada", instructions="Be brief.", model=model)
    first = Runner.run_sync(agent, "I live in Paris", session=s, run_config=NO_TRACES)
    assert first.final_output == "Noted."
    items = asyncio.run(s.get_items())
    assert items == first.to_input_list()
    [question, answer] = memory.history(AGENT, "openai-agents:chat-1")
    assert (question.role, question.content, question.sender) == (Role.USER, "I live in Paris", OWNER)
    assert (answer.role, answer.content) == (Role.ASSISTANT, "Noted.")
    Runner.run_sync(agent, "Where do I live?", session=s, run_config=NO_TRACES)
    assert model.inputs[1][:2] == items, "the second run starts from the stored history"
    assert s.session.compose_prompt()[-1] == {"role": "assistant", "content": "You live in Paris."}


def test_a_run_where_the_model_stores_a_fact_with_a_memory_tool(memory: MemorySystem) -> None:
    s = agents_session(memory)
    model = ScriptedModel([thinks("the user gave a flight"), calls("memory_store", {"key": "flight",
                                                                                    "value": "LH 1234 on Friday"})],
                          [said("Saved your flight.")])
    agent = Agent(name="Ada", model=model, tools=memory_tools(s))
    result = asyncio.run(Runner.run(agent, "My flight is LH 1234 on Friday", session=s, run_config=NO_TRACES))
    assert result.final_output == "Saved your flight."
    assert model.tools[0] == ["memory_store", "memory_recall", "memory_sources_list"]
    assert [h.memory.value for h in s.session.recall(key="flight").memories] == ["LH 1234 on Friday"]
    items = asyncio.run(s.get_items())
    assert items == result.to_input_list(), "every item comes back unchanged"
    assert [i.get("type", "message") for i in items] == ["message", "reasoning", "function_call",
                                                         "function_call_output", "message"]
    output = json.loads(items[3]["output"])  # type: ignore[typeddict-item]
    assert output["ok"] is True
    window = memory.history(AGENT, s.session.conversation)
    assert [(m.role.value, m.kind) for m in window] == [
        ("user", "text"), ("assistant", "agents_item"), ("assistant", "text"), ("tool", "text"),
        ("assistant", "text")]
    assert window[2].metadata["tool_calls"][0]["name"] == "memory_store"
    assert window[3].metadata["tool_call_id"] == "call_1"
    prompt = s.session.compose_prompt()
    assert [m["role"] for m in prompt] == ["user", "assistant", "tool", "assistant"], "the reasoning item has no turn"
    assert prompt[1]["tool_calls"][0]["id"] == "call_1" and prompt[2]["tool_call_id"] == "call_1"


def test_a_bad_tool_call_comes_back_to_the_model_as_a_tool_error(memory: MemorySystem) -> None:
    s = agents_session(memory)
    model = ScriptedModel([calls("memory_recall", {"oops": 1})], [said("Sorry.")])
    agent = Agent(name="Ada", model=model, tools=memory_tools(s))
    result = Runner.run_sync(agent, "What do you know?", session=s, run_config=NO_TRACES)
    assert result.final_output == "Sorry."
    [output] = [i for i in model.inputs[1] if i.get("type") == "function_call_output"]
    answer = json.loads(output["output"])
    assert answer["ok"] is False and answer["code"]
    memory.close()
    [tool] = [t for t in memory_tools(s) if t.name == "memory_store"]
    closed = json.loads(asyncio.run(tool.on_invoke_tool(None, '{"key": "a", "value": "b"}')))  # type: ignore[arg-type]
    assert closed == {"ok": False, "error": closed["error"], "code": "MemoryClosed"}


def test_a_finished_run_is_reviewed_and_the_next_run_reads_what_was_learnt(memory: MemorySystem) -> None:
    s = agents_session(memory)
    model = ScriptedModel([said("Noted.")], [said("In Paris.", "msg_2")])
    agent = Agent(name="Ada", model=model, instructions=memory_instructions(s, "You are Ada."))
    Runner.run_sync(agent, "I live in Paris", session=s, run_config=NO_TRACES)
    assert model.instructions[0] == "You are Ada.", "nothing learnt yet"
    memory.wait_for_background()
    assert "Paris" in user_md(memory)
    Runner.run_sync(agent, "Where do I live?", session=s, run_config=NO_TRACES)
    system, block = model.instructions[1].split("\n\n", 1)
    assert system == "You are Ada." and block.startswith(OPEN_TAG) and block.endswith(CLOSE_TAG)
    assert "Paris" in block


def test_a_batch_that_does_not_end_in_a_reply_is_not_reviewed(memory: MemorySystem) -> None:
    s = FermixAgentsSession.open(memory, "chat-1", agent_id=AGENT, owner_id=OWNER, review=False)
    asyncio.run(s.add_items([{"role": "user", "content": "I live in Paris"},  # type: ignore[list-item]
                             {"role": "assistant", "content": "Noted."}]))
    memory.wait_for_background()
    assert "Paris" not in user_md(memory), "review=False: the host runs after_turn itself"
    s = agents_session(memory)
    asyncio.run(s.add_items([{"role": "user", "content": "I live in Rome"}]))  # type: ignore[list-item]
    memory.wait_for_background()
    assert "Rome" not in user_md(memory), "no reply yet: the turn is not over"
    s.after_turn(peak_prompt_tokens=100).result(timeout=HANG_GUARD_S)
    memory.wait_for_background()
    assert "Rome" in user_md(memory)


def user_md(memory: MemorySystem) -> str:
    path = memory.prompt_file(AGENT, OWNER, "user_md")
    return path.read_text(encoding="utf-8") if path.exists() else ""


FIVE = [{"role": "user", "content": f"message {n}"} if n % 2 else {"role": "assistant", "content": f"reply {n}"}
        for n in range(1, 6)]


@pytest.mark.parametrize(("limit", "expected"), [(0, []), (1, FIVE[-1:]), (2, FIVE[-2:]), (5, FIVE), (None, FIVE),
                                                 (9, FIVE)])
def test_get_items_gives_the_newest_limit_items_oldest_first(memory: MemorySystem, limit: int | None,
                                                              expected: list[dict[str, str]]) -> None:
    s = agents_session(memory)
    asyncio.run(s.add_items(copy.deepcopy(FIVE)))  # type: ignore[arg-type]
    assert asyncio.run(s.get_items(limit)) == expected


def test_the_session_settings_limit_applies_when_no_limit_is_given(memory: MemorySystem) -> None:
    s = FermixAgentsSession.open(memory, "chat-1", agent_id=AGENT, owner_id=OWNER,
                                 session_settings=SessionSettings(limit=2))
    asyncio.run(s.add_items(copy.deepcopy(FIVE)))  # type: ignore[arg-type]
    assert asyncio.run(s.get_items()) == FIVE[-2:]
    assert asyncio.run(s.get_items(3)) == FIVE[-3:]
    with pytest.raises(InvalidNumber):
        asyncio.run(s.get_items(-1))


def test_a_reopened_home_gives_the_same_items(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        model = ScriptedModel([calls("memory_store", {"key": "boat", "value": "Petrel"})], [said("Saved.")])
        s = agents_session(memory)
        Runner.run_sync(Agent(name="Ada", model=model, tools=memory_tools(s)), "My boat is Petrel", session=s,
                        run_config=NO_TRACES)
        before = asyncio.run(s.get_items())
    with MemorySystem.open(tmp_path / "home") as memory:
        assert asyncio.run(agents_session(memory).get_items()) == before
        assert asyncio.run(agents_session(memory, "chat-2").get_items()) == []


def test_pop_item_retracts_the_newest_item_and_the_log_keeps_it(memory: MemorySystem) -> None:
    s = agents_session(memory)
    asyncio.run(s.add_items([{"role": "user", "content": "My locker code is 4711"},  # type: ignore[list-item]
                             {"role": "assistant", "content": "Noted."}]))
    assert asyncio.run(s.pop_item()) == {"role": "assistant", "content": "Noted."}
    assert asyncio.run(s.pop_item()) == {"role": "user", "content": "My locker code is 4711"}
    assert asyncio.run(s.pop_item()) is None
    assert asyncio.run(s.get_items()) == []
    conversation = s.session.conversation
    assert memory.messages(AGENT, conversation) == [], "retracted messages leave the message table"
    assert s.session.recall("locker", source="history").messages == [], "and history search"
    retracted = [r.event for r in memory.events() if isinstance(r.event, ev.MessageRetracted)]
    appended = [r for r in memory.events() if isinstance(r.event, ev.MessageAppended)]
    assert [e.message_id for e in retracted] == [appended[1].position, appended[0].position]
    assert retracted[0].provenance.owner_id == OWNER and retracted[0].owner_id == OWNER
    assert "4711" in appended[0].event.content, "the log keeps what was said"
    assert memory.verify().ok, "replaying the log retracts the same messages"
    memory.forget_owner(OWNER)
    assert memory.verify().ok
    assert not [r for r in memory.events() if isinstance(r.event, ev.MessageAppended | ev.MessageRetracted)]


def test_pop_item_never_takes_back_an_operators_words_for_a_guest(memory: MemorySystem) -> None:
    operator = agents_session(memory, trust="operator")
    asyncio.run(operator.add_items([{"role": "system", "content": "Answer in French."}]))  # type: ignore[list-item]
    with pytest.raises(RetractionRefused):
        asyncio.run(agents_session(memory).pop_item())
    assert asyncio.run(operator.pop_item()) == {"role": "system", "content": "Answer in French."}


def test_clear_session_is_the_clear_command(memory: MemorySystem) -> None:
    guest, operator = agents_session(memory), agents_session(memory, trust="operator")
    asyncio.run(guest.add_items([{"role": "user", "content": "I keep a kayak at the pier"}]))  # type: ignore[list-item]
    with pytest.raises(PermissionDenied):
        asyncio.run(guest.clear_session())
    assert len(asyncio.run(guest.get_items())) == 1
    asyncio.run(operator.clear_session())
    assert asyncio.run(guest.get_items()) == []
    assert asyncio.run(guest.pop_item()) is None, "a cleared window holds nothing to take back"
    assert guest.session.recall("kayak", source="history").messages, "the log and history search keep it"


def test_items_of_every_shape_round_trip_unchanged(memory: MemorySystem) -> None:
    s = agents_session(memory)
    long_text = "word " * 40_000  # far beyond what a message's metadata may hold
    items: list[Any] = [
        {"role": "user", "content": long_text},
        {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                     {"type": "input_image", "image_url": "https://example.invalid/a.png",
                                      "detail": "auto"}]},
        {"type": "message", "role": "assistant", "id": "msg_9", "status": "completed",
         "content": [{"type": "output_text", "text": "part one", "annotations": []},
                     {"type": "output_text", "text": "part two", "annotations": []}]},
        {"type": "message", "role": "assistant", "id": "msg_10", "status": "completed",
         "content": [{"type": "refusal", "refusal": "I cannot."}]},
        {"type": "custom_tool_call", "call_id": "c7", "name": "grep", "input": "needle"},
        {"type": "custom_tool_call_output", "call_id": "c7", "output": "found"},
        {"type": "function_call_output", "call_id": "c8", "output": [{"type": "input_text", "text": "a"}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
        {"type": "item_reference", "id": "msg_0"},
        {"role": "developer", "content": "Be brief."},
    ]
    asyncio.run(s.add_items(copy.deepcopy(items)))
    assert asyncio.run(s.get_items()) == items
    window = memory.history(AGENT, s.session.conversation)
    assert window[0].content == long_text and window[2].content == "part one\npart two"
    assert window[3].content == "I cannot." and window[9].role is Role.SYSTEM
    assert [h.message.id for h in s.session.recall("needle found", source="history").messages] == [window[5].id]
    for _ in items:
        asyncio.run(s.pop_item())
    assert asyncio.run(s.get_items()) == []


def test_messages_from_the_session_api_are_items_too(memory: MemorySystem) -> None:
    fermix = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="telegram:42")
    fermix.append("user", "Weather in Paris?")
    fermix.append("assistant", "", tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": "{}"}])
    fermix.append("tool", '{"temp_c": 21}', tool_call_id="call_1")
    s = FermixAgentsSession(fermix)
    assert asyncio.run(s.get_items()) == [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp_c": 21}'}]


@pytest.mark.parametrize("bad", [42, "text", {"role": "user", "content": {1, 2}},
                                 {"type": "function_call", "call_id": "", "name": "f", "arguments": "{}"},
                                 {"role": "user", "content": "lone \ud800"}])  # a NUL is kept (ADR-0103)
def test_a_bad_item_is_a_typed_error_and_nothing_is_recorded(memory: MemorySystem, bad: Any) -> None:
    s = agents_session(memory)
    with pytest.raises(InvalidMessage):
        asyncio.run(s.add_items([{"role": "user", "content": "fine"}, bad]))
    with pytest.raises(DomainError):
        asyncio.run(s.add_items("not a list"))  # type: ignore[arg-type]
    assert asyncio.run(s.get_items()) == []


def test_parallel_calls_and_the_reply_before_them_are_one_turn_of_the_prompt(memory: MemorySystem) -> None:
    s = agents_session(memory)
    model = ScriptedModel([said("Let me look."), calls("memory_recall", {"query": "boat"}, "call_1"),
                           calls("memory_sources_list", {}, "call_2")], [said("Nothing yet.", "msg_2")])
    Runner.run_sync(Agent(name="Ada", model=model, tools=memory_tools(s)), "What is my boat?", session=s,
                    run_config=NO_TRACES)
    prompt = s.session.compose_prompt()
    assert [m["role"] for m in prompt] == ["user", "assistant", "tool", "tool", "assistant"]
    assert prompt[1]["content"] == "Let me look."
    assert [c["id"] for c in prompt[1]["tool_calls"]] == ["call_1", "call_2"]
    _, turns = s.session.compose_prompt(style="anthropic")
    assert [b["type"] for b in turns[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result"]


def test_the_sdks_own_rewind_of_a_retried_turn_takes_its_items_back(memory: MemorySystem) -> None:
    from agents.run_internal.session_persistence import rewind_session_items

    s = agents_session(memory)
    kept: list[Any] = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "one"}]
    retried: list[Any] = [{"role": "user", "content": "second"},
                          {"type": "function_call", "call_id": "call_9", "name": "memory_recall", "arguments": "{}"}]
    asyncio.run(s.add_items(copy.deepcopy(kept + retried)))
    asyncio.run(rewind_session_items(s, copy.deepcopy(retried)))
    assert asyncio.run(s.get_items()) == kept
    assert len([r for r in memory.events() if isinstance(r.event, ev.MessageRetracted)]) == 2


def test_without_the_extra_the_module_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from fermix_memory.entrypoints.extras import MissingExtra

    for name in ("fermix_memory.openai_agents", "fermix_memory.entrypoints.integrations.openai_agents"):
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "agents", None)  # what an install without the extra has
    with pytest.raises(MissingExtra, match=r"pip install 'fermix-memory\[openai-agents\]'"):
        importlib.import_module("fermix_memory.openai_agents")
