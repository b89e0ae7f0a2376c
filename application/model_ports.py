"""The model providers' ports: one bounded chat-completion call, the model that answers it and
the trace each call leaves."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

import attrs


@attrs.frozen(kw_only=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@attrs.frozen(kw_only=True)
class ChatRequest:
    """One bounded chat-completion call."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int = 1024
    reasoning_effort: str | None = None
    timeout_s: float = 120.0
    json_output: bool = False
    # A JSON schema the answer must match (``json_output`` must be set too). Providers send it
    # as structured output where the server accepts it (OpenAI ``json_schema``, Anthropic a
    # forced tool call) and fall back to plain JSON mode, then to text, where it does not.
    output_schema: Mapping[str, Any] | None = None
    output_schema_name: str = "answer"
    # ``check`` raises ``ModelBadResponse`` for an answer the caller cannot use. A provider
    # route then gives the same provider one repair turn (its answer, then ``repair_prompt``
    # and the error), and only then tries the next provider. No ``repair_prompt``: no repair turn.
    check: Callable[[str], None] | None = attrs.field(default=None, eq=False)
    repair_prompt: str = ""
    tags: Mapping[str, str] = attrs.field(factory=dict)  # e.g. {"agent": "memory_reviewer"}


@attrs.frozen(kw_only=True)
class ChatResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    provider: str = ""
    model: str = ""  # the configured model
    served_model: str = ""  # the model the server says answered ("" when it did not say)
    attempts: int = 1  # HTTP requests this answer took (retries and parameter fallbacks included)
    notes: tuple[str, ...] = ()  # request adjustments made on the way, e.g. a parameter dropped


class ChatModel(Protocol):
    """A chat-completion provider (or a route of them). Raises ``ModelError`` subclasses."""

    @property
    def name(self) -> str: ...

    def complete(self, request: ChatRequest) -> ChatResponse: ...


@attrs.frozen(kw_only=True)
class ModelCallTrace:
    agent: str
    agent_id: str
    provider: str
    model: str
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    outcome: str  # "ok" | "timeout" | "unavailable" | "rate_limited" | "bad_response" | ...
    at: datetime
    served_model: str = ""  # what the server says it served; ``model`` is the configured one
    attempts: int = 1  # HTTP requests made to this provider for this call (retries included)
    notes: tuple[str, ...] = ()  # adjustments (a parameter dropped) and repair turns


class Tracer(Protocol):
    def record(self, trace: ModelCallTrace) -> None: ...
