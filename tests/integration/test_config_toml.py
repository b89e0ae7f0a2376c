"""config.toml on disk: loading, error reports, the setup writer and the default text."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli

from fermix_memory import MemorySystem
from fermix_memory.adapters.config_toml import load_settings, render_default_config, set_review_interval
from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings import (
    CompactionSettings,
    McpSettings,
    MemorySettings,
    ProviderSettings,
    RealtimeSettings,
    Settings,
    TimeoutSettings,
    settings_from_mapping,
)

EXISTING = """\
# A comment the writer will not keep.
[host]
theme = "dark"
started = 2024-05-01T10:00:00Z

[fermix_core.memory]
review_max_messages = 12
durability = "full"

[fermix_core.compaction]
threshold = 0.9

[[fermix_core.providers]]
name = "local"
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "llama3.1"
api_key_env = "LOCAL_KEY"

[[fermix_core.providers]]
name = "offline"
kind = "rules"
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    return str(caught.value)


# --- load_settings -----------------------------------------------------------------------------


def test_a_missing_file_means_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "config.toml") == Settings()


def test_a_file_without_fermix_core_means_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '[host]\nname = "x"\n\n[tool.other]\nlevel = 3\n')
    assert load_settings(path) == Settings()


@pytest.mark.parametrize(("config", "said"), [
    ({"fermix-core": {"memory": {"durability": "full"}}}, "unknown key fermix-core (did you mean fermix_core?)"),
    ({"fermixcore": {}}, "unknown key fermixcore (did you mean fermix_core?)"),
    ({"memory": {"durability": "full"}}, "memory belongs under fermix_core"),
    ({"providers": [{"name": "r", "kind": "rules"}]}, "providers belongs under fermix_core"),
    ({"fermix_core": {}, "myapp": {"x": 1}}, "unknown key myapp (known keys: fermix_core)"),
    ({("fermix_core",): {}}, "a top-level key is not text"),
])
def test_a_config_argument_with_anything_beside_its_root_is_an_error(
        tmp_path: Path, config: dict[Any, Any], said: str) -> None:
    """Unlike config.toml (shared with the host's own tables), the mapping is fermix's alone:
    a misspelt or missing root must not silently mean every default."""
    with pytest.raises(ConfigError) as caught:
        MemorySystem.open(tmp_path / "home", config=config)
    assert str(caught.value).startswith("config argument: ") and said in str(caught.value)
    assert not (tmp_path / "home").exists()


def test_a_config_argument_in_the_shape_of_the_file_is_used(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "a", config={"fermix_core": {"memory": {"durability": "full"}}}) as memory:
        assert memory.settings.memory.durability == "full"
    with MemorySystem.open(tmp_path / "b", config={}) as memory:  # nothing given, nothing ignored
        assert memory.settings == Settings()


def test_a_full_file_loads(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path / "config.toml", EXISTING))
    assert settings.memory == MemorySettings(review_max_messages=12, durability="full")
    assert settings.compaction.threshold == 0.9
    assert settings.providers == (
        ProviderSettings(
            name="local",
            kind="openai",
            base_url="http://127.0.0.1:11434/v1",
            model="llama3.1",
            api_key_env="LOCAL_KEY",
        ),
        ProviderSettings(name="offline", kind="rules"),
    )


def test_a_syntax_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "[fermix_core.memory]\nreview_max_messages = = 3\n")
    error = config_error(path)
    assert error.startswith(f"{path}: TOML syntax error at line 2, column ")


CUT_OFF = [
    ("[fermix_core.memory", "line 1, column 20: a [table] header without its closing ']' (in '[fermix_core.memory')"),
    ("[fermix_core.memory]\nreview_interval_hours", "line 2, column 22: a key without '= value'"),
    ("[fermix_core.memory]\nreview_interval_hours =",
     "line 2, column 24: a key whose value is missing or not a TOML value (text goes in quotes)"
     " (at key 'review_interval_hours')"),
    ('[fermix_core.memory]\ndurability = "ful', "line 2, column 18: a string without its closing quote"
     " (at key 'durability')"),
]


@pytest.mark.parametrize(("text", "said"), CUT_OFF)
def test_a_file_cut_off_mid_statement_gets_our_message_naming_file_and_line(tmp_path: Path, text: str,
                                                                           said: str) -> None:
    path = write(tmp_path / "config.toml", text)
    assert config_error(path) == f"{path}: TOML syntax error at {said}; the file ends there, as if cut off"


def test_every_cut_of_the_default_config_is_settings_or_our_one_line_error(tmp_path: Path) -> None:
    text = render_default_config().replace("# [[fermix_core.providers]]", "[[fermix_core.providers]]")
    path = tmp_path / "config.toml"
    parser_words = ("Expected", "Invalid", "Unclosed", "Unterminated", "(at line")
    for end in range(0, len(text), 7):
        path.write_text(text[:end], encoding="utf-8")
        try:
            load_settings(path)
        except ConfigError as error:
            message = str(error)
            assert message.startswith(f"{path}: ") and "\n" not in message
            assert not any(word in message for word in parser_words), message


def test_a_syntax_error_never_echoes_a_value(tmp_path: Path) -> None:
    for text in ('[fermix_core.memory]\ndurability = "sk-live-123456789012345" trailing\n',
                 "[fermix_core.memory]\nsk-live-123456789012345\n",
                 '[fermix_core.memory]\nx = "sk-live-123456789012345'):
        assert "123456789012345" not in config_error(write(tmp_path / "config.toml", text))


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'[host]\nname = "\xff"\n')
    assert config_error(path).startswith(f"{path}: not valid UTF-8")


def test_an_unreadable_path_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    assert config_error(tmp_path / "config.toml").startswith(f"{tmp_path / 'config.toml'}: cannot read")


def test_an_unknown_key_is_named_with_the_file_and_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "[fermix_core.memory]\nreview_intervl_hours = 3\n")
    assert config_error(path) == (
        f"{path}: unknown key fermix_core.memory.review_intervl_hours (did you mean review_interval_hours?)"
    )


def test_a_wrong_type_names_key_type_and_file(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "[fermix_core.memory]\nreview_max_messages = true\n")
    assert config_error(path) == (
        f"{path}: fermix_core.memory.review_max_messages must be an integer, got a boolean"
    )


def test_a_provider_error_names_the_entry(tmp_path: Path) -> None:
    text = EXISTING.replace('kind = "rules"', 'kind = "gemini"')
    error = config_error(write(tmp_path / "config.toml", text))
    assert error.startswith(f"{tmp_path / 'config.toml'}: fermix_core.providers[1].kind must be one of ")


def test_an_api_key_written_as_api_key_env_is_refused_and_not_echoed(tmp_path: Path) -> None:
    secret = "sk-proj-Zq81mXv0aPq7RkT2wLs9BcYe4HnJd6Uf"
    text = EXISTING.replace('api_key_env = "LOCAL_KEY"', f'api_key_env = "{secret}"')
    error = config_error(write(tmp_path / "config.toml", text))
    assert "fermix_core.providers[0].api_key_env must be the NAME of" in error
    assert "put the key in that variable and the variable's name here" in error
    assert secret not in error
    assert secret[:12] not in error


# --- set_review_interval -----------------------------------------------------------------------


def test_set_review_interval_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "home" / "config.toml"
    set_review_interval(path, 6)
    assert load_settings(path) == Settings(memory=MemorySettings(review_interval_hours=6.0))


def test_set_review_interval_keeps_every_other_table_and_key(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", EXISTING)
    before = tomli.loads(EXISTING)
    set_review_interval(path, 0.5)
    after = tomli.loads(path.read_text(encoding="utf-8"))
    assert after["fermix_core"]["memory"].pop("review_interval_hours") == 0.5
    assert after == before
    assert load_settings(path).memory.review_interval_hours == 0.5


def test_set_review_interval_zero_disables_background_review(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", EXISTING)
    set_review_interval(path, 0)
    assert load_settings(path).memory.review_interval_hours == 0.0


@pytest.mark.parametrize("hours", [-1.0, float("nan"), float("inf"), True])
def test_a_bad_interval_is_refused_and_leaves_the_file_unchanged(tmp_path: Path, hours: float) -> None:
    path = write(tmp_path / "config.toml", EXISTING)
    with pytest.raises(ConfigError, match=r"fermix_core\.memory\.review_interval_hours"):
        set_review_interval(path, hours)
    assert path.read_text(encoding="utf-8") == EXISTING
    assert os.listdir(tmp_path) == ["config.toml"]


def test_an_invalid_file_is_reported_and_not_rewritten(tmp_path: Path) -> None:
    text = EXISTING + "\n[fermix_core.realtime]\npersist_transcript = true\n"
    path = write(tmp_path / "config.toml", text)
    with pytest.raises(ConfigError, match=r"unknown key fermix_core\.realtime\.persist_transcript \("):
        set_review_interval(path, 3)
    assert path.read_text(encoding="utf-8") == text


def test_set_review_interval_writes_a_synced_temp_file_in_the_same_folder_then_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "config.toml", EXISTING)
    calls: list[tuple[str, Any]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", fd))
        real_fsync(fd)

    def replace(source: str, target: str) -> None:
        calls.append(("replace", (Path(source), Path(target))))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    set_review_interval(path, 2)

    names = [name for name, _ in calls]
    assert "fsync" in names[: names.index("replace")]  # the new content is on disk before the rename
    temp, target = next(arg for name, arg in calls if name == "replace")
    assert temp.parent == target.parent == tmp_path.resolve()
    assert target == path.resolve()
    assert os.listdir(tmp_path) == ["config.toml"]


def test_a_failed_rename_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "config.toml", EXISTING)

    def replace(source: str, target: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(ConfigError, match="cannot write: No space left on device"):
        set_review_interval(path, 2)
    assert path.read_text(encoding="utf-8") == EXISTING
    assert os.listdir(tmp_path) == ["config.toml"]


def test_set_review_interval_keeps_the_file_mode(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", EXISTING)
    path.chmod(0o640)
    set_review_interval(path, 2)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_set_review_interval_writes_through_a_symlink(tmp_path: Path) -> None:
    real = write(tmp_path / "dotfiles.toml", EXISTING)
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    set_review_interval(link, 2)
    assert link.is_symlink()
    assert load_settings(real).memory.review_interval_hours == 2.0


# --- the default config text -------------------------------------------------------------------


def test_the_default_config_loads_to_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", render_default_config())
    assert load_settings(path) == Settings()


def test_the_default_config_shows_every_knob() -> None:
    core = tomli.loads(render_default_config())["fermix_core"]
    sections: dict[str, type[Any]] = {
        "memory": MemorySettings,
        "compaction": CompactionSettings,
        "timeouts": TimeoutSettings,
        "realtime": RealtimeSettings,
        "mcp": McpSettings,
    }
    assert set(core) == {*sections, "storage"}
    for name, cls in sections.items():
        assert set(core[name]) == {f.name for f in attrs.fields(cls)}, name
    assert core["storage"] == {"chains": 16}  # no URL by default: the SQLite file of the home


def test_the_commented_storage_url_is_valid_once_uncommented(tmp_path: Path) -> None:
    text = render_default_config()
    section = text[text.index("[fermix_core.storage]"):text.index("# Bearer tokens")]
    uncommented = "\n".join(line.removeprefix("# ") if line.startswith("# url") else line
                            for line in section.splitlines())
    assert load_settings(write(tmp_path / "config.toml", uncommented)).storage.url == \
        "postgresql://fermix@db.example:5432/fermix"


def test_the_commented_mcp_token_example_is_valid_once_uncommented(tmp_path: Path) -> None:
    text = render_default_config()
    example = text[text.index("# [[fermix_core.mcp_tokens]]"):text.index("# Bearer tokens of `fermix serve`")]
    uncommented = "\n".join(line.removeprefix("# ") for line in example.splitlines())
    (token,) = load_settings(write(tmp_path / "config.toml", uncommented)).mcp_tokens
    assert (token.name, token.agent_id, token.owner_id, token.trust) == ("laptop", "assistant", "me", "guest")
    assert "token_env" in example


def test_the_commented_server_token_example_is_valid_once_uncommented(tmp_path: Path) -> None:
    text = render_default_config()
    example = text[text.index("# [[fermix_core.server_tokens]]"):text.index("# Model providers")]
    uncommented = "\n".join(line.removeprefix("# ") for line in example.splitlines())
    (token,) = load_settings(write(tmp_path / "config.toml", uncommented)).server_tokens
    assert (token.name, token.role, token.agent_id) == ("telegram-bot", "host", "assistant")
    assert "token_env" in example


@pytest.mark.parametrize("entry, problem", [
    ('name = "a"\nsha256 = "%s"\nrole = "host"' % ("0" * 64), "agent_id is required for a host token"),
    ('name = "a"\nsha256 = "%s"\nrole = "reader"\nagent_id = "ada"' % ("0" * 64), "only for one"),
    ('name = "a"\nrole = "operator"', "exactly one of sha256 and token_env"),
    ('name = "a"\nsha256 = "%s"\nrole = "admin"' % ("0" * 64), "role must be"),
])
def test_a_server_token_entry_that_cannot_work_is_refused(tmp_path: Path, entry: str, problem: str) -> None:
    path = write(tmp_path / "config.toml", f"[[fermix_core.server_tokens]]\n{entry}\n")
    with pytest.raises(ConfigError, match=problem):
        load_settings(path)


def test_the_commented_provider_example_is_valid_once_uncommented(tmp_path: Path) -> None:
    text = render_default_config()
    example = text[text.index("# [[fermix_core.providers]]") :]
    uncommented = "\n".join(line.removeprefix("# ") for line in example.splitlines())
    path = write(tmp_path / "config.toml", uncommented)
    (provider,) = load_settings(path).providers
    assert {f.name for f in attrs.fields(ProviderSettings)} <= set(
        tomli.loads(uncommented)["fermix_core"]["providers"][0]
    )
    assert provider.kind == "openai"
    assert provider.api_key_env == "OPENAI_API_KEY"


# --- errors never show a value -------------------------------------------------------------------

SECRET = "sk-proj-Zq81mXv0aPq7RkT2wLs9BcYe4HnJd6Uf"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (f'[fermix_core.memory]\ndurability = "{SECRET}"\n', 'fermix_core.memory.durability must be one of "normal"'),
        (f'[fermix_core.compaction]\nreasoning_effort = "{SECRET}"\n', "fermix_core.compaction.reasoning_effort"),
        (f'[fermix_core.memory]\nreview_max_messages = "{SECRET}"\n', "review_max_messages must be an integer"),
        (f'[fermix_core.memory]\ntoken_encoding = ["{SECRET}"]\n', "token_encoding must be a string, got an array"),
        (f'[fermix_core.memory]\nmax_conversation_history = "{SECRET}"\n', "max_conversation_history must be"),
        (f'[fermix_core]\nmemory = "{SECRET}"\n', "fermix_core.memory must be a table, got a string"),
        (f'[fermix_core]\nproviders = "{SECRET}"\n', "fermix_core.providers must be an array of tables"),
        ("[fermix_core.memory]\nreview_max_messages = 123456789012345\nreview_claim_ttl_s = -123456789012345.5\n",
         "review_claim_ttl_s must be > 0"),
        (f'[fermix_core.memory]\ndurabilty = "{SECRET}"\n', "unknown key fermix_core.memory.durabilty"),
        (f'[fermix_core]\nsecrets = "{SECRET}"\n', "unknown key fermix_core.secrets"),
        (EXISTING.replace('model = "llama3.1"', f'model = "llama3.1"\napi_key = "{SECRET}"'),
         "unknown key fermix_core.providers[0].api_key"),
        (EXISTING.replace('base_url = "http://127.0.0.1:11434/v1"', f'base_url = "{SECRET}"'),
         "fermix_core.providers[0].base_url must be an http:// or https:// URL"),
        (EXISTING.replace('name = "offline"', f'name = "{SECRET}"').replace('name = "local"', f'name = "{SECRET}"'),
         "fermix_core.providers[1].name is already used by fermix_core.providers[0]"),
        (EXISTING.replace('kind = "rules"', f'kind = "{SECRET}"'), "fermix_core.providers[1].kind must be one of"),
    ],
)
def test_config_errors_never_echo_a_secret_looking_value(tmp_path: Path, text: str, named: str) -> None:
    path = write(tmp_path / "config.toml", text)
    error = config_error(path)
    assert error.startswith(f"{path}: ")
    assert named in error
    for shown in (SECRET, SECRET[:12], "123456789012345"):
        assert shown not in error


def test_config_errors_name_what_is_allowed_without_the_value(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", f'[fermix_core.memory]\ndurability = "{SECRET}"\n')
    assert config_error(path) == (
        f'{path}: fermix_core.memory.durability must be one of "normal", "full" (value not shown)'
    )


@pytest.mark.parametrize("depth", [400, 401, 5000])
@pytest.mark.parametrize("shape", ["[ ]", "{a= }"])
def test_config_toml_nested_400_levels_deep_is_a_config_error(tmp_path: Path, depth: int, shape: str) -> None:
    opening, closing = shape.split(" ")
    value = opening * depth + "1" + closing * depth
    path = write(tmp_path / "config.toml", f"[fermix_core.memory]\ndurability = {value}\n")
    error = config_error(path)
    assert error.startswith(f"{path}: ")
    assert "durability" in error or "nested too deeply" in error


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("[fermix_core.memory]\nreview_interval_hours = 1e8", "fermix_core.memory.review_interval_hours"),
        ("[fermix_core.memory]\nreview_failure_backoff_ms = 922337203685477580", "review_failure_backoff_ms"),
        ("[fermix_core.memory]\nreview_claim_ttl_s = 1e300", "fermix_core.memory.review_claim_ttl_s"),
        ("[fermix_core.compaction]\nfailure_backoff_s = 1e12", "fermix_core.compaction.failure_backoff_s"),
        ("[fermix_core.timeouts]\nllm_buffered_s = 1e10", "fermix_core.timeouts.llm_buffered_s"),
    ],
)
def test_a_duration_too_long_for_date_arithmetic_is_a_config_error(tmp_path: Path, line: str, key: str) -> None:
    error = config_error(write(tmp_path / "config.toml", line + "\n"))
    assert key in error
    assert "at most" in error


def test_the_readme_configuration_excerpt_shows_the_defaults() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Configuration"):]
    excerpt = section[section.index("```toml\n") + len("```toml\n"):section.index("\n```")]
    assert settings_from_mapping(tomli.loads(excerpt), "README.md") == Settings()
