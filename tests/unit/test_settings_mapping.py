"""settings_from_mapping: the validation of a parsed config.toml, without any file."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings import (
    SECTIONS,
    CompactionSettings,
    McpSettings,
    McpTokenSettings,
    MemorySettings,
    ProviderSettings,
    RealtimeSettings,
    Settings,
    TimeoutSettings,
    knobs_of,
    settings_from_mapping,
)
from fermix_memory.application.settings_storage import StorageSettings

SOURCE = "config.toml"
SECTION_CLASSES: dict[str, type[Any]] = {
    "memory": MemorySettings,
    "compaction": CompactionSettings,
    "timeouts": TimeoutSettings,
    "realtime": RealtimeSettings,
    "mcp": McpSettings,
    "storage": StorageSettings,
}


def load(core: dict[str, Any]) -> Settings:
    return settings_from_mapping({"fermix_core": core}, SOURCE)


def error_of(core: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load(core)
    return str(caught.value)


def field_names(cls: type[Any]) -> set[str]:
    return {f.name for f in attrs.fields(cls)}


OPENAI: dict[str, Any] = {
    "name": "main",
    "kind": "openai",
    "base_url": "https://api.openai.com/v1",
    "model": "gpt-4o",
}


# --- defaults ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"fermix_core": {}},
        {"fermix_core": {"memory": {}, "compaction": {}, "timeouts": {}, "realtime": {}, "providers": []}},
    ],
)
def test_absent_or_empty_tables_give_the_defaults(data: dict[str, Any]) -> None:
    assert settings_from_mapping(data, SOURCE) == Settings()


def test_other_top_level_tables_belong_to_the_host_and_are_ignored() -> None:
    data = {"host": {"anything": [1, 2]}, "tool": {"x": {"y": True}}, "fermix_core": {"realtime": {}}}
    assert settings_from_mapping(data, SOURCE) == Settings()


# --- every knob --------------------------------------------------------------------------------

OVERRIDES: dict[str, dict[str, Any]] = {
    "memory": {
        "review_interval_hours": 6.5,
        "review_max_messages": 10,
        "review_input_token_budget": 2000,
        "review_failure_backoff_ms": 1000,
        "review_max_output_tokens": 512,
        "review_claim_ttl_s": 30.0,
        "max_conversation_history": 500,
        "durability": "full",
        "token_encoding": "o200k_base",
        "forget_tool": "erase",
        "recall_by_meaning": True,
        "recall_min_similarity": 0.35,
    },
    "compaction": {
        "enabled": False,
        "threshold": 0.9,
        "reasoning_effort": "low",
        "budget": 0.25,
        "failure_backoff_s": 5.0,
        "context_window": 32_768,
    },
    "timeouts": {"llm_buffered_s": 30.0, "close_wait_s": 5.0},
    "realtime": {"persist_transcripts": True},
    "mcp": {"agent_id": "ada", "owner_id": "alice", "conversation": "mcp:desk:1", "trust": "operator"},
    "storage": {"url": "postgresql://fermix@db.example:5432/fermix", "chains": 4},
}
FULL_PROVIDER: dict[str, Any] = {
    "name": "claude",
    "kind": "anthropic",
    "base_url": "https://api.anthropic.com",
    "model": "claude-sonnet-4",
    "api_key_env": "ANTHROPIC_API_KEY",
    "context_window": 200_000,
    "retries": 3,
    "reasoning_effort": "high",
    "max_tokens_field": "max_tokens",
    "structured_output": "tool",
}


def test_the_override_table_covers_every_settings_field() -> None:
    for section, cls in SECTION_CLASSES.items():
        assert set(OVERRIDES[section]) == field_names(cls), section
    assert set(FULL_PROVIDER) == field_names(ProviderSettings)


def test_every_knob_can_be_overridden() -> None:
    settings = load({**OVERRIDES, "providers": [FULL_PROVIDER, {"name": "offline", "kind": "rules"}]})
    assert settings == Settings(
        memory=MemorySettings(**OVERRIDES["memory"]),
        compaction=CompactionSettings(**OVERRIDES["compaction"]),
        timeouts=TimeoutSettings(**OVERRIDES["timeouts"]),
        realtime=RealtimeSettings(**OVERRIDES["realtime"]),
        mcp=McpSettings(**OVERRIDES["mcp"]),
        storage=StorageSettings(**OVERRIDES["storage"]),
        providers=(ProviderSettings(**FULL_PROVIDER), ProviderSettings(name="offline", kind="rules")),
    )


TOKEN = {"name": "laptop", "sha256": "ab" * 32, "agent_id": "ada", "owner_id": "alice"}


def test_mcp_tokens_load_with_their_defaults() -> None:
    (token,) = load({"mcp_tokens": [TOKEN]}).mcp_tokens
    assert token == McpTokenSettings(**TOKEN)
    assert (token.trust, token.conversation, token.token_env) == ("guest", "", None)
    assert load({"mcp_tokens": [{**TOKEN, "sha256": "", "token_env": "LAPTOP_TOKEN"}]}).mcp_tokens[0].token_env


@pytest.mark.parametrize(("entry", "message"), [
    ({**TOKEN, "sha256": ""}, "mcp_tokens[0] needs exactly one of sha256 and token_env"),
    ({**TOKEN, "token_env": "LAPTOP_TOKEN"}, "mcp_tokens[0] needs exactly one of sha256 and token_env"),
    ({**TOKEN, "sha256": "AB" * 32}, "mcp_tokens[0].sha256 must be 64 lowercase hexadecimal"),
    ({**TOKEN, "sha256": "s3cr3t-token"}, "mcp_tokens[0].sha256 must be 64 lowercase hexadecimal"),
    ({k: v for k, v in TOKEN.items() if k != "owner_id"}, "mcp_tokens[0].owner_id is required"),
    ({**TOKEN, "trust": "admin"}, "mcp_tokens[0].trust must be one of"),
    ({**TOKEN, "conversation": "nochat"}, "mcp_tokens[0].conversation must be a conversation key"),
])
def test_a_bad_mcp_token_is_named_without_its_value(entry: dict[str, Any], message: str) -> None:
    error = error_of({"mcp_tokens": [entry]})
    assert message in error
    assert "s3cr3t" not in error and "AB" * 32 not in error


def test_mcp_token_names_are_unique() -> None:
    assert "token names must be unique" in error_of({"mcp_tokens": [TOKEN, TOKEN]})


def test_float_knobs_accept_integers_and_store_floats() -> None:
    settings = load({"memory": {"review_interval_hours": 12}, "compaction": {"threshold": 1}})
    assert settings.memory.review_interval_hours == 12.0
    assert isinstance(settings.memory.review_interval_hours, float)
    assert settings.compaction.threshold == 1.0
    assert isinstance(settings.compaction.threshold, float)


def test_infinity_history_means_no_cap() -> None:
    assert load({"memory": {"max_conversation_history": "infinity"}}).memory.max_conversation_history is None
    assert load({"memory": {"max_conversation_history": 1}}).memory.max_conversation_history == 1


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("memory", "review_interval_hours", 0),
        ("memory", "review_failure_backoff_ms", 0),
        ("compaction", "threshold", 1.0),
        ("compaction", "failure_backoff_s", 0),
    ],
)
def test_range_boundaries_that_are_allowed(section: str, key: str, value: Any) -> None:
    assert getattr(getattr(load({section: {key: value}}), section), key) == value


# --- unknown keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("core", "message"),
    [
        (
            {"memory": {"review_intervl_hours": 1}},
            "config.toml: unknown key fermix_core.memory.review_intervl_hours"
            " (did you mean review_interval_hours?)",
        ),
        ({"memroy": {}}, "config.toml: unknown key fermix_core.memroy (did you mean memory?)"),
        ({"provider": []}, "config.toml: unknown key fermix_core.provider (did you mean providers?)"),
        (
            {"providers": [{**OPENAI, "modle": "x"}]},
            "config.toml: unknown key fermix_core.providers[0].modle (did you mean model?)",
        ),
        (
            {"timeouts": {"zzz": 1}},
            "config.toml: unknown key fermix_core.timeouts.zzz (known keys: close_wait_s, llm_buffered_s)",
        ),
    ],
)
def test_unknown_keys_are_named_with_a_suggestion(core: dict[str, Any], message: str) -> None:
    assert error_of(core) == message


# --- wrong types -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("core", "message"),
    [
        (
            {"memory": {"review_max_messages": True}},
            "fermix_core.memory.review_max_messages must be an integer, got a boolean",
        ),
        (
            {"memory": {"review_max_messages": 4.0}},
            "fermix_core.memory.review_max_messages must be an integer, got a float",
        ),
        (
            {"memory": {"review_interval_hours": "24"}},
            "fermix_core.memory.review_interval_hours must be a finite number, got a string",
        ),
        (
            {"memory": {"review_interval_hours": False}},
            "fermix_core.memory.review_interval_hours must be a finite number, got a boolean",
        ),
        (
            {"memory": {"review_claim_ttl_s": math.inf}},
            "fermix_core.memory.review_claim_ttl_s must be a finite number, got inf",
        ),
        (
            {"compaction": {"threshold": math.nan}},
            "fermix_core.compaction.threshold must be a finite number, got nan",
        ),
        (
            {"memory": {"max_conversation_history": 10.0}},
            'fermix_core.memory.max_conversation_history must be an integer or "infinity", got a float',
        ),
        ({"memory": {"token_encoding": 5}}, "fermix_core.memory.token_encoding must be a string"),
        ({"compaction": {"enabled": "yes"}}, "fermix_core.compaction.enabled must be a boolean"),
        (
            {"realtime": {"persist_transcripts": 1}},
            "fermix_core.realtime.persist_transcripts must be a boolean",
        ),
        ({"memory": 3}, "fermix_core.memory must be a table, got an integer"),
        ({"providers": {"name": "x"}}, "fermix_core.providers must be an array of tables"),
        ({"providers": ["x"]}, "fermix_core.providers[0] must be a table, got a string"),
        (
            {"providers": [{**OPENAI, "context_window": "128k"}]},
            "fermix_core.providers[0].context_window must be an integer, got a string",
        ),
        (
            {"providers": [{**OPENAI, "retries": True}]},
            "fermix_core.providers[0].retries must be an integer, got a boolean",
        ),
    ],
)
def test_wrong_types_name_the_key_the_expected_type_and_the_file(core: dict[str, Any], message: str) -> None:
    error = error_of(core)
    assert error.startswith("config.toml: ")
    assert message in error


def test_fermix_core_itself_must_be_a_table() -> None:
    with pytest.raises(ConfigError, match=r"^config\.toml: fermix_core must be a table, got an array$"):
        settings_from_mapping({"fermix_core": [1]}, SOURCE)


# --- values out of range -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key", "value", "rule"),
    [
        ("memory", "review_interval_hours", -1, ">= 0"),
        ("memory", "review_max_messages", 0, "> 0"),
        ("memory", "review_input_token_budget", 0, "> 0"),
        ("memory", "review_max_output_tokens", -5, "> 0"),
        ("memory", "review_failure_backoff_ms", -1, ">= 0"),
        ("memory", "review_claim_ttl_s", 0, "> 0"),
        ("memory", "max_conversation_history", 0, 'a positive integer or "infinity"'),
        ("memory", "max_conversation_history", "forever", 'an integer or "infinity"'),
        ("memory", "durability", "fast", 'one of "normal", "full"'),
        ("memory", "forget_tool", "delete", 'one of "off", "archive", "erase"'),
        ("memory", "recall_min_similarity", 1.5, "from -1 to 1"),
        ("memory", "recall_min_similarity", -1.01, "from -1 to 1"),
        ("memory", "recall_min_similarity", "high", "a finite number"),
        ("memory", "token_encoding", "", "a non-empty string"),
        ("memory", "token_encoding", "  ", "a non-empty string"),
        ("compaction", "threshold", 0, "in (0, 1]"),
        ("compaction", "threshold", 1.01, "in (0, 1]"),
        ("compaction", "budget", 0, "in (0, 1)"),
        ("compaction", "budget", 1, "in (0, 1)"),
        ("compaction", "reasoning_effort", "max", 'one of "none", "minimal", "low", "medium", "high"'),
        ("compaction", "failure_backoff_s", -0.5, ">= 0"),
        ("timeouts", "llm_buffered_s", 0, "> 0"),
    ],
)
def test_out_of_range_values_name_the_key_and_the_rule(section: str, key: str, value: Any, rule: str) -> None:
    error = error_of({section: {key: value}})
    assert error.startswith(f"config.toml: fermix_core.{section}.{key} must be ")
    assert rule in error


# --- providers ---------------------------------------------------------------------------------


def test_providers_keep_their_order_and_rules_needs_no_server() -> None:
    providers = load({"providers": [{"name": "offline", "kind": "rules"}, OPENAI]}).providers
    assert [p.name for p in providers] == ["offline", "main"]
    assert providers[0] == ProviderSettings(name="offline", kind="rules")
    assert providers[1].api_key_env is None


@pytest.mark.parametrize("retries", [0, 5])
def test_retries_boundaries_are_allowed(retries: int) -> None:
    assert load({"providers": [{**OPENAI, "retries": retries}]}).providers[0].retries == retries


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "_KEY", "my_key_2", "A"])
def test_api_key_env_accepts_variable_names(name: str) -> None:
    assert load({"providers": [{**OPENAI, "api_key_env": name}]}).providers[0].api_key_env == name


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        ({"kind": "rules"}, "fermix_core.providers[1].name is required"),
        ({"name": "x"}, "fermix_core.providers[1].kind is required"),
        ({"name": "", "kind": "rules"}, "fermix_core.providers[1].name must be a non-empty string"),
        (
            {"name": "x", "kind": "gemini"},
            'fermix_core.providers[1].kind must be one of "openai", "anthropic", "rules" (value not shown)',
        ),
        (
            {"name": "x", "kind": "openai", "model": "m"},
            'fermix_core.providers[1].base_url is required for kind "openai"',
        ),
        (
            {"name": "x", "kind": "anthropic", "base_url": "https://a.example", "model": ""},
            'fermix_core.providers[1].model is required for kind "anthropic"',
        ),
        (
            {"name": "x", "kind": "openai", "base_url": "ftp://a.example", "model": "m"},
            "fermix_core.providers[1].base_url must be an http:// or https:// URL",
        ),
        (
            {"name": "x", "kind": "openai", "base_url": "localhost:8080", "model": "m"},
            "fermix_core.providers[1].base_url must be an http:// or https:// URL",
        ),
        (
            {"name": "x", "kind": "rules", "context_window": 0},
            "fermix_core.providers[1].context_window must be > 0",
        ),
        (
            {"name": "x", "kind": "rules", "retries": 6},
            "fermix_core.providers[1].retries must be between 0 and 5",
        ),
        (
            {"name": "x", "kind": "rules", "retries": -1},
            "fermix_core.providers[1].retries must be between 0 and 5",
        ),
        (
            {"name": "main", "kind": "rules"},
            "fermix_core.providers[1].name is already used by fermix_core.providers[0]",
        ),
    ],
)
def test_provider_errors_name_the_entry_index(provider: dict[str, Any], message: str) -> None:
    error = error_of({"providers": [OPENAI, provider]})
    assert error.startswith("config.toml: ")
    assert message in error


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-Abc123Def456Ghi789Jkl012Mno345",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "sk_live_abcdefghijklmnop",
        "gsk_ABCdef123456",
        "Q2xhdWRlSXNHcmVhdEJ1dE5vdEFLZXkx9Zz",
        "",
    ],
)
def test_an_api_key_in_api_key_env_is_refused_without_being_echoed(secret: str) -> None:
    error = error_of({"providers": [{**OPENAI, "api_key_env": secret}]})
    assert error.startswith("config.toml: fermix_core.providers[0].api_key_env must be the NAME of")
    assert "put the key in that variable and the variable's name here" in error
    assert "(value not shown)" in error
    if secret:
        assert secret not in error


@given(secret=st.from_regex(r"sk-[A-Za-z0-9_-]{16,48}", fullmatch=True))
def test_no_api_key_shaped_value_is_ever_echoed(secret: str) -> None:
    error = error_of({"providers": [{**OPENAI, "api_key_env": secret}]})
    assert "api_key_env" in error
    assert secret not in error


# --- properties --------------------------------------------------------------------------------

KNOWN_CORE_KEYS = {*SECTION_CLASSES, "providers", "mcp_tokens"}


@given(
    section=st.sampled_from([*SECTION_CLASSES, "providers", None]),
    key=st.text(min_size=1, max_size=40),
    value=st.one_of(st.integers(), st.text(max_size=5), st.booleans()),
)
def test_any_unknown_key_is_rejected_and_named(section: str | None, key: str, value: Any) -> None:
    if section is None:
        assume(key not in KNOWN_CORE_KEYS)
        core: dict[str, Any] = {key: value}
        dotted = f"fermix_core.{key}"
    elif section == "providers":
        assume(key not in field_names(ProviderSettings))
        core = {"providers": [{"name": "p", "kind": "rules", key: value}]}
        dotted = f"fermix_core.providers[0].{key}"
    else:
        assume(key not in field_names(SECTION_CLASSES[section]))
        core = {section: {key: value}}
        dotted = f"fermix_core.{section}.{key}"
    assert error_of(core).startswith(f"config.toml: unknown key {dotted} (")


def finite(
    low: float, high: float, *, exclude_min: bool = False, exclude_max: bool = False
) -> st.SearchStrategy[float]:
    """A number in the range as TOML gives it: a float or, where it fits, an integer."""
    floats = st.floats(low, high, exclude_min=exclude_min, exclude_max=exclude_max, allow_nan=False)
    ints = st.integers(math.ceil(low), math.floor(high)).filter(
        lambda n: not (exclude_min and n == low) and not (exclude_max and n == high)
    )
    return st.one_of(floats, ints)


BIG = 10**12
VALID: dict[str, dict[str, Any]] = {
    "memory": {
        "review_interval_hours": finite(0, 1e6),
        "review_max_messages": st.integers(1, BIG),
        "review_input_token_budget": st.integers(1, BIG),
        "review_failure_backoff_ms": st.integers(0, BIG),
        "review_max_output_tokens": st.integers(1, BIG),
        "review_claim_ttl_s": finite(0, 1e6, exclude_min=True),
        "max_conversation_history": st.one_of(st.just("infinity"), st.integers(1, BIG)),
        "durability": st.sampled_from(["normal", "full"]),
        "token_encoding": st.text(min_size=1).filter(str.strip),
        "forget_tool": st.sampled_from(["off", "archive", "erase"]),
        "recall_min_similarity": finite(-1, 1),
    },
    "compaction": {
        "enabled": st.booleans(),
        "threshold": finite(0, 1, exclude_min=True),
        "reasoning_effort": st.sampled_from(["none", "minimal", "low", "medium", "high"]),
        "budget": finite(0, 1, exclude_min=True, exclude_max=True),
        "failure_backoff_s": finite(0, 1e6),
    },
    "timeouts": {"llm_buffered_s": finite(0, 1e6, exclude_min=True), "close_wait_s": finite(0, 1e6)},
    "realtime": {"persist_transcripts": st.booleans()},
}
VALID_SECTIONS = st.fixed_dictionaries(
    {}, optional={name: st.fixed_dictionaries({}, optional=knobs) for name, knobs in VALID.items()}
)
VALID_PROVIDER = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["openai", "anthropic", "rules"]),
        "base_url": st.sampled_from(["http://127.0.0.1:8080/v1", "https://api.example.com"]),
        "model": st.text(min_size=1, max_size=20).filter(str.strip),
    },
    optional={
        "api_key_env": st.from_regex(r"[A-Z_][A-Z0-9_]{0,30}", fullmatch=True),
        "context_window": st.integers(1, BIG),
        "retries": st.integers(0, 5),
    },
)


@given(sections=VALID_SECTIONS, providers=st.lists(VALID_PROVIDER, max_size=4))
def test_valid_values_round_trip(
    sections: dict[str, dict[str, Any]], providers: list[dict[str, Any]]
) -> None:
    named = [{"name": f"p{i}", **p} for i, p in enumerate(providers)]
    settings = load({**sections, "providers": named})
    for section, values in sections.items():
        built = getattr(settings, section)
        for key, value in values.items():
            default = getattr(SECTION_CLASSES[section](), key)
            want = None if value == "infinity" else float(value) if isinstance(default, float) else value
            assert getattr(built, key) == want, (section, key)
            assert type(getattr(built, key)) is type(want)
    assert settings.providers == tuple(ProviderSettings(**p) for p in named)


def test_every_setting_is_described_in_its_own_field() -> None:
    """One description per knob: the config file's keys, checks and comments all come from the
    settings classes' fields (no second table to keep in step)."""
    assert dict(SECTIONS) == SECTION_CLASSES
    for cls in [*SECTIONS.values(), ProviderSettings]:
        knobs = knobs_of(cls)
        assert [k.name for k in knobs] == [f.name for f in attrs.fields(cls)]
        assert all(k.doc for k in knobs), cls.__name__
    required = [k.name for k in knobs_of(ProviderSettings) if k.default is attrs.NOTHING]
    assert required == ["name", "kind"]
    example = {k.name: k.default if k.example is None else k.example for k in knobs_of(ProviderSettings)}
    assert load({"providers": [example]}).providers[0].base_url == "http://127.0.0.1:11434/v1"
