"""Interop: providers and the reviewer against a real LiteLLM proxy on 127.0.0.1.

The proxy (see conftest.py) is an independently written server: its parameter checks, error
bodies and status codes are LiteLLM's own, not ours. Its deployments answer with fixed
``mock_response`` texts, so no model and no network is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fermix_memory.adapters.providers.anthropic import AnthropicProvider
from fermix_memory.adapters.providers.openai_compat import OpenAICompatibleProvider
from fermix_memory.application.model_ports import ChatMessage, ChatRequest
from fermix_memory.domain import events as ev
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from tests.interop.conftest import SLOW_S

AGENT, OWNER, CONV = "ada", "alice", "telegram:1"


@pytest.fixture
def http_client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False) as client:
        yield client


def entry(proxy: str, model: str, *, kind: str = "openai", **extra: Any) -> dict[str, Any]:
    base_url = proxy if kind == "anthropic" else proxy + "/v1"
    return {"name": model, "kind": kind, "base_url": base_url, "model": model, "retries": 0, **extra}


def open_memory(home: Path, *providers: dict[str, Any], timeout_s: float = 10.0) -> MemorySystem:
    config = {"fermix_core": {"providers": list(providers), "timeouts": {"llm_buffered_s": timeout_s}}}
    return MemorySystem.open(home, config=config)


def review(memory: MemorySystem, text: str = "I live in Berlin.") -> Any:
    memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", content=text,
                          sender=OWNER, trust="operator")
    [result] = memory.review_now(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    return result


def traces(memory: MemorySystem) -> list[ev.ModelCallTraced]:
    return [e.event for e in memory.events() if isinstance(e.event, ev.ModelCallTraced)]


def compaction_request(effort: str = "medium") -> ChatRequest:
    return ChatRequest(messages=(ChatMessage(role="system", content="Summarise."),
                                 ChatMessage(role="user", content="[user alice]: I live in Berlin.")),
                       max_tokens=1024, reasoning_effort=effort, timeout_s=10.0, tags={"agent": "compactor"})


# --- reviews ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "kind"),
    [("gpt-4o-ops", "openai"), ("gpt-4o-fenced", "openai"), ("gpt-4o-prose", "openai"), ("o4-mini-ops", "openai"),
     ("claude-sonnet-4-5", "anthropic")],
)
def test_review_applies_operations(litellm_proxy: str, tmp_path: Path, model: str, kind: str) -> None:
    with open_memory(tmp_path, entry(litellm_proxy, model, kind=kind)) as memory:
        result = review(memory)
        assert (result.status, result.applied) == ("completed", 1), result.reason
        assert [(r.key, r.value) for r in memory.memories(agent_id=AGENT, owner_id=OWNER)] == [("home_city", "Berlin")]
        [trace] = traces(memory)
        assert (trace.model, trace.outcome, trace.attempts) == (model, "ok", 1)
        assert trace.served_model  # what LiteLLM says it served, recorded beside the configured model


@pytest.mark.parametrize("model", ["gpt-4o-empty", "gpt-4o-nothing"])
def test_review_with_nothing_to_save(litellm_proxy: str, tmp_path: Path, model: str) -> None:
    with open_memory(tmp_path, entry(litellm_proxy, model)) as memory:
        result = review(memory, "Nice weather today.")
        assert (result.status, result.reason) == ("completed", "nothing_to_save")


def test_429_500_and_timeout_fall_back_to_the_next_provider(litellm_proxy: str, tmp_path: Path) -> None:
    providers = [entry(litellm_proxy, m) for m in ("gpt-4o-429", "gpt-4o-500", "gpt-4o-slow", "gpt-4o-ops")]
    with open_memory(tmp_path, *providers, timeout_s=SLOW_S / 3) as memory:
        result = review(memory)
        assert (result.status, result.applied) == ("completed", 1), result.reason
        assert [(t.provider, t.outcome) for t in traces(memory)] == [
            ("gpt-4o-429", "unavailable"), ("gpt-4o-500", "unavailable"), ("gpt-4o-slow", "unavailable"),
            ("gpt-4o-ops", "ok")]


# --- compaction and the parameter rules ---------------------------------------------------------------


def test_compaction_against_a_non_reasoning_model_succeeds(litellm_proxy: str, tmp_path: Path) -> None:
    with open_memory(tmp_path, entry(litellm_proxy, "gpt-4o-nothing", context_window=3000)) as memory:
        for i in range(30):
            memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", sender=OWNER,
                                  content=f"Point {i} matters. " + "filler words " * 40, trust="operator")
        reply = memory.handle_command("/compact", agent_id=AGENT, owner_id=OWNER, conversation=CONV,
                                      trust="operator", context_window=3000)
        assert reply is not None and reply.ok, reply
        compactor = [t for t in traces(memory) if t.agent == "compactor"]
        assert [(t.outcome, t.attempts, t.notes) for t in compactor] == [("ok", 1, ())]


def test_litellm_refusal_of_reasoning_effort_is_adapted_to(litellm_proxy: str, http_client: httpx.Client) -> None:
    # Configured to send an effort to gpt-4o: LiteLLM refuses it with its own 400 wording.
    p = OpenAICompatibleProvider("p", litellm_proxy + "/v1", "gpt-4o-nothing", None, client=http_client,
                                 reasoning_effort="medium", retries=0)
    first = p.complete(compaction_request())
    second = p.complete(compaction_request())
    assert (first.attempts, second.attempts) == (2, 1)
    assert first.notes == ("reasoning_effort refused by the server: no longer sent",)


def test_reasoning_model_gets_effort_and_max_completion_tokens(litellm_proxy: str, http_client: httpx.Client) -> None:
    p = OpenAICompatibleProvider("p", litellm_proxy + "/v1", "o4-mini-ops", None, client=http_client, retries=0)
    response = p.complete(compaction_request("high"))
    assert (response.attempts, response.notes) == (1, ())


def test_anthropic_thinking_and_structured_review_are_accepted(
    litellm_proxy: str, http_client: httpx.Client
) -> None:
    p = AnthropicProvider("c", litellm_proxy, "claude-sonnet-4-5", None, client=http_client, retries=0)
    assert p.complete(compaction_request("medium")).attempts == 1
    structured = ChatRequest(messages=compaction_request().messages, max_tokens=256, json_output=True,
                             output_schema={"type": "object"}, output_schema_name="memory_operations", timeout_s=10.0)
    assert p.complete(structured).attempts == 1
