"""Anthropic adapter against a real Messages API server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import time
import traceback

import httpx
import pytest

from fermix_memory.adapters.providers.anthropic import OUTPUT_TOOL_DESCRIPTION, AnthropicProvider
from fermix_memory.application.errors import ModelBadResponse, ModelUnavailable
from fermix_memory.application.model_ports import ChatMessage, ChatRequest
from tests.integration.loopback_models import LoopbackModelServer, Reply, fenced_json, refusing, unused_base_url

KEY = "sk-ant-loopback-SECRET-9876543210"


def request(*messages: ChatMessage, **overrides: object) -> ChatRequest:
    fields: dict[str, object] = {
        "messages": messages or (ChatMessage(role="user", content="Say hi."),),
        "max_tokens": 64,
        "timeout_s": 2.0,
    }
    fields.update(overrides)
    return ChatRequest(**fields)  # type: ignore[arg-type]


def provider(
    server: LoopbackModelServer, client: httpx.Client, *, key: str | None = None, retries: int = 0
) -> AnthropicProvider:
    return AnthropicProvider("claude", server.base_url, "claude-test", key, retries=retries, client=client)


def answer(server: LoopbackModelServer, content: list[object], usage: dict[str, int]) -> Reply:
    body = server.ok("unused").json
    body["content"] = content
    body["usage"] = usage
    return Reply(json=body)


def test_success_returns_text_usage_and_names(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    anthropic_server.script(anthropic_server.ok("hello", prompt_tokens=30, completion_tokens=4))

    response = provider(anthropic_server, http_client).complete(request())

    assert response.text == "hello"
    assert (response.prompt_tokens, response.completion_tokens) == (30, 4)
    assert (response.provider, response.model) == ("claude", "claude-test")


def test_text_blocks_are_joined_and_thinking_is_skipped(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    content: list[object] = [
        {"type": "thinking", "thinking": "let me think", "signature": "sig"},
        {"type": "text", "text": "part one, "},
        {"type": "text", "text": "part two"},
    ]
    anthropic_server.script(answer(anthropic_server, content, {"input_tokens": 5, "output_tokens": 9}))

    assert provider(anthropic_server, http_client).complete(request()).text == "part one, part two"


def test_cached_prompt_tokens_count_as_prompt(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "output_tokens": 7,
    }
    anthropic_server.script(answer(anthropic_server, [{"type": "text", "text": "x"}], usage))

    response = provider(anthropic_server, http_client).complete(request())

    assert (response.prompt_tokens, response.completion_tokens) == (1110, 7)


def test_request_shape(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    provider(anthropic_server, http_client, key=KEY).complete(
        request(
            ChatMessage(role="system", content="Rule one."),
            ChatMessage(role="user", content="First."),
            ChatMessage(role="system", content="Rule two."),
            ChatMessage(role="user", content="Second."),
            ChatMessage(role="assistant", content="Answer."),
            ChatMessage(role="user", content="Third."),
        )
    )

    [sent] = anthropic_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers
    assert sent.json == {
        "model": "claude-test",
        "max_tokens": 64,
        "system": "Rule one.\n\nRule two.",
        "messages": [
            {"role": "user", "content": "First.\n\nSecond."},
            {"role": "assistant", "content": "Answer."},
            {"role": "user", "content": "Third."},
        ],
    }


def test_no_key_header_and_no_system_when_absent(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    provider(anthropic_server, http_client).complete(request())

    sent = anthropic_server.requests[0]
    assert "x-api-key" not in sent.headers
    assert "system" not in sent.json


@pytest.mark.parametrize("suffix", ["/", "/v1", "/v1/"])
def test_base_url_variants(anthropic_server: LoopbackModelServer, http_client: httpx.Client, suffix: str):
    p = AnthropicProvider("c", anthropic_server.base_url + suffix, "m", None, client=http_client)
    p.complete(request())

    assert anthropic_server.requests[0].path == "/v1/messages"


@pytest.mark.parametrize(
    ("effort", "budget"),
    [("minimal", 1024), ("low", 1024), ("medium", 4096), ("high", 16384)],
)
def test_thinking_turns_on_at_every_effort_under_the_compactor_cap(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client, effort: str, budget: int
):
    # The compactor asks for at most 4096 tokens; the budget is added on top so it always fits.
    p = AnthropicProvider("c", anthropic_server.base_url, "claude-sonnet-4-5", None, client=http_client)
    p.complete(request(reasoning_effort=effort, max_tokens=4096))

    sent = anthropic_server.requests[0].json
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert sent["max_tokens"] == 4096 + budget
    assert sent["thinking"]["budget_tokens"] < sent["max_tokens"]


@pytest.mark.parametrize(
    ("model", "effort", "setting"),
    [
        ("claude-3-5-haiku-latest", "medium", "auto"),  # cannot think: never sent by default
        ("claude-sonnet-4-5", "none", "auto"),
        ("claude-sonnet-4-5", None, "auto"),
        ("claude-sonnet-4-5", "high", "none"),  # configured off for this provider
    ],
)
def test_no_thinking_where_not_wanted_or_not_supported(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client, model: str, effort: str | None, setting: str
):
    p = AnthropicProvider("c", anthropic_server.base_url, model, None, client=http_client, reasoning_effort=setting)
    p.complete(request(reasoning_effort=effort, max_tokens=4096))

    sent = anthropic_server.requests[0].json
    assert "thinking" not in sent
    assert sent["max_tokens"] == 4096


def test_configured_effort_turns_thinking_on_for_any_model(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    p = AnthropicProvider("c", anthropic_server.base_url, "my-proxy-alias", None, client=http_client,
                          reasoning_effort="low")
    p.complete(request(reasoning_effort="high", max_tokens=512))

    assert anthropic_server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_fenced_json_text_is_returned_verbatim(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    text = fenced_json({"operations": []})
    anthropic_server.script(anthropic_server.ok(text))

    assert provider(anthropic_server, http_client).complete(request(json_output=True)).text == text


@pytest.mark.parametrize("status", [429, 500, 529])
def test_retryable_status_is_unavailable_after_retries(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client, status: int
):
    anthropic_server.always(anthropic_server.error(status, "Overloaded"))

    with pytest.raises(ModelUnavailable) as caught:
        provider(anthropic_server, http_client, retries=1).complete(request())

    assert f"HTTP {status}" in str(caught.value)
    assert len(anthropic_server.requests) == 2


def test_timeout_is_unavailable(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    anthropic_server.always(anthropic_server.slow(1.0))

    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match="timed out"):
        provider(anthropic_server, http_client).complete(request(timeout_s=0.3))

    assert time.monotonic() - started < 0.9


def test_connection_refused_is_unavailable(http_client: httpx.Client):
    p = AnthropicProvider("gone", unused_base_url(), "m", None, retries=0, client=http_client)

    with pytest.raises(ModelUnavailable, match="connection error"):
        p.complete(request())


def test_400_is_bad_response_without_retry(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    anthropic_server.always(anthropic_server.error(400, "max_tokens: too large"))

    with pytest.raises(ModelBadResponse, match="max_tokens: too large"):
        provider(anthropic_server, http_client, retries=2).complete(request())

    assert len(anthropic_server.requests) == 1


def test_malformed_body_is_bad_response(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    anthropic_server.always(anthropic_server.malformed())

    with pytest.raises(ModelBadResponse, match="not JSON"):
        provider(anthropic_server, http_client).complete(request())


def test_missing_content_is_bad_response(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    anthropic_server.always(anthropic_server.missing_fields())

    with pytest.raises(ModelBadResponse, match="content"):
        provider(anthropic_server, http_client).complete(request())


def test_non_string_text_block_is_bad_response(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    content: list[object] = [{"type": "text", "text": 42}]
    anthropic_server.always(answer(anthropic_server, content, {"input_tokens": 1, "output_tokens": 1}))

    with pytest.raises(ModelBadResponse, match="not a string"):
        provider(anthropic_server, http_client).complete(request())


@pytest.mark.parametrize("failure", ["unauthorized", "overloaded", "slow"])
def test_api_key_never_in_errors_or_logs(
    anthropic_server: LoopbackModelServer,
    http_client: httpx.Client,
    caplog: pytest.LogCaptureFixture,
    failure: str,
):
    caplog.set_level(logging.DEBUG)
    echo = f"invalid x-api-key {KEY}"
    reply = {
        "unauthorized": anthropic_server.error(401, echo),
        "overloaded": anthropic_server.error(529, echo),
        "slow": anthropic_server.slow(1.0),
    }[failure]
    anthropic_server.always(reply)

    with pytest.raises((ModelUnavailable, ModelBadResponse)) as caught:
        provider(anthropic_server, http_client, key=KEY, retries=1).complete(request(timeout_s=0.3))

    assert KEY not in str(caught.value)
    assert KEY not in "".join(traceback.format_exception(caught.value))
    assert KEY not in caplog.text
    assert anthropic_server.requests[0].headers["x-api-key"] == KEY  # it was sent


# --- structured output: a forced tool call -------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"operations": {"type": "array"}}, "required": ["operations"]}


def schema_request(**overrides: object) -> ChatRequest:
    return request(json_output=True, output_schema=SCHEMA, output_schema_name="memory_operations", **overrides)


def test_structured_request_is_a_forced_tool_call_and_its_input_is_the_answer(
    anthropic_server: LoopbackModelServer, http_client: httpx.Client
):
    anthropic_server.script(anthropic_server.tool_answer("memory_operations", {"operations": []}))

    response = provider(anthropic_server, http_client).complete(schema_request())

    assert json.loads(response.text) == {"operations": []}
    sent = anthropic_server.requests[0].json
    assert sent["tools"] == [{"name": "memory_operations", "description": OUTPUT_TOOL_DESCRIPTION,
                              "input_schema": SCHEMA}]
    assert sent["tool_choice"] == {"type": "tool", "name": "memory_operations"}


def test_forced_tool_call_never_comes_with_thinking(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    # The API refuses thinking together with a forced tool choice.
    p = AnthropicProvider("c", anthropic_server.base_url, "claude-opus-4-1", None, client=http_client)
    p.complete(schema_request(reasoning_effort="high"))

    sent = anthropic_server.requests[0].json
    assert "thinking" not in sent and sent["tool_choice"]["type"] == "tool"


def test_tools_400_falls_back_to_text_and_remembers(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    anthropic_server.always(refusing(anthropic_server, {"tools"}, anthropic_server.ok("Nothing to save."),
                                     style="anthropic"))
    p = provider(anthropic_server, http_client)

    first = p.complete(schema_request())
    p.complete(schema_request())

    assert first.text == "Nothing to save." and first.attempts == 2 and len(first.notes) == 1
    assert ["tools" in r.json for r in anthropic_server.requests] == [True, False, False]


def test_thinking_400_is_dropped_and_remembered(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    anthropic_server.always(refusing(anthropic_server, {"thinking"}, anthropic_server.ok("summary"),
                                     style="anthropic"))
    p = AnthropicProvider("c", anthropic_server.base_url, "gateway-alias", None, client=http_client,
                          reasoning_effort="medium")

    assert p.complete(request(reasoning_effort="medium", max_tokens=4096)).text == "summary"
    p.complete(request(reasoning_effort="medium", max_tokens=4096))

    assert [("thinking" in r.json, r.json["max_tokens"]) for r in anthropic_server.requests] == [
        (True, 8192), (False, 4096), (False, 4096)]


def test_response_carries_served_model(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    anthropic_server.script(anthropic_server.ok("hi", model="claude-sonnet-4-5-20250929"))

    response = provider(anthropic_server, http_client).complete(request())

    assert (response.model, response.served_model) == ("claude-test", "claude-sonnet-4-5-20250929")
    assert response.attempts == 1
