"""Provider routes (fallback, traces) and the provider factory, over loopback servers."""

from __future__ import annotations

import re
import sys
import tomllib
import types
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import attrs
import httpx
import pytest

from fermix_memory.adapters.providers.anthropic import AnthropicProvider
from fermix_memory.adapters.providers.openai_compat import OpenAICompatibleProvider
from fermix_memory.adapters.providers.route import ProviderRoute, build_provider
from fermix_memory.application.errors import (
    ConfigError,
    ModelBadResponse,
    ModelUnavailable,
    RouteExhausted,
)
from fermix_memory.application.model_ports import ChatMessage, ChatRequest, ChatResponse, ModelCallTrace
from fermix_memory.application.settings import ProviderSettings, settings_from_mapping
from tests.integration.loopback_models import LoopbackModelServer
from tests.integration.recording_tracer import RecordingTracer

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
KEY = "sk-route-SECRET-5555"
Servers = Callable[[str], LoopbackModelServer]


def clock() -> datetime:
    return NOW


def request(timeout_s: float = 2.0, **tags: str) -> ChatRequest:
    return ChatRequest(
        messages=(ChatMessage(role="user", content="Summarise."),),
        max_tokens=64,
        timeout_s=timeout_s,
        tags=tags or {"agent": "memory_reviewer"},
    )


def openai(
    server: LoopbackModelServer, client: httpx.Client, name: str, *, retries: int = 0, key: str | None = None
):
    return OpenAICompatibleProvider(
        name, server.base_url, f"{name}-model", key, retries=retries, client=client
    )


def route_of(*providers: object, tracer: object) -> ProviderRoute:
    return ProviderRoute(providers, tracer, clock, agent_id="agent-7")  # type: ignore[arg-type]


def test_primary_answers_and_is_traced(model_servers: Servers, http_client: httpx.Client):
    primary, fallback = model_servers("openai"), model_servers("openai")
    primary.script(primary.ok("summary", prompt_tokens=40, completion_tokens=8))
    tracer = RecordingTracer()
    route = route_of(openai(primary, http_client, "a"), openai(fallback, http_client, "b"), tracer=tracer)

    response = route.complete(request())

    assert (response.text, response.provider, response.model) == ("summary", "a", "a-model")
    assert fallback.requests == []
    [trace] = tracer.traces
    assert trace.agent == "memory_reviewer"
    assert trace.agent_id == "agent-7"
    assert (trace.provider, trace.model, trace.outcome) == ("a", "a-model", "ok")
    assert (trace.prompt_tokens, trace.completion_tokens) == (40, 8)
    assert trace.latency_ms > 0
    assert trace.at == NOW


def test_timeout_falls_back_to_the_second_provider(model_servers: Servers, http_client: httpx.Client):
    primary, fallback = model_servers("openai"), model_servers("anthropic")
    primary.always(primary.slow(1.0))
    fallback.script(fallback.ok("from fallback", prompt_tokens=9, completion_tokens=2))
    tracer = RecordingTracer()
    second = AnthropicProvider("b", fallback.base_url, "b-model", None, retries=0, client=http_client)
    route = route_of(openai(primary, http_client, "a"), second, tracer=tracer)

    response = route.complete(request(timeout_s=0.3))

    assert (response.text, response.provider) == ("from fallback", "b")
    assert [(t.provider, t.outcome) for t in tracer.traces] == [("a", "unavailable"), ("b", "ok")]
    assert tracer.traces[0].latency_ms >= 250
    assert (tracer.traces[0].prompt_tokens, tracer.traces[0].completion_tokens) == (0, 0)
    assert (tracer.traces[1].prompt_tokens, tracer.traces[1].completion_tokens) == (9, 2)


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retryable_status_falls_back_after_retries(
    model_servers: Servers, http_client: httpx.Client, status: int
):
    primary, fallback = model_servers("openai"), model_servers("openai")
    primary.always(primary.error(status))
    tracer = RecordingTracer()
    route = route_of(
        openai(primary, http_client, "a", retries=1), openai(fallback, http_client, "b"), tracer=tracer
    )

    assert route.complete(request()).text == "ok"
    assert len(primary.requests) == 2  # retries + 1 on the primary before falling back
    assert len(fallback.requests) == 1
    assert [t.outcome for t in tracer.traces] == ["unavailable", "ok"]


def test_malformed_answer_falls_back(model_servers: Servers, http_client: httpx.Client):
    primary, fallback = model_servers("openai"), model_servers("openai")
    primary.always(primary.malformed())
    tracer = RecordingTracer()
    route = route_of(
        openai(primary, http_client, "a", retries=3), openai(fallback, http_client, "b"), tracer=tracer
    )

    assert route.complete(request()).text == "ok"
    assert len(primary.requests) == 1  # a malformed answer is not retried on the same provider
    assert [t.outcome for t in tracer.traces] == ["bad_response", "ok"]


def test_all_failing_raises_route_exhausted_with_each_error(
    model_servers: Servers, http_client: httpx.Client
):
    first, second, third = model_servers("openai"), model_servers("anthropic"), model_servers("openai")
    first.always(first.error(500))
    second.always(second.missing_fields())
    third.always(third.slow(1.0))
    tracer = RecordingTracer()
    route = route_of(
        openai(first, http_client, "a"),
        AnthropicProvider("b", second.base_url, "b-model", None, retries=0, client=http_client),
        openai(third, http_client, "c"),
        tracer=tracer,
    )

    with pytest.raises(RouteExhausted) as caught:
        route.complete(request(timeout_s=0.3))

    errors = caught.value.errors
    expected = [ModelUnavailable, ModelBadResponse, ModelUnavailable]
    assert len(errors) == 3
    assert all(isinstance(e, kind) for e, kind in zip(errors, expected, strict=True))
    assert "HTTP 500" in str(errors[0])
    assert "timed out" in str(errors[2])
    for name in ("'a'", "'b'", "'c'"):
        assert name in str(caught.value)
    assert [(t.provider, t.outcome) for t in tracer.traces] == [
        ("a", "unavailable"),
        ("b", "bad_response"),
        ("c", "unavailable"),
    ]


def test_agent_id_tag_overrides_the_route_default(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    tracer = RecordingTracer()
    route = route_of(openai(openai_server, http_client, "a"), tracer=tracer)

    route.complete(request(agent="compactor", agent_id="agent-9"))

    assert (tracer.traces[0].agent, tracer.traces[0].agent_id) == ("compactor", "agent-9")


class _BrokenTracer:
    def record(self, trace: ModelCallTrace) -> None:
        raise RuntimeError("trace sink down")


def test_a_failing_tracer_does_not_lose_the_answer(
    openai_server: LoopbackModelServer, http_client: httpx.Client, caplog: pytest.LogCaptureFixture
):
    route = route_of(openai(openai_server, http_client, "a"), tracer=_BrokenTracer())

    assert route.complete(request()).text == "ok"
    assert "tracer failed" in caplog.text


class _Exploding:
    name = "buggy"
    model = "bug-1"

    def complete(self, request: ChatRequest) -> ChatResponse:
        raise KeyError("a bug, not a provider failure")


def test_a_non_model_error_propagates_and_is_traced(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    tracer = RecordingTracer()
    route = route_of(_Exploding(), openai(openai_server, http_client, "a"), tracer=tracer)

    with pytest.raises(KeyError):
        route.complete(request())

    assert [(t.provider, t.model, t.outcome) for t in tracer.traces] == [("buggy", "bug-1", "error")]
    assert openai_server.requests == []


def test_route_needs_a_provider():
    with pytest.raises(ValueError):
        ProviderRoute([], RecordingTracer(), clock)


# --- build_provider ---------------------------------------------------------------------------


def test_build_openai_provider_reads_the_key_from_env(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    settings = ProviderSettings(
        name="primary",
        kind="openai",
        base_url=openai_server.base_url,
        model="m1",
        api_key_env="LOOPBACK_KEY",
        retries=2,
    )
    provider = build_provider(settings, {"LOOPBACK_KEY": KEY}, client=http_client)
    openai_server.script(openai_server.error(500), openai_server.error(500))

    assert isinstance(provider, OpenAICompatibleProvider)
    assert provider.complete(request()).text == "ok"
    assert len(openai_server.requests) == 3  # settings.retries is honoured
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert openai_server.requests[0].json["model"] == "m1"


def test_build_anthropic_provider(anthropic_server: LoopbackModelServer, http_client: httpx.Client):
    settings = ProviderSettings(
        name="claude", kind="anthropic", base_url=anthropic_server.base_url, model="c1", api_key_env="ANT_KEY"
    )
    provider = build_provider(settings, {"ANT_KEY": KEY}, client=http_client)

    assert isinstance(provider, AnthropicProvider)
    assert provider.complete(request()).text == "ok"
    assert anthropic_server.requests[0].headers["x-api-key"] == KEY


def test_build_without_api_key_env_sends_no_key(
    openai_server: LoopbackModelServer, http_client: httpx.Client
):
    settings = ProviderSettings(name="local", kind="openai", base_url=openai_server.base_url, model="llama")
    build_provider(settings, {"OPENAI_API_KEY": KEY}, client=http_client).complete(request())

    assert "authorization" not in openai_server.requests[0].headers


@pytest.mark.parametrize("env", [{}, {"MY_PROVIDER_KEY": ""}])
def test_missing_env_var_is_a_config_error_naming_the_variable(env: dict[str, str]):
    settings = ProviderSettings(name="primary", kind="openai", model="m", api_key_env="MY_PROVIDER_KEY")

    with pytest.raises(ConfigError, match="MY_PROVIDER_KEY") as caught:
        build_provider(settings, env)

    assert "primary" in str(caught.value)


def test_unknown_kind_and_missing_model_are_config_errors():
    with pytest.raises(ConfigError, match="kind"):
        build_provider(ProviderSettings(name="x", kind="gemini", model="m"), {})
    with pytest.raises(ConfigError, match="model"):
        build_provider(ProviderSettings(name="x", kind="anthropic"), {})


def test_rules_kind_is_imported_lazily(monkeypatch: pytest.MonkeyPatch):
    made: list[str] = []

    class RulesProvider:
        def __init__(self, *, name: str) -> None:
            made.append(name)
            self.name = name

    module = types.ModuleType("fermix_memory.adapters.providers.rules")
    module.RulesProvider = RulesProvider  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fermix_memory.adapters.providers.rules", module)

    provider = build_provider(ProviderSettings(name="offline", kind="rules"), {})

    assert isinstance(provider, RulesProvider)
    assert made == ["offline"]


# --- the README's provider examples -------------------------------------------------------------------

# example name -> what a compaction call ("medium" effort, 1024 tokens) sends
README_EXAMPLES = {
    "openai-o4": {"max_completion_tokens": 1024 + 4096, "reasoning_effort": "medium"},
    "openai-4o": {"max_tokens": 1024},
    "claude": {"max_tokens": 1024 + 4096, "thinking": {"type": "enabled", "budget_tokens": 4096}},
    "ollama": {"max_tokens": 1024},
    "vllm": {"max_tokens": 1024},
    "litellm": {"max_completion_tokens": 1024 + 1024, "reasoning_effort": "low"},
}
LIMIT_KEYS = ("max_tokens", "max_completion_tokens", "reasoning_effort", "thinking")


def readme_provider_examples() -> list[ProviderSettings]:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Model providers", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, re.DOTALL)
    return [p for block in blocks for p in settings_from_mapping(tomllib.loads(block), "README.md").providers]


def test_readme_provider_examples_build_and_send_the_documented_parameters(
    model_servers: Servers, http_client: httpx.Client
):
    examples = readme_provider_examples()
    assert [p.name for p in examples] == list(README_EXAMPLES)
    env = {p.api_key_env: "sk-example" for p in examples if p.api_key_env}
    for settings in examples:
        server = model_servers(settings.kind)
        provider = build_provider(attrs.evolve(settings, base_url=server.base_url), env, client=http_client)
        provider.complete(ChatRequest(messages=(ChatMessage(role="user", content="Summarise."),), max_tokens=1024,
                                      reasoning_effort="medium", timeout_s=2.0))
        sent = server.requests[-1].json
        assert {k: sent[k] for k in LIMIT_KEYS if k in sent} == README_EXAMPLES[settings.name], settings.name


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [("openai", "structured_output", "tool"), ("anthropic", "structured_output", "json_schema"),
     ("anthropic", "max_tokens_field", "max_completion_tokens")],
)
def test_a_parameter_setting_of_the_other_kind_is_a_config_error(kind: str, key: str, value: str):
    settings = ProviderSettings(name="p", kind=kind, model="m", **{key: value})

    with pytest.raises(ConfigError, match=f'{key} "{value}" is for kind'):
        build_provider(settings, {})
