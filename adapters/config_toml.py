"""``<home>/config.toml``: read it into :class:`Settings`, and let setup change the review interval.

Validation lives in :func:`fermix_memory.application.settings.settings_from_mapping`; this module
only does the file work (tomli to read, tomlkit to edit one value in place, atomic replace).
tomlkit is imported only by what writes: opening a home reads its config and never needs it.
"""

from __future__ import annotations

import stat
import textwrap
from pathlib import Path
from typing import Any

import tomli

from fermix_memory.adapters.durable_file import replace_durably
from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings import (
    SECTIONS,
    McpTokenSettings,
    ProviderSettings,
    ServerTokenSettings,
    Settings,
    knobs_of,
    settings_from_mapping,
)
from fermix_memory.application.settings_retention import EXAMPLE as RETENTION_EXAMPLE


def load_settings(path: Path) -> Settings:
    """Read and validate ``path``; a missing file means every default."""
    data = _read(path)
    return Settings() if data is None else settings_from_mapping(data, str(path))


def set_review_interval(path: Path, hours: float) -> None:
    """Set ``fermix_core.memory.review_interval_hours`` in ``path``, changing nothing else.

    The file is edited in place (tomlkit): comments, key order, other tables and formatting are
    kept; only that one value changes (or is added). The new content is validated before
    anything is written and the file is replaced atomically, so a bad value (or an already
    invalid file) raises :class:`ConfigError` and leaves the file as it was.
    """
    source = str(path)
    data = _read(path) or {}
    # Validating what is there first means the edits below only ever meet tables.
    settings_from_mapping(data, source)
    data.setdefault("fermix_core", {}).setdefault("memory", {})["review_interval_hours"] = hours
    settings_from_mapping(data, source)
    import tomlkit

    document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    core = document.get("fermix_core")
    if core is None:
        document["fermix_core"] = {"memory": {"review_interval_hours": hours}}
    elif core.get("memory") is None:
        core["memory"] = {"review_interval_hours": hours}
    else:
        core["memory"]["review_interval_hours"] = hours
    content = tomlkit.dumps(document)
    if tomli.loads(content) != data:  # the edit must mean exactly what was validated
        raise ConfigError(f"{path}: could not change review_interval_hours in place; edit the file by hand")
    _replace_atomically(path, content.encode("utf-8"))


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as file:
            return tomli.load(file)
    except FileNotFoundError:
        return None
    except tomli.TOMLDecodeError as error:
        raise ConfigError(syntax_error(path, error)) from error
    except RecursionError:
        # tomli refuses (as RecursionError) arrays / inline tables nested past 400 levels.
        raise ConfigError(f"{path}: values are nested too deeply (at most 400 levels)") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {error.start})") from error
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from error


# What each of the parser's complaints means in a config file, said our way.
_SYNTAX = {
    "Expected ']' at the end of a table declaration": "a [table] header without its closing ']'",
    "Expected ']]' at the end of an array declaration": "a [[table]] header without its closing ']]'",
    "Expected '=' after a key in a key/value pair": "a key without '= value'",
    "Invalid value": "a key whose value is missing or not a TOML value (text goes in quotes)",
    "Unterminated string": "a string without its closing quote",
    "Unclosed array": "a [list, ...] without its closing ']'",
    "Unclosed inline table": "an {inline table} without its closing '}'",
    "Invalid statement": "a line that is neither 'key = value' nor a [table] header",
    "Expected newline or end of document after a statement": "more after a value on the same line",
    "Invalid initial character for a key part": "a key that starts with a character keys cannot have",
}


def _names_on(line: str) -> str:
    """What a syntax error may quote of its line: a table header, or the key of a ``key = value``
    line; never a value (it may be a secret pasted in by mistake), nor a line without ``=``."""
    line = line.strip()
    shown = line if line.startswith("[") else line.partition("=")[0].strip() if "=" in line else ""
    shown = shown if len(shown) <= 60 else shown[:59] + "…"
    return f" ({'in' if line.startswith('[') else 'at key'} {shown!r})" if shown else ""


def syntax_error(path: Path, error: tomli.TOMLDecodeError) -> str:
    """One line naming the file, the line and what is wrong there in our words; a file that ends
    inside the broken statement is said to look cut off (a copy or a write that stopped)."""
    doc = error.doc if isinstance(error.doc, str) else ""
    lines = doc.splitlines() or [""]
    what = _SYNTAX.get(error.msg, error.msg[:1].lower() + error.msg[1:])
    cut = "; the file ends there, as if cut off" if not doc[error.pos:].strip() else ""
    return (f"{path}: TOML syntax error at line {error.lineno}, column {error.colno}: {what}"
            f"{_names_on(lines[min(error.lineno, len(lines)) - 1])}{cut}")


def _replace_atomically(path: Path, content: bytes) -> None:
    # Write through a symlinked config.toml (dotfile managers) instead of replacing the link.
    target = path.resolve()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:  # an existing config keeps the mode its owner gave it
            mode: int | None = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = None
        replace_durably(target, content, mode=mode)
    except OSError as error:
        raise ConfigError(f"{path}: cannot write: {error.strerror or error}") from error


def render_default_config() -> str:
    """A commented ``config.toml`` with every knob at its default (it loads to ``Settings()``),
    written from the settings' own descriptions (:func:`knobs_of`)."""
    parts = [_HEADER]
    for section, cls in SECTIONS.items():
        parts.append(f"[fermix_core.{section}]")
        for knob in knobs_of(cls):
            parts += [f"# {line}" for line in textwrap.wrap(knob.doc, _WIDTH - 2)]
            if knob.default is None:  # not set by default: its example, commented out
                parts.append(f"# {knob.name} = {_toml(knob.example)}")
            else:
                parts.append(f"{knob.name} = {_toml(knob.default)}")
        parts.append("")
    parts.append(_MCP_TOKENS_INTRO)
    parts += _example("mcp_tokens", McpTokenSettings)
    parts.append("")
    parts.append(_SERVER_TOKENS_INTRO)
    parts += _example("server_tokens", ServerTokenSettings)
    parts.append("")
    parts.append(_PROVIDERS_INTRO)
    parts += _example("providers", ProviderSettings)
    parts += ["", RETENTION_EXAMPLE]
    return "\n".join(parts) + "\n"


def _example(array: str, cls: type[Any]) -> list[str]:
    """A commented ``[[fermix_core.<array>]]`` entry: each knob at its example, else its default
    (a knob with neither is only described)."""
    lines = [f"# [[fermix_core.{array}]]"]
    for knob in knobs_of(cls):
        value = knob.default if knob.example is None else knob.example
        lines.append(f"# {knob.name} = {_toml(value)}  # {knob.doc}" if value is not None
                     else f"# # {knob.name}: {knob.doc}")
    return lines


def _toml(value: Any) -> str:
    import tomlkit

    return str(tomlkit.item(value).as_string())


_WIDTH = 96
_HEADER = """\
# fermix-memory configuration (<home>/config.toml).
# Every knob is shown at its default; delete a line to keep the default. Only the [fermix_core]
# table is read: other top-level tables are left to the application sharing this file.
"""
_MCP_TOKENS_INTRO = """\
# Bearer tokens of `fermix mcp --http`, each mapped to who speaks with it (ADR-0025). None is
# configured by default, and the HTTP server does not start without one. Store the token's SHA-256
# (`printf %s "$TOKEN" | sha256sum`), or name a variable holding it. An example entry:"""
_SERVER_TOKENS_INTRO = """\
# Bearer tokens of `fermix serve`, each with a role (ADR-0073): "host" (one agent's turns),
# "operator" (everything) or "reader" (reads only). None is configured by default, and the server
# does not start without one. Store the token's SHA-256, or name a variable holding it:"""
_PROVIDERS_INTRO = """\
# Model providers, tried in the listed order: the first is the primary, the rest are fallbacks.
# None is configured by default. An example entry (remove the leading "# " to use it):"""
