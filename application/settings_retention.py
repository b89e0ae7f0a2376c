"""The retention settings (ADR-0080): ``[fermix_core.retention]``, how often the background
upkeep looks for what is due, and its ``[[fermix_core.retention.policy]]`` tables, each a
duration and what it covers (see ``domain.retention``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings_checks import NON_NEGATIVE_NUMBER, about, at_most, describe_toml_type
from fermix_memory.domain.retention import PolicyError, RetentionPolicy, parse_policies

_CENTURY_S = 100 * 365 * 24 * 3600
CHECK_EVERY = at_most(NON_NEGATIVE_NUMBER, _CENTURY_S, "100 years")
_POLICY = "policy"
_CHECK = "check_every_s"


@attrs.frozen(kw_only=True)
class RetentionSettings:
    """``[fermix_core.retention]``: the policies, and how often a writable memory looks for what
    they make due (0: only ``fermix retention run``)."""

    check_every_s: float = attrs.field(default=3600.0, metadata=about(
        CHECK_EVERY, "Seconds between the background upkeep's looks for what the retention policies (and rows'"
        " own expiry) make due; 0: only `fermix retention run` erases it."))
    policies: tuple[RetentionPolicy, ...] = ()


def retention_settings(value: Any, key: str, source: str) -> RetentionSettings:
    """``[fermix_core.retention]`` checked: a :class:`ConfigError` names the file and the key."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: {key} must be a table, got {describe_toml_type(value)}")
    check_every_s = 3600.0
    policies: tuple[RetentionPolicy, ...] = ()
    for name, raw in value.items():
        if name == _CHECK:
            rule = CHECK_EVERY
            if not rule.type.accepts(raw):
                raise ConfigError(f"{source}: {key}.{_CHECK} must be {rule.type.name}, got {describe_toml_type(raw)}")
            check_every_s = rule.type.convert(raw)
            if not rule.check(check_every_s):
                raise ConfigError(f"{source}: {key}.{_CHECK} must be {rule.rule}")
        elif name == _POLICY:
            policies = _policies(raw, f"{key}.{_POLICY}", source)
        else:
            raise ConfigError(f"{source}: unknown key {key}.{name} (known keys: {_CHECK}, {_POLICY})")
    return RetentionSettings(check_every_s=check_every_s, policies=policies)


def _policies(raw: Any, key: str, source: str) -> tuple[RetentionPolicy, ...]:
    if not isinstance(raw, list) or not all(isinstance(entry, Mapping) for entry in raw):
        raise ConfigError(f"{source}: {key} must be an array of tables ([[{key}]]), got {describe_toml_type(raw)}")
    try:
        return parse_policies(raw)
    except PolicyError as exc:
        raise ConfigError(f"{source}: {key}[{exc.index}].{exc.key}: {exc}") from None


def retention_as_toml(settings: RetentionSettings) -> dict[str, Any]:
    """``[fermix_core.retention]`` as config.toml spells it, and its ``[[fermix_core.retention.policy]]``
    tables under the key ``retention.policy``."""
    policies = [{"name": p.name, "after": p.after, p.selector: p.value,
                 **({} if p.agent_id is None else {"agent_id": p.agent_id})} for p in settings.policies]
    return {"retention": {_CHECK: settings.check_every_s}, f"retention.{_POLICY}": policies}


# The commented example of the default config.toml (valid TOML once each line loses its "# ").
EXAMPLE = """\
# # Retention (ADR-0080): what the policies cover is erased, as forget erases it, once it is
# # older than `after` (a whole number then s, m, h, d or w); a row's own expires_at counts too.
# # Each policy has exactly one of category (memory rows), channel_prefix (conversations whose
# # key starts with it) and trust (conversations in which every message has it); agent_id is
# # optional.
# [fermix_core.retention]
# check_every_s = 3600  # how often a writable memory looks; 0: only `fermix retention run`
# [[fermix_core.retention.policy]]
# name = "kiosk"
# after = "30d"
# channel_prefix = "kiosk:"
# agent_id = "shop-bot"
"""
