"""What a LangGraph store search filter means (InMemoryStore's semantics, with SqliteStore's dotted
paths) and what the SQL may look for first: the texts and numbers every item that passes holds
(ADR-0107, ADR-0109); an operator the semantics do not define is refused."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from fermix_memory.application.query_ports import NumberBound
from fermix_memory.entrypoints.integrations.langgraph_items import FilterNotSupported, text_as_stored

_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def _operator(value: object, operator: str, operand: object) -> bool:
    if operator == "$eq":
        return value == operand
    if operator == "$ne":
        return value != operand
    left, right = _number(value), _number(operand)
    if left is None or right is None:
        return False  # a comparison with something that is no number matches nothing
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right


def matches(value: object, condition: object) -> bool:
    """InMemoryStore's filter semantics: nested dicts match field by field, lists element by
    element, ``{"$op": operand}`` applies the operators, anything else is ``==``."""
    if isinstance(condition, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in condition):
            return all(_operator(value, op, operand) for op, operand in condition.items())
        if not isinstance(value, Mapping):
            return False
        return all(matches(value.get(k), v) for k, v in condition.items())
    if isinstance(condition, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(condition)
                and all(matches(v, c) for v, c in zip(value, condition, strict=True)))
    return value == condition


_MISSING = object()


def at_path(value: Mapping[str, Any], field: str) -> object:
    """The part of an item value a filter field names: a dotted field is a path into nested
    objects, as SqliteStore reads it (``"user.level"``: ``value["user"]["level"]``); where that
    path leads nowhere, a top-level field of that very name (InMemoryStore's reading); else ``None``."""
    if isinstance(field, str) and "." in field:
        found: object = value
        for part in field.split("."):
            found = found.get(part, _MISSING) if isinstance(found, Mapping) else _MISSING
            if found is _MISSING:
                break
        if found is not _MISSING:
            return found
    return value.get(field)


def filter_texts(conditions: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Texts the JSON of every item that passes ``conditions`` holds: each text a condition asks
    to be equal to (plainly, in a nested object or list, or by ``$eq``), as :func:`encode` writes
    it. A pre-filter the store gives its read in SQL; :func:`item_matches` decides."""
    found: dict[str, None] = {}

    def walk(condition: object) -> None:
        if isinstance(condition, str):
            found[text_as_stored(condition)] = None
        elif isinstance(condition, Mapping):
            for k, v in condition.items():
                if k == "$eq" or not (isinstance(k, str) and k.startswith("$")):
                    walk(v)
        elif isinstance(condition, list | tuple):
            for c in condition:
                walk(c)

    for condition in (conditions or {}).values():
        walk(condition)
    return tuple(found)


# How far a bound reaches past its operand, relative to it: SQLite reads the stored numbers, the
# filter compares Python floats; a margin far wider than a rounding keeps every item it passes.
_MARGIN = 1e-9
_ORDERS = {"$gt": True, "$gte": True, "$lt": False, "$lte": False}  # the operator bounds from below


def filter_numbers(conditions: Mapping[str, Any] | None) -> tuple[NumberBound, ...]:
    """Bounds of the numbers every item that passes ``conditions`` holds (ADR-0109): for each
    field compared with a number (plainly, by ``$eq``, or ordered by ``$gt``, ``$gte``, ``$lt``,
    ``$lte``, where a number written as text also compares), the range of the field's number, at
    the field's path in the row's document or at the top-level key of that very name
    (:func:`at_path`). A pre-filter the store gives its read in SQL; :func:`item_matches` decides."""
    bounds = []
    for field, condition in (conditions or {}).items():
        if isinstance(field, str):
            paths = (("value", *field.split(".")), ("value", field)) if "." in field else (("value", field),)
            bounds += [NumberBound(paths, low, high, text) for low, high, text in _ranges(condition)]
    return tuple(bounds)


def _ranges(condition: object) -> Iterator[tuple[float | None, float | None, bool]]:
    """The ranges a field's number lies in when it passes ``condition`` (low, high, and whether text passes)."""
    if not isinstance(condition, Mapping):
        yield from _equal(condition)
    elif any(isinstance(k, str) and k.startswith("$") for k in condition):
        for operator, operand in condition.items():
            if operator == "$eq":
                yield from _equal(operand)
            elif operator in _ORDERS and (number := _number(operand)) is not None and math.isfinite(number):
                low, high = _around(number)
                yield (low, None, True) if _ORDERS[operator] else (None, high, True)


def _equal(operand: object) -> Iterator[tuple[float | None, float | None, bool]]:
    """The range of a number equal to ``operand`` (when it is a number: text equals no number)."""
    if type(operand) in (int, float, bool) and (number := _number(operand)) is not None and math.isfinite(number):
        yield *_around(number), False


def _around(number: float) -> tuple[float, float]:
    """``number`` widened by :data:`_MARGIN` of it on each side."""
    margin = abs(number) * _MARGIN
    return number - margin, number + margin


def item_matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether an item value passes a search filter: each field (see :func:`at_path`) matches
    its condition (see :func:`matches`)."""
    return all(matches(at_path(value, field), condition) for field, condition in (conditions or {}).items())


def check_filter(condition: object) -> None:
    """Refuse an operator the filter semantics do not define (before anything is read)."""
    if isinstance(condition, Mapping):
        for k, v in condition.items():
            if isinstance(k, str) and k.startswith("$") and k not in _OPERATORS:
                known = ", ".join(sorted(_OPERATORS))
                raise FilterNotSupported(f"filter operator {k!r} is not supported (use {known})")
            check_filter(v)
    elif isinstance(condition, list | tuple):
        for c in condition:
            check_filter(c)
