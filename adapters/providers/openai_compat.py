"""OpenAI-compatible Chat Completions adapter (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter)."""

from __future__ import annotations

from typing import Any

import httpx

from fermix_memory.adapters.providers._http import JsonPoster, int_field
from fermix_memory.adapters.providers._params import (
    DEFAULT_SERVER_EFFORT,
    EFFORTS,
    REASONING_ALLOWANCE,
    Learned,
    default_limit_field,
    reasoning_model,
    unsupported_parameter,
)
from fermix_memory.application.errors import ModelBadResponse, ModelError
from fermix_memory.application.model_ports import ChatRequest, ChatResponse

STRUCTURED_MODES = ("json_schema", "json_object", "none")  # best first: a 400 steps down one


class OpenAICompatibleProvider:
    """A :class:`~fermix_memory.application.model_ports.ChatModel` over ``POST {base_url}/chat/completions``.

    ``base_url`` includes the API version, e.g. ``https://api.openai.com/v1`` or
    ``http://127.0.0.1:11434/v1``. ``retries`` extra attempts are made on this provider when
    it is unavailable, before the error is raised.

    Optional parameters, each ``auto`` by default:

    * ``reasoning_effort``: ``auto`` sends the caller's effort only to models known to take
      one (o-series, gpt-5, gpt-oss); ``none`` never sends it; a level sends that level on
      every call that asks for reasoning.
    * ``max_tokens_field``: ``auto`` sends ``max_completion_tokens`` to o-series and gpt-5
      models and ``max_tokens`` elsewhere. When reasoning is on, the limit also holds
      :data:`REASONING_ALLOWANCE` for the reasoning tokens, so the answer still fits.
    * ``structured_output``: ``auto``/``json_schema`` sends the caller's JSON schema as
      ``response_format: json_schema``; ``json_object`` plain JSON mode; ``none`` neither.

    A 400 naming one of these as unsupported makes the provider retry at once without it (or
    with the other limit field, or one structured-output mode down) and remember that.
    """

    def __init__(
        self,
        name: str,
        base_url: str,
        model: str,
        api_key: str | None,
        *,
        retries: int = 1,
        client: httpx.Client | None = None,
        reasoning_effort: str = "auto",
        max_tokens_field: str = "auto",
        structured_output: str = "auto",
    ) -> None:
        self._name = name
        self._model = model
        headers = {"accept": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._http = JsonPoster(
            name,
            f"{base_url.rstrip('/')}/chat/completions",
            headers,
            secret=api_key,
            retries=retries,
            client=client,
        )
        self._effort = reasoning_effort
        self._learned = Learned()
        self._learned.set("limit_field", default_limit_field(model) if max_tokens_field == "auto" else max_tokens_field)
        self._learned.set("structured", "json_schema" if structured_output == "auto" else structured_output)
        self._learned.set("reasoning", "on")

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    def complete(self, request: ChatRequest) -> ChatResponse:
        data, attempts, notes = self._http.post_adapting(
            lambda: self._body(request), self._learn, request.timeout_s
        )
        return self._parse(data, attempts, notes)

    def close(self) -> None:
        """Close the HTTP client if this provider created it."""
        self._http.close()

    def effort_for(self, request: ChatRequest) -> str | None:
        """The reasoning effort this provider sends for ``request`` (``None``: not sent)."""
        asked = request.reasoning_effort
        if asked not in EFFORTS or self._effort == "none" or self._learned.get("reasoning", "on") == "off":
            return None
        if self._effort == "auto":
            return asked if reasoning_model("openai", self._model) else None
        return self._effort

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        effort = self.effort_for(request)
        limit = request.max_tokens
        if effort is not None:
            body["reasoning_effort"] = effort
            limit += REASONING_ALLOWANCE[effort]
        elif reasoning_model("openai", self._model) and self._effort != "none":
            limit += REASONING_ALLOWANCE[DEFAULT_SERVER_EFFORT]  # it reasons anyway
        body[self._learned.get("limit_field", "max_tokens")] = limit
        if request.json_output:
            mode = self._learned.get("structured", "json_schema")
            if mode == "json_schema" and request.output_schema is not None:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": request.output_schema_name,
                        "schema": dict(request.output_schema),
                        "strict": False,
                    },
                }
            elif mode in ("json_schema", "json_object"):
                body["response_format"] = {"type": "json_object"}
        return body

    def _learn(self, exc: ModelError, body: dict[str, Any]) -> str | None:
        """Adapt to a refused parameter (once each); the trace note, or ``None`` to give up."""
        sent = [k for k in ("reasoning_effort", "max_tokens", "max_completion_tokens", "response_format") if k in body]
        if "response_format" in body:
            sent.append(body["response_format"]["type"])  # "json_schema is not supported"
        param = unsupported_parameter(exc, sent) if isinstance(exc, ModelBadResponse) else None
        if param == "reasoning_effort":
            self._learned.set("reasoning", "off")
            return "reasoning_effort refused by the server: no longer sent"
        if param in ("max_tokens", "max_completion_tokens"):
            other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"
            if self._learned.get("switched_limit", "") == "yes":
                return None  # both refused: the refusal is about something else
            self._learned.set("switched_limit", "yes")
            self._learned.set("limit_field", other)
            return f"{param} refused by the server: {other} sent instead"
        if param in ("response_format", "json_schema", "json_object"):
            sent_mode = body["response_format"]["type"]  # json_schema, or json_object
            lower = STRUCTURED_MODES[STRUCTURED_MODES.index(sent_mode) + 1]
            self._learned.set("structured", lower)
            return f"response_format {sent_mode} refused by the server: {lower} from now on"
        return None

    def _parse(self, data: dict[str, Any], attempts: int, notes: tuple[str, ...]) -> ChatResponse:
        where = f"provider {self._name!r} ({self._http.url})"
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelBadResponse(f"{where}: answer has no choices[0]")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise ModelBadResponse(f"{where}: answer has no choices[0].message")
        content = message.get("content")
        if not isinstance(content, str):
            raise ModelBadResponse(
                f"{where}: choices[0].message.content is {type(content).__name__}, not a string"
            )
        usage = data.get("usage")
        served = data.get("model")
        return ChatResponse(
            text=content,
            prompt_tokens=int_field(usage, "prompt_tokens"),
            completion_tokens=int_field(usage, "completion_tokens"),
            provider=self._name,
            model=self._model,
            served_model=served if isinstance(served, str) else "",
            attempts=attempts,
            notes=notes,
        )
