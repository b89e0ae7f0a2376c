"""OpenAI-compatible adapter against a real Chat Completions server on 127.0.0.1."""

from __future__ import annotations

import logging
import time
import traceback

import httpx
import pytest

from fermix_memory.adapters.providers._params import REASONING_ALLOWANCE
from fermix_memory.adapters.providers.openai_compat import OpenAICompatibleProvider
from fermix_memory.application.errors import ModelBadResponse, ModelUnavailable
from fermix_memory.application.model_ports import ChatMessage, ChatRequest
from tests.integration.loopback_models import (
    LoopbackModelServer,
    Reply,
    fenced_json,
    prose_around_json,
    refusing,
    unused_base_url,
)

KEY = "sk-loopback-SECRET-0123456789"


def request(**overrides: object) -> ChatRequest:
    fields: dict[str, object] = {
        "messages": (
            ChatMessage(role="system", content="You are terse."),
            ChatMessage(role="user", content="Say hi."),
        ),
        "max_tokens": 64,
        "timeout_s": 2.0,
    }
    fields.update(overrides)
    return ChatRequest(**fields)  # type: ignore[arg-type]


def provider(
    server: LoopbackModelServer, client: httpx.Client, *, key: str | None = None, retries: int = 0
) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        "primary", server.base_url, "gpt-test", key, retries=retries, client=client
    )


def test_success_returns_text_usage_and_names(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.script(openai_server.ok("hi there", prompt_tokens=21, completion_tokens=3))

    response = provider(openai_server, http_client).complete(request())

    assert response.text == "hi there"
    assert (response.prompt_tokens, response.completion_tokens) == (21, 3)
    assert (response.provider, response.model) == ("primary", "gpt-test")


def test_request_shape_by_default(openai_server: LoopbackModelServer, http_client: httpx.Client):
    provider(openai_server, http_client).complete(request())

    [sent] = openai_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.json == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hi."},
        ],
        "max_tokens": 64,
    }
    assert "authorization" not in sent.headers
    assert sent.headers["content-type"] == "application/json"


def test_json_output_and_reasoning_effort_are_sent_to_a_reasoning_model(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    p = OpenAICompatibleProvider("primary", openai_server.base_url, "o4-mini", None, client=http_client)
    p.complete(request(json_output=True, reasoning_effort="high"))

    body = openai_server.requests[0].json
    assert body["response_format"] == {"type": "json_object"}
    assert body["reasoning_effort"] == "high"
    # o-series models take max_completion_tokens, which also holds their reasoning tokens
    assert body["max_completion_tokens"] == 64 + REASONING_ALLOWANCE["high"]
    assert "max_tokens" not in body


def test_reasoning_effort_none_is_not_sent(openai_server: LoopbackModelServer, http_client: httpx.Client):
    provider(openai_server, http_client).complete(request(reasoning_effort="none"))

    assert "reasoning_effort" not in openai_server.requests[0].json


def test_bearer_header_only_with_a_key(openai_server: LoopbackModelServer, http_client: httpx.Client):
    provider(openai_server, http_client, key=KEY).complete(request())

    assert openai_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_trailing_slash_in_base_url(openai_server: LoopbackModelServer, http_client: httpx.Client):
    p = OpenAICompatibleProvider("p", openai_server.base_url + "/", "m", None, client=http_client)
    p.complete(request())

    assert openai_server.requests[0].path == "/v1/chat/completions"


def test_own_client_when_none_given(openai_server: LoopbackModelServer):
    p = OpenAICompatibleProvider("p", openai_server.base_url, "m", None)
    try:
        assert p.complete(request()).text == "ok"
    finally:
        p.close()


@pytest.mark.parametrize("text", [fenced_json({"operations": []}), prose_around_json({"a": 1}), ""])
def test_text_is_returned_verbatim(openai_server: LoopbackModelServer, http_client: httpx.Client, text: str):
    openai_server.script(openai_server.ok(text))

    assert provider(openai_server, http_client).complete(request()).text == text


def test_missing_usage_counts_zero(openai_server: LoopbackModelServer, http_client: httpx.Client):
    body = openai_server.ok("x").json
    del body["usage"]
    openai_server.script(Reply(json=body))

    response = provider(openai_server, http_client).complete(request())

    assert (response.prompt_tokens, response.completion_tokens) == (0, 0)


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_retryable_status_is_unavailable_after_retries(
    openai_server: LoopbackModelServer, http_client: httpx.Client, status: int
):
    openai_server.always(openai_server.error(status))

    with pytest.raises(ModelUnavailable) as caught:
        provider(openai_server, http_client, retries=2).complete(request())

    assert f"HTTP {status}" in str(caught.value)
    assert "primary" in str(caught.value)
    assert len(openai_server.requests) == 3


def test_no_retry_when_retries_is_zero(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.always(openai_server.error(500))

    with pytest.raises(ModelUnavailable):
        provider(openai_server, http_client, retries=0).complete(request())

    assert len(openai_server.requests) == 1


def test_retry_recovers_from_a_transient_failure(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    openai_server.script(openai_server.error(503), openai_server.ok("second time lucky"))

    response = provider(openai_server, http_client, retries=1).complete(request())

    assert response.text == "second time lucky"
    assert len(openai_server.requests) == 2


def test_retry_after_is_capped(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.script(openai_server.error(429, retry_after="30"), openai_server.ok("done"))

    started = time.monotonic()
    response = provider(openai_server, http_client, retries=1).complete(request())

    assert response.text == "done"
    assert time.monotonic() - started < 2.0


def test_timeout_is_unavailable(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.always(openai_server.slow(1.0))

    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match="timed out"):
        provider(openai_server, http_client).complete(request(timeout_s=0.3))

    assert time.monotonic() - started < 0.9


def test_connection_refused_is_unavailable(http_client: httpx.Client):
    p = OpenAICompatibleProvider("gone", unused_base_url() + "/v1", "m", None, retries=0, client=http_client)

    with pytest.raises(ModelUnavailable, match="connection error"):
        p.complete(request())


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_is_bad_response_without_retry(
    openai_server: LoopbackModelServer, http_client: httpx.Client, status: int
):
    openai_server.always(openai_server.error(status, "model not found"))

    with pytest.raises(ModelBadResponse) as caught:
        provider(openai_server, http_client, retries=3).complete(request())

    assert f"HTTP {status}" in str(caught.value)
    assert "model not found" in str(caught.value)
    assert len(openai_server.requests) == 1


def test_malformed_body_is_bad_response(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.always(openai_server.malformed())

    with pytest.raises(ModelBadResponse, match="not JSON"):
        provider(openai_server, http_client, retries=2).complete(request())

    assert len(openai_server.requests) == 1


def test_missing_fields_is_bad_response(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.always(openai_server.missing_fields())

    with pytest.raises(ModelBadResponse, match="choices"):
        provider(openai_server, http_client).complete(request())


def test_null_content_is_bad_response(openai_server: LoopbackModelServer, http_client: httpx.Client):
    reply = openai_server.ok("x")
    reply.json["choices"][0]["message"]["content"] = None
    openai_server.always(reply)

    with pytest.raises(ModelBadResponse, match="not a string"):
        provider(openai_server, http_client).complete(request())


@pytest.mark.parametrize("failure", ["unauthorized", "server_error", "slow"])
def test_api_key_never_in_errors_or_logs(
    openai_server: LoopbackModelServer,
    http_client: httpx.Client,
    caplog: pytest.LogCaptureFixture,
    failure: str,
):
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {KEY}"
    reply = {
        "unauthorized": openai_server.error(401, echo),
        "server_error": openai_server.error(500, echo),
        "slow": openai_server.slow(1.0),
    }[failure]
    openai_server.always(reply)

    with pytest.raises((ModelUnavailable, ModelBadResponse)) as caught:
        provider(openai_server, http_client, key=KEY, retries=1).complete(request(timeout_s=0.3))

    rendered = "".join(traceback.format_exception(caught.value))
    assert KEY not in str(caught.value)
    assert KEY not in repr(caught.value)
    assert KEY not in rendered
    assert KEY not in caplog.text
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent


# --- which optional parameters are sent to which model ----------------------------------------------


def compaction_request() -> ChatRequest:
    """What the compactor asks for by default: a "medium" effort, a limit of at most 4096."""
    return request(reasoning_effort="medium", max_tokens=4096)


def test_compaction_against_a_non_reasoning_model_sends_no_reasoning_effort(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    # A real gpt-4o deployment answers 400 to reasoning_effort: every compaction used to fail.
    openai_server.always(refusing(openai_server, {"reasoning_effort"}, openai_server.ok("summary")))
    p = OpenAICompatibleProvider("p", openai_server.base_url, "gpt-4o", None, client=http_client)

    response = p.complete(compaction_request())

    assert response.text == "summary"
    [sent] = openai_server.requests
    assert "reasoning_effort" not in sent.json
    assert sent.json["max_tokens"] == 4096


@pytest.mark.parametrize("style", ["openai", "litellm"])
def test_unsupported_reasoning_effort_400_is_retried_once_without_it_and_remembered(
    openai_server: LoopbackModelServer, http_client: httpx.Client, style: str
):
    openai_server.always(refusing(openai_server, {"reasoning_effort"}, openai_server.ok("summary"), style=style))
    # Configured to send it (a proxy alias the name rules cannot recognise).
    p = OpenAICompatibleProvider("p", openai_server.base_url, "house-model", None, client=http_client,
                                 reasoning_effort="medium")

    first = p.complete(compaction_request())
    second = p.complete(compaction_request())

    assert (first.text, second.text) == ("summary", "summary")
    sent = [r.json for r in openai_server.requests]
    assert ["reasoning_effort" in body for body in sent] == [True, False, False]
    assert first.attempts == 2 and second.attempts == 1
    assert first.notes == ("reasoning_effort refused by the server: no longer sent",)
    assert second.notes == ()


def test_an_unrelated_400_is_not_retried(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.always(openai_server.error(400, "This model's maximum context length is 8192 tokens"))
    p = OpenAICompatibleProvider("p", openai_server.base_url, "o4-mini", None, client=http_client)

    with pytest.raises(ModelBadResponse) as caught:
        p.complete(compaction_request())

    assert len(openai_server.requests) == 1
    assert caught.value.attempts == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("model", "field"),
    [("o3-mini", "max_completion_tokens"), ("o1", "max_completion_tokens"), ("gpt-5-mini", "max_completion_tokens"),
     ("openai/o4-mini", "max_completion_tokens"), ("gpt-4o", "max_tokens"), ("llama3.1:8b", "max_tokens")],
)
def test_o_series_models_get_max_completion_tokens(
    openai_server: LoopbackModelServer, http_client: httpx.Client, model: str, field: str
):
    OpenAICompatibleProvider("p", openai_server.base_url, model, None, client=http_client).complete(request())

    body = openai_server.requests[0].json
    other = "max_tokens" if field == "max_completion_tokens" else "max_completion_tokens"
    assert field in body and other not in body


def test_max_tokens_400_switches_to_max_completion_tokens_and_remembers(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    # An Azure deployment name hides the model family; the server says which field it wants.
    openai_server.always(refusing(openai_server, {"max_tokens"}, openai_server.ok("fine")))
    p = OpenAICompatibleProvider("p", openai_server.base_url, "my-deployment", None, client=http_client)

    assert p.complete(request()).notes == ("max_tokens refused by the server: max_completion_tokens sent instead",)
    assert p.complete(request()).attempts == 1

    sent = [r.json for r in openai_server.requests]
    assert [("max_tokens" in b, b.get("max_completion_tokens")) for b in sent] == [(True, None), (False, 64),
                                                                                 (False, 64)]


def test_configured_max_tokens_field_is_sent(openai_server: LoopbackModelServer, http_client: httpx.Client):
    p = OpenAICompatibleProvider("p", openai_server.base_url, "o3", None, client=http_client,
                                 max_tokens_field="max_tokens", reasoning_effort="none")
    p.complete(request(reasoning_effort="high"))

    body = openai_server.requests[0].json
    assert body["max_tokens"] == 64 and "reasoning_effort" not in body


# --- structured output -------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"operations": {"type": "array"}}, "required": ["operations"]}


def schema_request() -> ChatRequest:
    return request(json_output=True, output_schema=SCHEMA, output_schema_name="memory_operations")


def test_output_schema_is_sent_as_json_schema(openai_server: LoopbackModelServer, http_client: httpx.Client):
    provider(openai_server, http_client).complete(schema_request())

    assert openai_server.requests[0].json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "memory_operations", "schema": SCHEMA, "strict": False},
    }


def test_json_schema_400_falls_back_to_json_object_then_to_text(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    openai_server.always(refusing(openai_server, {"json_schema", "json_object"}, openai_server.ok("{}")))
    p = provider(openai_server, http_client)

    first = p.complete(schema_request())
    p.complete(schema_request())

    formats = [(r.json.get("response_format") or {}).get("type") for r in openai_server.requests]
    assert formats == ["json_schema", "json_object", None, None]
    assert first.attempts == 3 and len(first.notes) == 2


# --- what the trace needs ----------------------------------------------------------------------------


def test_response_carries_served_model_and_attempts(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.script(openai_server.error(503), openai_server.ok("hi", model="gpt-4o-2024-08-06"))

    response = provider(openai_server, http_client, retries=2).complete(request())

    assert (response.model, response.served_model, response.attempts) == ("gpt-test", "gpt-4o-2024-08-06", 2)


def test_failure_carries_its_attempts(openai_server: LoopbackModelServer, http_client: httpx.Client):
    openai_server.always(openai_server.error(500))

    with pytest.raises(ModelUnavailable) as caught:
        provider(openai_server, http_client, retries=2).complete(request())

    assert caught.value.attempts == 3  # type: ignore[attr-defined]


def test_llama_cpp_style_refusal_of_json_schema_steps_down(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    refusal = Reply(status=400, json={"error": {"code": 400, "type": "invalid_request_error", "message":
                    'response_format type must be one of "text" or "json_object", but got: json_schema'}})
    openai_server.script(refusal)

    response = provider(openai_server, http_client).complete(schema_request())

    assert response.attempts == 2
    assert [r.json["response_format"]["type"] for r in openai_server.requests] == ["json_schema", "json_object"]
