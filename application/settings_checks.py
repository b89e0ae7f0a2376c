"""How a settings field is described once: its attrs metadata holds the rule ``config.toml`` must
follow (a TOML type and a check, stated in words) and what the knob means. Validation
(:func:`fermix_memory.application.settings.settings_from_mapping`) and the commented default
file (``adapters/config_toml.py``) both read it from there."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from typing import Any
from urllib.parse import urlsplit

import attrs


def is_int(value: object) -> bool:
    # TOML booleans arrive as Python bools, which are ints; a count must not accept `true`.
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    # TOML allows `inf` and `nan`; no knob means anything by them.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)  # a huge int is refused by its range


def _unchanged(value: Any) -> Any:
    return value


def _anything(value: Any) -> bool:
    return True


@attrs.frozen
class TomlType:
    """A TOML value type a knob accepts, and how such a value becomes the settings value."""

    name: str
    accepts: Callable[[object], bool]
    convert: Callable[[Any], Any] = _unchanged
    to_toml: Callable[[Any], Any] = _unchanged  # the inverse of ``convert``, for the default file


INT = TomlType("an integer", is_int)
NUMBER = TomlType("a finite number", is_number, float)
BOOL = TomlType("a boolean", lambda v: isinstance(v, bool))
STR = TomlType("a string", lambda v: isinstance(v, str))
BOOL_OR_AUTO = TomlType(  # ``None`` stands for "auto": the program decides at open
    'true, false or "auto"',
    lambda v: isinstance(v, bool) or v == "auto",
    lambda v: None if v == "auto" else v,
    lambda v: "auto" if v is None else v,
)
INT_OR_INFINITY = TomlType(
    'an integer or "infinity"',
    lambda v: v == "infinity" or is_int(v),
    lambda v: None if v == "infinity" else v,
    lambda v: "infinity" if v is None else v,
)


@attrs.frozen
class Rule:
    """How one key is validated: its type, then ``check`` on the converted value."""

    type: TomlType
    check: Callable[[Any], bool] = _anything
    rule: str = ""  # ``check`` in words: "<key> must be <rule>"


def choice(*options: str) -> Rule:
    return Rule(STR, lambda v: v in options, "one of " + ", ".join(f'"{o}"' for o in options))


POSITIVE_INT = Rule(INT, lambda v: v > 0, "> 0")
NON_NEGATIVE_INT = Rule(INT, lambda v: v >= 0, ">= 0")
POSITIVE_NUMBER = Rule(NUMBER, lambda v: v > 0, "> 0")
NON_NEGATIVE_NUMBER = Rule(NUMBER, lambda v: v >= 0, ">= 0")


def at_most(knob: Rule, most: float, words: str) -> Rule:
    """``knob`` with an upper bound: durations past it overflow the date arithmetic."""
    return Rule(knob.type, lambda v: knob.check(v) and v <= most, f"{knob.rule} and at most {most:,.0f} ({words})")


NON_EMPTY_STR = Rule(STR, lambda v: bool(v.strip()), "a non-empty string")

_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Key shapes that also happen to be valid variable names (dashed ones like "sk-..." already fail
# the pattern). Refusing them keeps a pasted key from being treated, and later logged, as a name.
_KEY_PREFIXES = ("sk_", "gsk_", "hf_", "ghp_", "AIza")


def is_env_var_name(value: str) -> bool:
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


def is_http_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


_KNOB = "fermix_core.knob"
_DOC = "fermix_core.doc"
_EXAMPLE = "fermix_core.example"


def about(knob: Rule, doc: str = "", example: Any = None) -> dict[str, Any]:
    """A field's metadata: how config.toml may set it, what it means, an example value."""
    return {_KNOB: knob, _DOC: doc, _EXAMPLE: example}



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


def checks_of(cls: type[Any]) -> Mapping[str, Rule]:
    return {f.name: f.metadata[_KNOB] for f in attrs.fields(cls)}


def describe_toml_type(value: object) -> str:
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
