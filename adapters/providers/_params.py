"""Which optional request parameters a provider sends, and how a server's refusal of one is read.

Real servers differ: a gpt-4o deployment answers 400 to ``reasoning_effort``, an o-series
model refuses ``max_tokens`` and wants ``max_completion_tokens``, many local servers know no
``json_schema`` response format, and only some Claude models can think. Each provider starts
from its configuration (``auto`` guesses from the model name, see :func:`reasoning_model`) and,
when a 400 names a parameter it sent as unsupported, drops or switches that parameter once,
remembers it for the life of the provider, and notes it in the call's trace.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

import attrs

from fermix_memory.application.errors import ModelBadResponse

EFFORTS = ("minimal", "low", "medium", "high")

# Output tokens reserved for thinking / reasoning per effort, ON TOP of the answer's
# ``max_tokens``: Anthropic's ``budget_tokens`` (the API's minimum is 1024) and the extra room
# an OpenAI reasoning model gets in ``max_completion_tokens``, which counts its reasoning too.
REASONING_ALLOWANCE: dict[str, int] = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}
# What an OpenAI reasoning model does when no effort is sent (the server's default).
DEFAULT_SERVER_EFFORT = "medium"

_OPENAI_REASONING = re.compile(r"^(o\d|gpt-5(?!.*-chat)|gpt-oss)")
_OPENAI_COMPLETION_TOKENS = re.compile(r"^(o\d|gpt-5)")
_ANTHROPIC_THINKING = re.compile(r"^claude-(3-7-|(opus|sonnet|haiku)-4|4)")

# Words a server uses when it refuses a parameter rather than a value.
_REFUSAL_WORDS = (
    "unsupported",
    "not support",
    "unrecognized",
    "unrecognised",
    "unknown",
    "extra inputs",
    "extra_forbidden",
    "not permitted",
    "not allowed",
    "invalid parameter",
    "does not accept",
    "unexpected",
    "must be one of",  # llama.cpp: 'response_format type must be one of "text" or "json_object"'
    "is not one of",
)


def _base_model(model: str) -> str:
    # "openai/o3-mini", "azure/gpt-5" and "o3-mini" are the same model family.
    return model.rsplit("/", 1)[-1].lower()


def reasoning_model(kind: str, model: str) -> bool:
    """Whether ``model`` is known to accept a reasoning effort (OpenAI) or thinking (Anthropic)."""
    pattern = _ANTHROPIC_THINKING if kind == "anthropic" else _OPENAI_REASONING
    return bool(pattern.match(_base_model(model)))


def default_limit_field(model: str) -> str:
    """``max_completion_tokens`` for OpenAI's o-series and gpt-5 models, ``max_tokens`` otherwise."""
    return "max_completion_tokens" if _OPENAI_COMPLETION_TOKENS.match(_base_model(model)) else "max_tokens"


class ProviderRejected(ModelBadResponse):
    """A 4xx other than 408/429: the server refused this request (not a transient failure)."""

    def __init__(self, message: str, *, status: int, error_text: str, param: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.error_text = error_text
        self.param = param


def error_details(data: Any) -> tuple[str, str | None]:
    """``(message, param)`` of an error body in OpenAI's or Anthropic's shape."""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        param = error.get("param")
        return (message if isinstance(message, str) else ""), (param if isinstance(param, str) else None)
    if isinstance(error, str):
        return error, None
    detail = data.get("detail") if isinstance(data, dict) else None
    return (str(detail) if detail is not None else ""), None


def unsupported_parameter(exc: ModelBadResponse, sent: Iterable[str]) -> str | None:
    """The parameter among ``sent`` that a 400/422 refusal names as unsupported, if any.

    The error's ``param`` field wins; otherwise the message must use a refusal word and name
    a sent parameter (the first one named counts: "Unsupported parameter: 'max_tokens' ...
    use 'max_completion_tokens' instead" names ``max_tokens``).
    """
    if not isinstance(exc, ProviderRejected) or exc.status not in (400, 422):
        return None
    names = list(sent)
    if exc.param in names:
        return exc.param
    text = exc.error_text.lower()
    if not any(word in text for word in _REFUSAL_WORDS):
        return None
    found: list[tuple[int, str]] = []
    for name in names:
        match = re.search(rf"(?<![a-z_]){re.escape(name)}(?![a-z_])", text)
        if match:
            found.append((match.start(), name))
    return min(found)[1] if found else None


@attrs.define
class Learned:
    """What a server has told this provider it refuses; shared by every call, under a lock."""

    values: dict[str, str] = attrs.field(factory=dict)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def get(self, name: str, default: str) -> str:
        with self.lock:
            return self.values.get(name, default)

    def set(self, name: str, value: str) -> None:
        with self.lock:
            self.values[name] = value


def attempts_of(exc: BaseException) -> int:
    """How many HTTP requests a failed call made (1 when the error does not say)."""
    attempts = getattr(exc, "attempts", 1)
    return attempts if isinstance(attempts, int) and attempts > 0 else 1
