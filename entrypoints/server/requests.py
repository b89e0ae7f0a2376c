"""Reading a request before any use case sees it: the body within its limit, JSON that is one
object with no repeated key and no key the operation does not take, and query parameters as
their declared types (ADR-0073). Anything else is refused with a typed error, nothing stored."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import ClientDisconnect
from starlette.types import Receive

from fermix_memory.adapters.sql.codec import CONVERTER
from fermix_memory.entrypoints.server.errors import HttpRefusal, bad_request
from fermix_memory.entrypoints.server.schema import Schema

try:
    import orjson as _ORJSON
except ImportError:  # pragma: no cover - orjson comes with the extra [server]
    _ORJSON = None  # type: ignore[assignment]

MAX_BODY_BYTES = 1 << 20
# Moments and dataclasses go to the converter (``_unstructured``), as the standard encoder sends them.
_ORJSON_OPTIONS = 0 if _ORJSON is None else _ORJSON.OPT_PASSTHROUGH_DATETIME | _ORJSON.OPT_PASSTHROUGH_DATACLASS


def _too_large(limit: int) -> HttpRefusal:
    return HttpRefusal(413, "body_too_large", f"the request body is over the limit of {limit:,} bytes")


async def receive_body(receive: Receive, declared: bytes | None, limit: int) -> bytes:
    """The body (``declared``: its Content-Length, if given), refused (413) as soon as it passes
    ``limit`` bytes: never read whole first."""
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise _too_large(limit) if declared.isdigit() else bad_request("malformed_request", "a bad Content-Length")
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):  # the whole body at once
        body: bytes = message.get("body", b"")
        if len(body) > limit:
            raise _too_large(limit)
        return body
    chunks, size = [], 0
    while True:
        if message["type"] != "http.request":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise bad_request("malformed_json", f"the key {key[:40]!r} appears twice in one object")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise bad_request("malformed_json", f"{name} is not JSON")


# ``json.loads(text, object_pairs_hook=..., parse_constant=...)`` builds this decoder (and its
# scanner) anew for every body; built once, the same reading takes half the time.
_DECODE = json.JSONDecoder(object_pairs_hook=_no_repeats, parse_constant=_no_constant).decode


def json_object(data: bytes, allowed: frozenset[str], required: tuple[str, ...]) -> dict[str, Any]:
    """``data`` as one JSON object whose keys are among ``allowed`` and include ``required``."""
    try:
        text = data.decode("utf-8")
        # json.loads refuses a leading byte order mark, as it did before; the decoder alone would not say so
        value = json.loads(text) if text.startswith("\ufeff") else _DECODE(text)
    except UnicodeDecodeError:
        raise bad_request("malformed_json", "the body is not UTF-8") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise bad_request("malformed_json", f"the body is not JSON: {str(exc)[:120]}") from None
    if not isinstance(value, dict):
        raise bad_request("malformed_json", "the body must be one JSON object")
    unknown = sorted(k for k in value if k not in allowed)
    if unknown:
        raise bad_request("unknown_field", f"unknown field {unknown[0][:40]!r}; this operation takes "
                          + ", ".join(sorted(allowed)))
    for name in required:
        if name not in value:
            raise bad_request("invalid_argument", f"{name} is required")
    return value


def query_values(params: QueryParams, declared: Mapping[str, Schema]) -> dict[str, Any]:
    """Each query parameter as its declared type (a number, true/false, text); unknown or repeated
    parameters are refused."""
    values: dict[str, Any] = {}
    for name, text in params.multi_items():
        schema = declared.get(name)
        if schema is None:
            raise bad_request("unknown_field", f"unknown query parameter {name[:40]!r}")
        if name in values:
            raise bad_request("invalid_argument", f"the query parameter {name[:40]!r} is given twice")
        values[name] = _typed(name, text, schema.get("type"))
    return values


def _typed(name: str, text: str, kind: object) -> Any:
    if kind == "integer":
        body = text[1:] if text[:1] == "-" else text
        if not body.isascii() or not body.isdigit() or len(body) > 19:
            raise bad_request("invalid_number", f"{name} must be a whole number")
        return int(text)
    if kind == "boolean":
        if text not in ("true", "false"):
            raise bad_request("invalid_argument", f"{name} must be true or false")
        return text == "true"
    return text


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _unstructured(value: Any) -> Any:
    """What JSON cannot write as it is (an attrs value, a moment), as the Python API's converter
    gives it; what it cannot give either is refused."""
    plain = CONVERTER.unstructure(value)
    if type(plain) is type(value):
        raise TypeError(f"{type(value).__name__} is not JSON")
    return plain


# Our own values hold no cycles: the encoder is spared keeping track of the containers it is in.
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_unstructured,
                           check_circular=False).encode


def _encode_json(data: Any) -> bytes:
    try:
        text = _ENCODE(data)
    except ValueError:
        text = _ENCODE(_finite(CONVERTER.unstructure(data)))
    return text.encode("utf-8")


def encode_json(data: Any) -> bytes:
    """``data`` as JSON (UTF-8 as it is; a rank that is not a finite number is ``null``). Plain
    data (a prompt's messages) is written as it is; only the values JSON cannot write go through
    the converter, when met. With orjson present (extra ``[server]``), it writes what it can, the
    same JSON many times faster (a moment and an attrs value still go through the converter);
    what it refuses (a whole number past 64 bits, a key that is not text) the standard encoder
    writes, as without it."""
    if _ORJSON is not None:
        try:
            encoded: bytes = _ORJSON.dumps(data, default=_unstructured, option=_ORJSON_OPTIONS)
            return encoded
        except _ORJSON.JSONEncodeError:
            pass  # the standard encoder writes what orjson refuses
    return _encode_json(data)
