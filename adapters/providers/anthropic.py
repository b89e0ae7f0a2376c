"""Anthropic Messages API adapter."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import httpx

from fermix_memory.adapters.providers._http import JsonPoster, int_field
from fermix_memory.adapters.providers._params import (
    EFFORTS,
    REASONING_ALLOWANCE,
    Learned,
    reasoning_model,
    unsupported_parameter,
)
from fermix_memory.application.errors import ModelBadResponse, ModelError
from fermix_memory.application.model_ports import ChatMessage, ChatRequest, ChatResponse

ANTHROPIC_VERSION = "2023-06-01"

# Extended thinking: the effort's budget from REASONING_ALLOWANCE (low and minimal 1024,
# medium 4096, high 16384; the API's minimum is 1024) is ADDED to the answer's max_tokens,
# since the API counts thinking inside max_tokens and wants budget_tokens < max_tokens.
THINKING_BUDGETS: dict[str, int] = dict(REASONING_ALLOWANCE)
OUTPUT_TOOL_DESCRIPTION = "Record the answer. Its input is the whole answer, in the given schema."


class AnthropicProvider:
    """A :class:`~fermix_memory.application.model_ports.ChatModel` over ``POST {base_url}/v1/messages``.

    ``base_url`` is the API root without the version, e.g. ``https://api.anthropic.com`` (a
    trailing ``/v1`` is tolerated). System messages become the top-level ``system`` field;
    consecutive messages of the same role are merged, as the API requires alternation.

    ``reasoning_effort`` (``auto``: the caller's effort, for models known to think; ``none``;
    or a level) turns on extended thinking with :data:`THINKING_BUDGETS`. ``structured_output``
    (``auto``/``tool``: a request with a JSON schema becomes one forced tool call whose input
    schema is that schema, and the tool's input is the answer text; ``none``: plain text). A
    forced tool call cannot be combined with thinking, so a structured request does not think.
    A 400 naming ``thinking`` or ``tools`` as unsupported turns that feature off for good.
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
        structured_output: str = "auto",
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
        self._effort = reasoning_effort
        self._learned = Learned()
        self._learned.set("thinking", "on")
        self._learned.set("tools", "off" if structured_output == "none" else "on")

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
        return self._parse(data, request, attempts, notes)

    def close(self) -> None:
        """Close the HTTP client if this provider created it."""
        self._http.close()

    def effort_for(self, request: ChatRequest) -> str | None:
        """The effort whose thinking budget this provider sends for ``request`` (``None``: no thinking)."""
        asked = request.reasoning_effort
        if asked not in EFFORTS or self._effort == "none" or self._learned.get("thinking", "on") == "off":
            return None
        if self._uses_tool(request):
            return None
        if self._effort == "auto":
            return asked if reasoning_model("anthropic", self._model) else None
        return self._effort

    def _uses_tool(self, request: ChatRequest) -> bool:
        return request.json_output and request.output_schema is not None and self._learned.get("tools", "on") == "on"

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_tokens,
            "messages": _alternating(m for m in request.messages if m.role != "system"),
        }
        if system:
            body["system"] = system
        effort = self.effort_for(request)
        if effort is not None:
            budget = THINKING_BUDGETS[effort]
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = request.max_tokens + budget
        if self._uses_tool(request) and request.output_schema is not None:
            body["tools"] = [{
                "name": request.output_schema_name,
                "description": OUTPUT_TOOL_DESCRIPTION,
                "input_schema": dict(request.output_schema),
            }]
            body["tool_choice"] = {"type": "tool", "name": request.output_schema_name}
        return body

    def _learn(self, exc: ModelError, body: dict[str, Any]) -> str | None:
        sent = [k for k in ("thinking", "tools", "tool_choice") if k in body]
        param = unsupported_parameter(exc, sent) if isinstance(exc, ModelBadResponse) else None
        if param == "thinking":
            self._learned.set("thinking", "off")
            return "thinking refused by the server: no longer sent"
        if param in ("tools", "tool_choice"):
            self._learned.set("tools", "off")
            return "tool use refused by the server: structured answers asked for as text from now on"
        return None

    def _parse(self, data: dict[str, Any], request: ChatRequest, attempts: int,
               notes: tuple[str, ...]) -> ChatResponse:
        where = f"provider {self._name!r} ({self._http.url})"
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise ModelBadResponse(f"{where}: answer has no content list")
        texts: list[str] = []
        tool_input: str | None = None
        for block in blocks:
            if not isinstance(block, dict):
                raise ModelBadResponse(f"{where}: content block is {type(block).__name__}, not an object")
            if block.get("type") == "tool_use" and block.get("name") == request.output_schema_name:
                if not isinstance(block.get("input"), dict):
                    raise ModelBadResponse(f"{where}: tool_use block has no input object")
                tool_input = json.dumps(block["input"], ensure_ascii=False)
                continue
            if block.get("type") != "text":
                continue  # thinking, other tools, ...: not part of the answer text
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
        served = data.get("model")
        return ChatResponse(
            # The forced tool's input is the answer; text beside it is commentary.
            text=tool_input if tool_input is not None else "".join(texts),
            prompt_tokens=prompt_tokens,
            completion_tokens=int_field(usage, "output_tokens"),
            provider=self._name,
            model=self._model,
            served_model=served if isinstance(served, str) else "",
            attempts=attempts,
            notes=notes,
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
