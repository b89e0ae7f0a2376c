"""A provider route (primary, then fallbacks in order) and the factory for configured providers,
built at once or, while their key is missing, on their first call."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from fermix_memory.adapters.providers._params import attempts_of
from fermix_memory.application.errors import (
    ConfigError,
    ModelBadResponse,
    ModelError,
    ModelUnavailable,
    ProviderKeyMissing,
    RouteExhausted,
    UnusableAnswer,
)
from fermix_memory.application.model_ports import (
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ModelCallTrace,
    Tracer,
)
from fermix_memory.application.settings import ProviderSettings

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("fermix_memory.providers")

DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


class ProviderRoute:
    """A :class:`ChatModel` that tries its providers in order until one answers.

    A provider that is unavailable *or* answers malformed is skipped for the next one: either
    way this call got no usable answer from it, and another server may still give one. An
    answer that ``request.check`` refuses first gets one repair turn on the same provider
    (when the request has a ``repair_prompt``), then the next provider is tried. Every call
    leaves one :class:`ModelCallTrace` (outcome ``ok``, ``rejected``, ``unavailable``,
    ``bad_response`` or ``error``, with the served model, the HTTP attempts and notes); the
    trace's ``agent`` is ``request.tags["agent"]`` and its ``agent_id`` is
    ``request.tags["agent_id"]`` if given, else the route's ``agent_id``.
    When all fail, :class:`RouteExhausted` carries each provider's error, in order.
    """

    def __init__(
        self,
        providers: Sequence[ChatModel],
        tracer: Tracer,
        clock: Callable[[], datetime],
        agent_id: str = "",
    ) -> None:
        if not providers:
            raise ValueError("a provider route needs at least one provider")
        self._providers = tuple(providers)
        self._tracer = tracer
        self._clock = clock
        self._agent_id = agent_id

    @property
    def name(self) -> str:
        return "route:" + ",".join(p.name for p in self._providers)

    @property
    def providers(self) -> tuple[ChatModel, ...]:
        return self._providers

    def complete(self, request: ChatRequest) -> ChatResponse:
        errors: list[ModelError] = []
        for provider in self._providers:
            try:
                response, problem = self._call(provider, request)
                if problem is not None and request.repair_prompt:
                    log.warning("provider %r answered unusably, one repair turn: %s", provider.name,
                                _without_answer(problem))
                    response, problem = self._call(provider, _repair_request(request, response.text, problem))
                if problem is not None:
                    raise problem
                return response
            except ModelError as exc:
                errors.append(exc)
        summary = "; ".join(str(e) for e in errors)
        raise RouteExhausted(f"all {len(errors)} providers failed: {summary}", errors)

    def _call(self, provider: ChatModel, request: ChatRequest) -> tuple[ChatResponse, ModelBadResponse | None]:
        """One traced call, and why ``request.check`` refuses its answer (traced as ``rejected``)."""
        started = time.perf_counter()
        try:
            response = provider.complete(request)
        except ModelError as exc:
            self._trace(request, provider, started, _outcome(exc), attempts=attempts_of(exc))
            log.warning("model call failed (%s): %s", _outcome(exc), exc)
            raise
        except Exception:
            # A bug, not a provider failure: trace it, then let it surface.
            self._trace(request, provider, started, "error")
            raise
        if not response.provider or not response.model:
            response = attrs.evolve(
                response,
                provider=response.provider or provider.name,
                model=response.model or _model_of(provider),
            )
        problem: ModelBadResponse | None = None
        if request.check is not None:
            try:
                request.check(response.text)
            except ModelBadResponse as exc:
                problem = exc
        self._trace(request, provider, started, "ok" if problem is None else "rejected", response)
        return response, problem

    def _trace(
        self,
        request: ChatRequest,
        provider: ChatModel,
        started: float,
        outcome: str,
        response: ChatResponse | None = None,
        *,
        attempts: int = 1,
    ) -> None:
        note = request.tags.get("note", "")
        trace = ModelCallTrace(
            agent=request.tags.get("agent", ""),
            agent_id=request.tags.get("agent_id") or self._agent_id,
            provider=provider.name,
            model=response.model if response is not None else _model_of(provider),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            prompt_tokens=response.prompt_tokens if response is not None else 0,
            completion_tokens=response.completion_tokens if response is not None else 0,
            outcome=outcome,
            at=self._clock(),
            served_model=response.served_model if response is not None else "",
            attempts=response.attempts if response is not None else attempts,
            notes=((note,) if note else ()) + (response.notes if response is not None else ()),
        )
        try:
            self._tracer.record(trace)
        except Exception:
            # Losing a trace must not lose the answer the caller paid for.
            log.exception("tracer failed to record a model call trace")


REPAIR_ERROR_CHARS = 300  # the error quoted back to the model, so a repair turn stays small


def _without_answer(error: ModelBadResponse) -> str:
    """What was wrong with an answer, without its words: the repair turn's trace note and the
    log keep no model output (an echoing model would put the owner's words there, in an event
    that forgetting an owner does not touch)."""
    return error.without_answer if isinstance(error, UnusableAnswer) else "the answer was refused by its check"


def _repair_request(request: ChatRequest, answer: str, error: ModelBadResponse) -> ChatRequest:
    """``request`` continued by the unusable answer and one message naming what was wrong (to
    the model only: the trace note names the problem without quoting the answer)."""
    problem = " ".join(str(error).split())[:REPAIR_ERROR_CHARS]
    return attrs.evolve(
        request,
        messages=(
            *request.messages,
            ChatMessage(role="assistant", content=answer),
            ChatMessage(role="user", content=f"{request.repair_prompt}\nThe problem: {problem}"),
        ),
        tags={**request.tags, "note": f"repair turn after: {_without_answer(error)}"},
    )


def _outcome(exc: ModelError) -> str:
    if isinstance(exc, ModelUnavailable):
        return "unavailable"
    if isinstance(exc, ModelBadResponse):
        return "bad_response"
    return "error"


def _model_of(provider: ChatModel) -> str:
    model = getattr(provider, "model", "")
    return model if isinstance(model, str) else ""


def close_model(model: object) -> None:
    """Close a provider its builder owns: HTTP providers hold a connection pool, others hold nothing."""
    close = getattr(model, "close", None)
    if callable(close):
        close()


class OfflineRules:
    """The offline ``rules`` model (:class:`~fermix_memory.adapters.providers.rules.RulesProvider`),
    its extractor and patterns imported on the first call: a home without providers opens, and a
    command that never reviews runs, without compiling them."""

    def __init__(self, name: str = "rules") -> None:
        self._name = name
        self._model: ChatModel | None = None

    @property
    def name(self) -> str:
        return self._name

    def complete(self, request: ChatRequest) -> ChatResponse:
        if self._model is None:  # two first calls at once build two: the model holds no state
            from fermix_memory.adapters.providers.rules import RulesProvider

            self._model = RulesProvider(name=self._name)
        return self._model.complete(request)


def build_provider(
    settings: ProviderSettings, env: Mapping[str, str], client: httpx.Client | None = None
) -> ChatModel:
    """Build the adapter for one configured provider, its API key read from ``env``.

    Only the *name* of the key's variable is configuration; a missing (or empty) variable is a
    :class:`ConfigError` naming it. An empty ``base_url`` means the vendor's public endpoint.
    """
    where = f"provider {settings.name!r}"
    if settings.kind == "rules":
        # Imported here so the HTTP providers work without the rules module.
        from fermix_memory.adapters.providers.rules import RulesProvider

        rules: ChatModel = RulesProvider(name=settings.name)
        return rules
    if settings.kind not in DEFAULT_BASE_URLS:
        raise ConfigError(f"{where}: unknown kind {settings.kind!r} (expected openai, anthropic or rules)")
    if not settings.model:
        raise ConfigError(f"{where}: 'model' is required for kind {settings.kind!r}")
    api_key: str | None = None
    if settings.api_key_env:
        api_key = env.get(settings.api_key_env) or None
        if api_key is None:
            raise ConfigError(
                f"{where}: environment variable {settings.api_key_env} (named by api_key_env) is not set"
            )
    base_url = settings.base_url or DEFAULT_BASE_URLS[settings.kind]
    structured = settings.structured_output
    # The HTTP adapters (and httpx) are loaded when a provider is configured, not by every
    # start of the library or the CLI: the default, offline set-up never needs them.
    from fermix_memory.adapters.providers.anthropic import AnthropicProvider
    from fermix_memory.adapters.providers.openai_compat import OpenAICompatibleProvider

    if settings.kind == "openai":
        if structured == "tool":
            raise ConfigError(f'{where}: structured_output "tool" is for kind "anthropic"')
        return OpenAICompatibleProvider(
            settings.name, base_url, settings.model, api_key, retries=settings.retries, client=client,
            reasoning_effort=settings.reasoning_effort, max_tokens_field=settings.max_tokens_field,
            structured_output=structured,
        )
    if structured in ("json_schema", "json_object"):
        raise ConfigError(f'{where}: structured_output "{structured}" is for kind "openai"')
    if settings.max_tokens_field == "max_completion_tokens":
        raise ConfigError(f'{where}: max_tokens_field "max_completion_tokens" is for kind "openai"')
    return AnthropicProvider(
        settings.name, base_url, settings.model, api_key, retries=settings.retries, client=client,
        reasoning_effort=settings.reasoning_effort, structured_output=structured,
    )


def key_present(settings: ProviderSettings, env: Mapping[str, str]) -> bool:
    """Whether the provider's key variable is set (or it needs none)."""
    return not settings.api_key_env or bool(env.get(settings.api_key_env))


class KeyNeeded:
    """A configured provider whose key variable was not set when memory opened. Opening, reading
    and auditing never need the key: the provider is built on its first call, and if the variable
    is still unset that call fails with :class:`ProviderKeyMissing` (the route moves on)."""

    def __init__(self, settings: ProviderSettings, env: Mapping[str, str]) -> None:
        self._settings = settings
        self._env = env
        self._built: ChatModel | None = None

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def model(self) -> str:
        return self._settings.model

    def complete(self, request: ChatRequest) -> ChatResponse:
        if self._built is None:
            if not key_present(self._settings, self._env):
                raise ProviderKeyMissing(
                    f"provider {self._settings.name!r}: environment variable {self._settings.api_key_env}"
                    " (named by api_key_env) is not set"
                )
            self._built = build_provider(self._settings, self._env)
        return self._built.complete(request)

    def close(self) -> None:
        if self._built is not None:
            close_model(self._built)
