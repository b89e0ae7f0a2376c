"""``[fermix_core.retention]`` in config.toml: the policies read, and each mistake a ConfigError
naming the file and the key at fault (never the value)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from fermix_memory.adapters.config_toml import load_settings
from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings import Settings, settings_from_argument

GOOD = """
[fermix_core.retention]
check_every_s = 600

[[fermix_core.retention.policy]]
name = "kiosk"
after = "30d"
channel_prefix = "kiosk:"
agent_id = "shop-bot"

[[fermix_core.retention.policy]]
name = "health"
after = "2w"
category = "identity"
"""


def load(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path)


def test_the_policies_are_read_in_order(tmp_path: Path) -> None:
    retention = load(tmp_path, GOOD).retention
    assert retention.check_every_s == 600
    assert [(p.name, p.selector, p.value, p.span, p.agent_id) for p in retention.policies] == [
        ("kiosk", "channel_prefix", "kiosk:", timedelta(days=30), "shop-bot"),
        ("health", "category", "identity", timedelta(days=14), None)]


def test_no_retention_table_means_no_policy_and_an_hourly_look() -> None:
    assert Settings().retention.policies == () and Settings().retention.check_every_s == 3600
    only = settings_from_argument({"fermix_core": {"retention": {"check_every_s": 0}}})
    assert only.retention.check_every_s == 0 and only.retention.policies == ()


@pytest.mark.parametrize(("change", "words"), [
    (('channel_prefix = "kiosk:"', 'channel_prefix = "kiosk:"\ntrust = "guest"'),
     "fermix_core.retention.policy[0].trust: a policy needs exactly one of category, channel_prefix and trust"),
    (('after = "2w"', 'after = "2 weeks"'), "fermix_core.retention.policy[1].after: after must be a whole number"),
    (('after = "30d"', 'after = 30'), "fermix_core.retention.policy[0].after: after must be a string"),
    (('name = "health"', 'name = "kiosk"'), "fermix_core.retention.policy[1].name: name kiosk is used by an earlier"),
    (('category = "identity"', 'category = "identity"\ncolour = "red"'),
     "fermix_core.retention.policy[1].colour: unknown key colour"),
    (("check_every_s = 600", "check_every_s = -1"), "fermix_core.retention.check_every_s must be >= 0"),
    (("check_every_s = 600", 'check_every_s = "1h"'), "fermix_core.retention.check_every_s must be a finite number"),
    (("check_every_s = 600", "check_every = 600"), "unknown key fermix_core.retention.check_every"),
    (("[[fermix_core.retention.policy]]\nname = \"health\"", "[fermix_core.retention.policies]\nname = \"health\""),
     "unknown key fermix_core.retention.policies"),
])
def test_a_mistake_names_the_file_and_the_key(tmp_path: Path, change: tuple[str, str], words: str) -> None:
    assert change[0] in GOOD
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, GOOD.replace(change[0], change[1], 1))
    assert str(refused.value).startswith(str(tmp_path / "config.toml") + ": ")
    assert words in str(refused.value)


def test_a_policy_table_that_is_not_an_array_and_a_retention_that_is_not_a_table_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"fermix_core.retention.policy must be an array of tables"):
        settings_from_argument({"fermix_core": {"retention": {"policy": {"name": "x"}}}})
    with pytest.raises(ConfigError, match=r"fermix_core.retention must be a table, got an integer"):
        settings_from_argument({"fermix_core": {"retention": 3}})
    with pytest.raises(ConfigError, match="retention belongs under fermix_core"):
        settings_from_argument({"retention": {}})
