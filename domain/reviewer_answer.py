"""The strict parser of the memory reviewer's answer (R-OPS, SPEC §12).

The answer is EITHER the literal sentence ``Nothing to save.`` (surrounding whitespace
allowed; no other spelling, case or punctuation) OR exactly one JSON object
``{"operations": [...]}``, optionally inside ONE fenced block opened by ```` ```json ````
or a bare ```` ``` ```` and nothing outside it but whitespace.

Two kinds of problem are told apart on purpose:

* structural problems (not JSON, prose around the JSON, duplicate keys, ``NaN``, an unknown
  ``op``, a missing or unknown field, a field of the wrong JSON type, an id that cannot be a
  row id, more than :data:`MAX_OPERATIONS` operations, an answer over :data:`MAX_ANSWER_BYTES`)
  fail the whole answer with :class:`ReviewerAnswerError`, whose message names the operation
  index (``operations[3]``);
* content problems (an unknown category, an empty or over-long value, an unusable key, a
  confidence outside 0..1) are passed through untouched, so that admission refuses each such
  operation on its own and records the refusal, while the rest of the batch still applies; so
  is an ``expires_at`` text that is no ISO 8601 time with a zone, or a time already past.

``null`` is never accepted for an optional field: omit the field instead.

:func:`fermix_memory.domain.reviewer_answer_repair.parse_reviewer_answer_tolerant` is this
parser plus a few conservative repairs of what weak local models write; every operation it
returns still went through the same structural checks (:func:`operations_from_document`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fermix_memory.domain.errors import ReviewerAnswerError
from fermix_memory.domain.operations import (
    DEFAULT_CONFIDENCE,
    AddOperation,
    ArchiveOperation,
    Operation,
    ReplaceOperation,
)

NOTHING_TO_SAVE = "Nothing to save."
MAX_ANSWER_BYTES = 64 * 1024
MAX_OPERATIONS = 50
MAX_MEMORY_ID = 2**63 - 1  # SQLite's INTEGER range: a larger id could never name a row

_FENCE = "```"

_TEXT = {"type": "string"}
_CATEGORY = {"type": "string", "enum": ["identity", "preference", "interest", "goal", "context", "directive"]}
_CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1}
_ID = {"type": "integer", "minimum": 1}
MAX_SOURCE_IDS = 50
_SOURCES = {"type": "array", "items": _ID, "maxItems": MAX_SOURCE_IDS}  # the parser's own limit
_EXPIRES = {"type": "string", "description": "ISO 8601 time with a zone when the fact is to be erased, or 'never'"}

# The answer's JSON form as a JSON schema, for providers with structured output. An empty
# "operations" list is the structured spelling of ``Nothing to save.``.
OPERATIONS_SCHEMA_NAME = "memory_operations"
OPERATIONS_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "maxItems": MAX_OPERATIONS,
            "items": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"op": {"const": "add"}, "category": _CATEGORY, "key": _TEXT,
                                       "value": _TEXT, "confidence": _CONFIDENCE,
                                       "source_message_ids": _SOURCES, "expires_at": _EXPIRES},
                        "required": ["op", "category", "key", "value"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"op": {"const": "replace"}, "id": _ID, "value": _TEXT,
                                       "category": _CATEGORY, "key": _TEXT, "confidence": _CONFIDENCE,
                                       "source_message_ids": _SOURCES, "expires_at": _EXPIRES},
                        "required": ["op", "id"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"op": {"const": "archive"}, "id": _ID, "reason": _TEXT,
                                       "source_message_ids": _SOURCES},
                        "required": ["op", "id"],
                        "additionalProperties": False,
                    },
                ]
            },
        }
    },
    "required": ["operations"],
    "additionalProperties": False,
}

_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # op: (required fields, optional fields)
    "add": (frozenset({"op", "category", "key", "value"}),
            frozenset({"confidence", "source_message_ids", "expires_at"})),
    "replace": (frozenset({"op", "id"}),
                frozenset({"value", "category", "key", "confidence", "source_message_ids", "expires_at"})),
    "archive": (frozenset({"op", "id"}), frozenset({"reason", "source_message_ids"})),
}


class _BadJson(ValueError):
    """Internal: raised from inside ``json.loads`` hooks (``quoted``: the answer's words it names)."""

    def __init__(self, message: str, quoted: str = "") -> None:
        super().__init__(message + quoted)
        self.message, self.quoted = message, quoted


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _BadJson("duplicate key ", repr(key[:40]))
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise _BadJson(f"{name} is not a JSON number")


def decode_json(text: str) -> object:
    """``json.loads`` refusing duplicate keys and ``NaN``/``Infinity`` (raises ``ValueError``)."""
    return json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)


def answer_too_long(text: str) -> bool:
    """Over :data:`MAX_ANSWER_BYTES` in UTF-8 (the character count first: it is cheaper)."""
    return len(text) > MAX_ANSWER_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_ANSWER_BYTES


def parse_reviewer_answer(text: str) -> list[Operation]:
    """Parse a reviewer answer into operations; ``[]`` means ``Nothing to save.``.

    ``{"operations": []}`` is accepted and also gives ``[]``. Raises
    :class:`ReviewerAnswerError` for anything that is not exactly one of the two forms.
    """
    if not isinstance(text, str):
        raise ReviewerAnswerError(f"reviewer answer must be text, got {type(text).__name__}")
    if answer_too_long(text):
        raise ReviewerAnswerError(f"reviewer answer is longer than {MAX_ANSWER_BYTES} bytes")
    stripped = text.strip()
    if stripped == NOTHING_TO_SAVE:
        return []
    if not stripped:
        raise ReviewerAnswerError("reviewer answer is empty")
    body = _unfence(stripped)
    if not body.lstrip().startswith("{"):
        raise ReviewerAnswerError(f"reviewer answer must be {NOTHING_TO_SAVE!r} or one JSON object, got ",
                                  _excerpt(stripped))
    try:
        document = decode_json(body)
    except _BadJson as exc:
        raise ReviewerAnswerError(f"reviewer answer is not one valid JSON object: {exc.message}", exc.quoted) from None
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError (incl. prose after the object; its messages name a
        # position, never the text) and integers beyond Python's digit limit; RecursionError
        # covers absurd nesting.
        raise ReviewerAnswerError(f"reviewer answer is not one valid JSON object: {str(exc)[:200]}") from None
    return operations_from_document(document)


def _unfence(text: str) -> str:
    """The inside of one fenced block spanning the whole answer, else ``text`` itself.

    The closing fence is the answer's last three characters, so ``` inside a JSON string
    cannot end the block early. Plain string slicing keeps this linear on hostile input.
    """
    if not (text.startswith(_FENCE) and text.endswith(_FENCE)):
        return text
    newline = text.find("\n")
    if newline < 0 or newline > len(text) - len(_FENCE):
        raise ReviewerAnswerError("a fenced reviewer answer must start with a ```json line")
    tag = text[len(_FENCE) : newline].strip()
    if tag not in ("", "json", "JSON"):
        raise ReviewerAnswerError("fenced block must be ```json or ```, got ```", _excerpt(tag))
    return text[newline + 1 : -len(_FENCE)]


def operations_from_document(document: object) -> list[Operation]:
    """The operations of a decoded answer, after every structural check (see the module docstring)."""
    if not isinstance(document, dict):
        raise ReviewerAnswerError("reviewer answer must be a JSON object")
    if set(document) != {"operations"}:
        extra = sorted(set(document) - {"operations"})
        if extra:
            raise ReviewerAnswerError("reviewer answer has unknown top-level keys: ", _names(extra))
        raise ReviewerAnswerError('reviewer answer has no "operations" list')
    raw_ops = document["operations"]
    if not isinstance(raw_ops, list):
        raise ReviewerAnswerError('"operations" must be a JSON array')
    if len(raw_ops) > MAX_OPERATIONS:
        raise ReviewerAnswerError(f"reviewer answer has {len(raw_ops)} operations, limit {MAX_OPERATIONS}")
    return [_operation(raw, index) for index, raw in enumerate(raw_ops)]


def _operation(raw: object, index: int) -> Operation:
    where = f"operations[{index}]"
    if not isinstance(raw, dict):
        raise ReviewerAnswerError(f"{where} must be a JSON object")
    op = raw.get("op")
    if not isinstance(op, str) or op not in _FIELDS:
        raise ReviewerAnswerError(f'{where}: "op" must be "add", "replace" or "archive", got ', _excerpt(op))
    required, optional = _FIELDS[op]
    missing = sorted(required - set(raw))
    if missing:
        raise ReviewerAnswerError(f"{where} ({op}): missing {_names(missing)}")
    unknown = sorted(set(raw) - required - optional)
    if unknown:
        raise ReviewerAnswerError(f"{where} ({op}): unknown fields ", _names(unknown))
    sources = _sources(raw, where)
    if op == "add":
        return AddOperation(
            category=_text(raw, "category", where),
            key=_text(raw, "key", where),
            value=_text(raw, "value", where),
            confidence=_number(raw, "confidence", where) if "confidence" in raw else DEFAULT_CONFIDENCE,
            source_message_ids=sources,
            expires_at=_text(raw, "expires_at", where) if "expires_at" in raw else None,
        )
    memory_id = _memory_id(raw, where)
    if op == "replace":
        if not set(raw) & (optional - {"source_message_ids"}):
            raise ReviewerAnswerError(
                f'{where} (replace): give at least one of "value", "category", "key", "confidence", "expires_at"'
            )
        return ReplaceOperation(
            id=memory_id,
            value=_text(raw, "value", where) if "value" in raw else None,
            category=_text(raw, "category", where) if "category" in raw else None,
            key=_text(raw, "key", where) if "key" in raw else None,
            confidence=_number(raw, "confidence", where) if "confidence" in raw else None,
            source_message_ids=sources,
            expires_at=_text(raw, "expires_at", where) if "expires_at" in raw else None,
        )
    return ArchiveOperation(id=memory_id, reason=_text(raw, "reason", where) if "reason" in raw else "",
                            source_message_ids=sources)


def _text(raw: dict[str, Any], field: str, where: str) -> str:
    value = raw[field]
    if not isinstance(value, str):
        raise ReviewerAnswerError(f'{where}: "{field}" must be a JSON string, got {_json_type(value)}')
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a \ud800 escape) could not be stored or shown later.
        raise ReviewerAnswerError(f'{where}: "{field}" is not valid Unicode') from None
    return value


def _number(raw: dict[str, Any], field: str, where: str) -> float:
    value = raw[field]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReviewerAnswerError(f'{where}: "{field}" must be a JSON number, got {_json_type(value)}')
    # The range (0..1) is admission's to check, so an out-of-range value is refused and recorded.
    return value


def _memory_id(raw: dict[str, Any], where: str) -> int:
    value = raw["id"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReviewerAnswerError(f'{where}: "id" must be a JSON integer, got {_json_type(value)}')
    if not 1 <= value <= MAX_MEMORY_ID:
        raise ReviewerAnswerError(f'{where}: "id" must be a positive row id')
    return value


def _sources(raw: dict[str, Any], where: str) -> tuple[int, ...]:
    """The optional ``source_message_ids``: a JSON array of positive integers, duplicates folded.
    Whether each names a message the review was shown is the review's to check (not structure)."""
    if "source_message_ids" not in raw:
        return ()
    value = raw["source_message_ids"]
    if not isinstance(value, list):
        raise ReviewerAnswerError(f'{where}: "source_message_ids" must be a JSON array, got {_json_type(value)}')
    if len(value) > MAX_SOURCE_IDS:
        raise ReviewerAnswerError(f'{where}: "source_message_ids" has more than {MAX_SOURCE_IDS} ids')
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= MAX_MEMORY_ID:
            raise ReviewerAnswerError(f'{where}: "source_message_ids" must hold positive integer message ids')
    return tuple(dict.fromkeys(value))


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _names(names: Sequence[str]) -> str:
    return ", ".join(repr(n[:40]) for n in names[:10])


def _excerpt(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def operation_to_dict(op: Operation) -> dict[str, Any]:
    """The JSON form of one operation (optional fields left out when unset)."""
    if isinstance(op, AddOperation):
        return {
            "op": "add",
            "category": op.category,
            "key": op.key,
            "value": op.value,
            "confidence": op.confidence,
            **_sources_dict(op),
            **_expiry_dict(op),
        }
    if isinstance(op, ReplaceOperation):
        out: dict[str, Any] = {"op": "replace", "id": op.id}
        for field in ("value", "category", "key", "confidence"):
            if getattr(op, field) is not None:
                out[field] = getattr(op, field)
        return out | _sources_dict(op) | _expiry_dict(op)
    out = {"op": "archive", "id": op.id}
    if op.reason:
        out["reason"] = op.reason
    return out | _sources_dict(op)


def _sources_dict(op: Operation) -> dict[str, Any]:
    return {"source_message_ids": list(op.source_message_ids)} if op.source_message_ids else {}


def _expiry_dict(op: AddOperation | ReplaceOperation) -> dict[str, Any]:
    """The op's ``expires_at`` as JSON text (a datetime in ISO 8601), left out when not named."""
    value = op.expires_at
    if value is None:
        return {}
    return {"expires_at": value.isoformat() if isinstance(value, datetime) else value}
