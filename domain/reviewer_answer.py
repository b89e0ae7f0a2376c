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
  operation on its own and records the refusal, while the rest of the batch still applies.

``null`` is never accepted for an optional field: omit the field instead.

:func:`parse_reviewer_answer_tolerant` is the strict parser plus a few conservative repairs of
what weak local models write (see its docstring); every operation it returns still went
through the same structural checks, and what it repaired is reported.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
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

# The answer's JSON form as a JSON schema, for providers with structured output. An empty
# "operations" list is the structured spelling of ``Nothing to save.``.
OPERATIONS_SCHEMA_NAME = "memory_operations"
OPERATIONS_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"op": {"const": "add"}, "category": _CATEGORY, "key": _TEXT,
                                       "value": _TEXT, "confidence": _CONFIDENCE},
                        "required": ["op", "category", "key", "value"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"op": {"const": "replace"}, "id": _ID, "value": _TEXT,
                                       "category": _CATEGORY, "key": _TEXT, "confidence": _CONFIDENCE},
                        "required": ["op", "id"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"op": {"const": "archive"}, "id": _ID, "reason": _TEXT},
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
    "add": (frozenset({"op", "category", "key", "value"}), frozenset({"confidence"})),
    "replace": (frozenset({"op", "id"}), frozenset({"value", "category", "key", "confidence"})),
    "archive": (frozenset({"op", "id"}), frozenset({"reason"})),
}


class _BadJson(ValueError):
    """Internal: raised from inside ``json.loads`` hooks."""


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _BadJson(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise _BadJson(f"{name} is not a JSON number")


def _too_long(text: str) -> bool:
    """Over :data:`MAX_ANSWER_BYTES` in UTF-8 (the character count first: it is cheaper)."""
    return len(text) > MAX_ANSWER_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_ANSWER_BYTES


def parse_reviewer_answer(text: str) -> list[Operation]:
    """Parse a reviewer answer into operations; ``[]`` means ``Nothing to save.``.

    ``{"operations": []}`` is accepted and also gives ``[]``. Raises
    :class:`ReviewerAnswerError` for anything that is not exactly one of the two forms.
    """
    if not isinstance(text, str):
        raise ReviewerAnswerError(f"reviewer answer must be text, got {type(text).__name__}")
    if _too_long(text):
        raise ReviewerAnswerError(f"reviewer answer is longer than {MAX_ANSWER_BYTES} bytes")
    stripped = text.strip()
    if stripped == NOTHING_TO_SAVE:
        return []
    if not stripped:
        raise ReviewerAnswerError("reviewer answer is empty")
    body = _unfence(stripped)
    if not body.lstrip().startswith("{"):
        raise ReviewerAnswerError(
            f"reviewer answer must be {NOTHING_TO_SAVE!r} or one JSON object, got {_excerpt(stripped)}"
        )
    try:
        document = json.loads(body, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError (incl. prose after the object), our hooks and
        # integers beyond Python's digit limit; RecursionError covers absurd nesting.
        raise ReviewerAnswerError(f"reviewer answer is not one valid JSON object: {str(exc)[:200]}") from None
    return _operations(document)


def parse_reviewer_answer_tolerant(text: str) -> tuple[list[Operation], tuple[str, ...]]:
    """:func:`parse_reviewer_answer`, else the same after conservative repairs; returns the
    operations and the names of the repairs made (``()`` when the answer was already strict).

    Repairs, tried only when the strict parse fails, each kept only if the result then passes
    every structural check of the strict parser:

    * ``<think>...</think>`` before the answer (reasoning models served locally) is dropped;
    * prose around the answer: the inside of the ONE fenced block, or else the ONE top-level
      ``{...}`` object in the text, is taken (two candidates: refused, it is ambiguous);
    * trailing commas before ``}`` or ``]`` are dropped;
    * Python-style literals (single-quoted strings) are read as literals, never evaluated,
      and refused when a key repeats.

    Never repaired (the strict error is raised): ``Nothing to save.`` in any other spelling
    or with words around it, two JSON objects, truncated JSON, missing or unknown fields,
    wrong types, unknown ops, ``null`` or ``true`` where text or a number belongs.
    """
    try:
        return parse_reviewer_answer(text), ()
    except ReviewerAnswerError as strict:
        if not isinstance(text, str) or _too_long(text):
            raise
        error = strict
    repairs: list[str] = []
    body = text.strip()
    if body.startswith("<think>") and "</think>" in body:
        body = body[body.index("</think>") + len("</think>"):].strip()
        repairs.append("thinking dropped")
        try:
            return parse_reviewer_answer(body), tuple(repairs)
        except ReviewerAnswerError as exc:
            error = exc
    candidate = _only_candidate(body)
    if candidate is None:
        raise error
    if candidate != body:
        repairs.append("prose around the answer dropped")
    for repair, fix in (("", _same), ("trailing commas dropped", _drop_trailing_commas)):
        fixed = fix(candidate)
        try:
            document = json.loads(fixed, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            continue
        return _operations(document), tuple(repairs + ([repair] if repair else []))
    document = _python_literal(candidate)
    if document is None:
        raise error
    return _operations(document), tuple([*repairs, "Python-style literal read as JSON"])


_FENCED_BLOCK = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _same(text: str) -> str:
    return text


def _only_candidate(text: str) -> str | None:
    """The one fenced block's inside, or else the one top-level ``{...}`` object, in ``text``."""
    blocks = _FENCED_BLOCK.findall(text)
    if len(blocks) == 1:
        inner: str = blocks[0].strip()
        return inner
    if blocks:
        return None
    objects = _top_level_objects(text)
    return objects[0] if len(objects) == 1 else None


def _top_level_objects(text: str) -> list[str]:
    """Every balanced ``{...}`` at nesting depth 0 (quotes of either kind respected); linear."""
    found: list[str] = []
    depth, start = 0, -1
    for index, char in enumerate(_strings_blanked(text, "\"'", in_braces_only=True)):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                found.append(text[start : index + 1])
    return found


def _drop_trailing_commas(text: str) -> str:
    """``text`` without the commas that directly close an object or array, outside strings."""
    out, last = [], 0
    for match in _TRAILING_COMMA.finditer(_strings_blanked(text, '"')):
        out.append(text[last : match.start()])
        last = match.start() + 1  # skip the comma only
    out.append(text[last:])
    return "".join(out)


def _strings_blanked(text: str, quotes: str, *, in_braces_only: bool = False) -> str:
    """``text`` with the inside of every string quoted by one of ``quotes`` replaced by spaces
    (same length). ``in_braces_only``: quotes outside any ``{...}`` (an apostrophe in prose
    around the answer) open no string."""
    chars = list(text)
    quote, escaped, depth = "", False, 0
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
                continue
            chars[index] = " "
        elif char in quotes and (depth or not in_braces_only):
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
    return "".join(chars)


def _python_literal(text: str) -> object | None:
    """``text`` read as a Python literal (never evaluated); ``None`` if it is not one, or if
    any dict in it repeats a key (``literal_eval`` would silently keep the last)."""
    try:
        tree = ast.parse(text, mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                if len(keys) != len(set(map(repr, keys))):
                    return None
        value: object = ast.literal_eval(tree)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    return value


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
        raise ReviewerAnswerError(f"fenced block must be ```json or ```, got ```{_excerpt(tag)}")
    return text[newline + 1 : -len(_FENCE)]


def _operations(document: object) -> list[Operation]:
    if not isinstance(document, dict):
        raise ReviewerAnswerError("reviewer answer must be a JSON object")
    if set(document) != {"operations"}:
        extra = sorted(set(document) - {"operations"})
        if extra:
            raise ReviewerAnswerError(f"reviewer answer has unknown top-level keys: {_names(extra)}")
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
        raise ReviewerAnswerError(f'{where}: "op" must be "add", "replace" or "archive", got {_excerpt(op)}')
    required, optional = _FIELDS[op]
    missing = sorted(required - set(raw))
    if missing:
        raise ReviewerAnswerError(f"{where} ({op}): missing {_names(missing)}")
    unknown = sorted(set(raw) - required - optional)
    if unknown:
        raise ReviewerAnswerError(f"{where} ({op}): unknown fields {_names(unknown)}")
    if op == "add":
        return AddOperation(
            category=_text(raw, "category", where),
            key=_text(raw, "key", where),
            value=_text(raw, "value", where),
            confidence=_number(raw, "confidence", where) if "confidence" in raw else DEFAULT_CONFIDENCE,
        )
    memory_id = _memory_id(raw, where)
    if op == "replace":
        if not set(raw) & optional:
            raise ReviewerAnswerError(
                f'{where} (replace): give at least one of "value", "category", "key", "confidence"'
            )
        return ReplaceOperation(
            id=memory_id,
            value=_text(raw, "value", where) if "value" in raw else None,
            category=_text(raw, "category", where) if "category" in raw else None,
            key=_text(raw, "key", where) if "key" in raw else None,
            confidence=_number(raw, "confidence", where) if "confidence" in raw else None,
        )
    return ArchiveOperation(id=memory_id, reason=_text(raw, "reason", where) if "reason" in raw else "")


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
        }
    if isinstance(op, ReplaceOperation):
        out: dict[str, Any] = {"op": "replace", "id": op.id}
        for field in ("value", "category", "key", "confidence"):
            if getattr(op, field) is not None:
                out[field] = getattr(op, field)
        return out
    out = {"op": "archive", "id": op.id}
    if op.reason:
        out["reason"] = op.reason
    return out


def format_reviewer_answer(operations: Sequence[Operation]) -> str:
    """The canonical answer text for ``operations`` (``Nothing to save.`` when empty)."""
    if not operations:
        return NOTHING_TO_SAVE
    return json.dumps({"operations": [operation_to_dict(op) for op in operations]}, ensure_ascii=False)
