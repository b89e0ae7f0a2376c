"""Anthropic adapter against a real Messages API server on 127.0.0.1."""

from __future__ import annotations

import logging
import time
import traceback

import httpx
import pytest

from fermix_memory.adapters.providers.anthropic import AnthropicProvider
from fermix_memory.application.errors import ModelBadResponse, ModelUnavailable
from fermix_memory.application.ports import ChatMessage, ChatRequest
from tests.integration.loopback_models import LoopbackModelServer, Reply, fenced_json, unused_base_url

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
    ("effort", "max_tokens", "thinking"),
    [
        ("low", 2048, {"type": "enabled", "budget_tokens": 1024}),
        ("medium", 8192, {"type": "enabled", "budget_tokens": 4096}),
        ("high", 32000, {"type": "enabled", "budget_tokens": 16384}),
        ("low", 1024, None),  # the budget must stay below max_tokens
        ("high", 8192, None),
        ("none", 8192, None),
        (None, 8192, None),
    ],
)
def test_reasoning_effort_maps_to_a_thinking_budget_that_fits(
    anthropic_server: LoopbackModelServer,
    http_client: httpx.Client,
    effort: str | None,
    max_tokens: int,
    thinking: dict[str, object] | None,
):
    provider(anthropic_server, http_client).complete(request(reasoning_effort=effort, max_tokens=max_tokens))

    assert anthropic_server.requests[0].json.get("thinking") == thinking


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
