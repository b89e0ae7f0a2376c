"""The model's tool arguments: parsed from a dict or JSON text, and checked against a tool's
parameters schema. Every mistake is a :class:`ToolInputError` the model can read and correct."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from fermix_memory.application.tool_definitions import MAX_ARGUMENT_CHARS


class ToolInputError(Exception):
    """A tool call the model got wrong; becomes an ``ok: false`` result, never escapes dispatch."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_JSON_TYPE_NAMES: Final = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                           (Mapping, "object"), (list, "array"), (tuple, "array"), (type(None), "null"))


def _json_type(value: object) -> str:
    for cls, name in _JSON_TYPE_NAMES:
        if isinstance(value, cls):
            return name
    return type(value).__name__


def show_value(value: object) -> str:
    """A short, safe rendering of model-supplied text for an error message."""
    if isinstance(value, str):
        return repr(value[:40]) + ("…" if len(value) > 40 else "")
    return _json_type(value)


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_arguments(arguments: object) -> Mapping[Any, Any]:
    """The arguments object from a dict, a JSON string, or nothing (``None`` / blank: ``{}``)."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENT_CHARS:
            raise ToolInputError("arguments_too_large", f"arguments are longer than {MAX_ARGUMENT_CHARS} characters")
        if not arguments.strip():
            return {}
        try:
            data = json.loads(arguments, parse_constant=_no_constants, object_pairs_hook=_unique_keys)
        except _DuplicateKey as exc:
            raise ToolInputError("invalid_json", f"argument {show_value(str(exc))} is given twice") from None
        except (ValueError, RecursionError):
            raise ToolInputError("invalid_json", "arguments are not valid JSON") from None
    else:
        data = arguments
    if data is None:  # JSON null, like no arguments at all
        return {}
    if not isinstance(data, Mapping):
        raise ToolInputError("invalid_arguments", f"arguments must be a JSON object, got {_json_type(data)}")
    return data


def _string(name: str, schema: Mapping[str, Any], value: object) -> str:
    if not isinstance(value, str):
        raise ToolInputError("invalid_type", f"{name} must be a string, got {_json_type(value)}")
    if len(value) > schema.get("maxLength", math.inf):
        raise ToolInputError("too_long", f"{name} is longer than {schema['maxLength']} characters")
    if len(value) < schema.get("minLength", 0):
        raise ToolInputError("too_short", f"{name} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolInputError("invalid_text", f"{name} is not valid Unicode text") from None
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(schema["enum"])
        raise ToolInputError("invalid_value", f"{name} must be one of {allowed}, got {show_value(value)}")
    return value


def _integer(name: str, schema: Mapping[str, Any], value: object) -> int:
    # JSON Schema: a number with no fraction is an integer (10.0 is 10); a boolean is not.
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    else:
        raise ToolInputError("invalid_type", f"{name} must be an integer, got {_json_type(value)}")
    low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
    if not low <= number <= high:
        raise ToolInputError("out_of_range", f"{name} must be from {low} to {high}")
    return number


_CHECKS: Final[dict[str, Callable[[str, Mapping[str, Any], object], Any]]] = {
    "string": _string,
    "integer": _integer,
}


def validate_arguments(schema: Mapping[str, Any], data: Mapping[Any, Any]) -> dict[str, Any]:
    """``data`` checked against a tool's parameters schema, with defaults filled in.

    Supports the subset the definitions use: string (minLength, maxLength, enum), integer
    (minimum, maximum), required, additionalProperties false. A JSON ``null`` for an optional
    argument counts as omitted: several models send nulls for arguments they do not use.
    """
    properties: Mapping[str, Mapping[str, Any]] = schema["properties"]
    for name in data:
        if not isinstance(name, str) or name not in properties:
            known = ", ".join(properties) or "none"
            raise ToolInputError("unknown_argument", f"unknown argument {show_value(name)} (arguments: {known})")
    out: dict[str, Any] = {}
    for name, prop in properties.items():
        value = data.get(name)
        if value is None:
            if name in schema.get("required", ()):
                raise ToolInputError("missing_argument", f"{name} is required")
            if "default" in prop:
                out[name] = prop["default"]
            continue
        out[name] = _CHECKS[prop["type"]](name, prop, value)
    return out
