"""OpenAI-compatible Chat Completions adapter (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter)."""

from __future__ import annotations

from typing import Any

import httpx

from fermix_memory.adapters.providers._http import JsonPoster, int_field
from fermix_memory.application.errors import ModelBadResponse
from fermix_memory.application.ports import ChatRequest, ChatResponse


class OpenAICompatibleProvider:
    """A :class:`~fermix_memory.application.ports.ChatModel` over ``POST {base_url}/chat/completions``.

    ``base_url`` includes the API version, e.g. ``https://api.openai.com/v1`` or
    ``http://127.0.0.1:11434/v1``. The limit is sent as ``max_tokens``, the field every
    compatible server accepts (``max_completion_tokens`` is OpenAI-only). ``retries`` extra
    attempts are made on this provider when it is unavailable, before the error is raised.
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

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    def complete(self, request: ChatRequest) -> ChatResponse:
        data = self._http.post(self._body(request), request.timeout_s)
        return self._parse(data)

    def close(self) -> None:
        """Close the HTTP client if this provider created it."""
        self._http.close()

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": request.max_tokens,
        }
        if request.reasoning_effort and request.reasoning_effort != "none":
            body["reasoning_effort"] = request.reasoning_effort
        if request.json_output:
            body["response_format"] = {"type": "json_object"}
        return body

    def _parse(self, data: dict[str, Any]) -> ChatResponse:
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
        return ChatResponse(
            text=content,
            prompt_tokens=int_field(usage, "prompt_tokens"),
            completion_tokens=int_field(usage, "completion_tokens"),
            provider=self._name,
            model=self._model,
        )
