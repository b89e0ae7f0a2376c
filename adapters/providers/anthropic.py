"""Anthropic Messages API adapter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from fermix_memory.adapters.providers._http import JsonPoster, int_field
from fermix_memory.application.errors import ModelBadResponse
from fermix_memory.application.ports import ChatMessage, ChatRequest, ChatResponse

ANTHROPIC_VERSION = "2023-06-01"

# Extended-thinking budget per reasoning effort. The API wants 1024 <= budget < max_tokens, so a
# budget that does not fit under the request's max_tokens is left out rather than raising it:
# max_tokens is the caller's cost bound.
THINKING_BUDGETS: dict[str, int] = {"low": 1024, "medium": 4096, "high": 16384}


class AnthropicProvider:
    """A :class:`~fermix_memory.application.ports.ChatModel` over ``POST {base_url}/v1/messages``.

    ``base_url`` is the API root without the version, e.g. ``https://api.anthropic.com`` (a
    trailing ``/v1`` is tolerated). System messages become the top-level ``system`` field;
    consecutive messages of the same role are merged, as the API requires alternation.
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
        root = base_url.rstrip("/")
        root = root.removesuffix("/v1")
        headers = {
            "accept": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
        }
        if api_key:
            headers["x-api-key"] = api_key
        self._http = JsonPoster(
            name, f"{root}/v1/messages", headers, secret=api_key, retries=retries, client=client
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
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_tokens,
            "messages": _alternating(m for m in request.messages if m.role != "system"),
        }
        if system:
            body["system"] = system
        budget = THINKING_BUDGETS.get(request.reasoning_effort or "")
        if budget is not None and budget < request.max_tokens:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        return body

    def _parse(self, data: dict[str, Any]) -> ChatResponse:
        where = f"provider {self._name!r} ({self._http.url})"
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise ModelBadResponse(f"{where}: answer has no content list")
        texts: list[str] = []
        for block in blocks:
            if not isinstance(block, dict):
                raise ModelBadResponse(f"{where}: content block is {type(block).__name__}, not an object")
            if block.get("type") != "text":
                continue  # thinking, tool_use, ...: not part of the answer text
            text = block.get("text")
            if not isinstance(text, str):
                raise ModelBadResponse(f"{where}: text block has {type(text).__name__} text, not a string")
            texts.append(text)
        usage = data.get("usage")
        # input_tokens excludes cached prompt tokens; the prompt size (used to decide compaction)
        # is the sum of all three.
        prompt_tokens = (
            int_field(usage, "input_tokens")
            + int_field(usage, "cache_creation_input_tokens")
            + int_field(usage, "cache_read_input_tokens")
        )
        return ChatResponse(
            text="".join(texts),
            prompt_tokens=prompt_tokens,
            completion_tokens=int_field(usage, "output_tokens"),
            provider=self._name,
            model=self._model,
        )


def _alternating(messages: Iterable[ChatMessage]) -> list[dict[str, str]]:
    merged: list[dict[str, str]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"] += "\n\n" + message.content
        else:
            merged.append({"role": role, "content": message.content})
    return merged
