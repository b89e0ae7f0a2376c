"""SQLite's SQL of a bound of a number in a row's JSON value (``NumberBound``, ADR-0109): what
``json_extract`` reads at a path of quoted labels (``true`` and ``false`` read as 1 and 0). A value
that is no JSON holds no such number."""

from __future__ import annotations

import math
from typing import Any

from fermix_memory.application.query_ports import NumberBound


def number_sql(path: tuple[str, ...], bound: NumberBound) -> tuple[str, list[Any]] | None:
    """The SQL holding ``bound`` at ``path`` of ``value`` and its parameters; ``None`` for a path
    SQLite's JSON paths cannot name (an empty label, or one with a quote, a backslash or a control
    character)."""
    if not path or any(not key or '"' in key or "\\" in key or not key.isprintable() for key in path):
        return None
    at = "$" + "".join(f'."{key}"' for key in path)
    low = -math.inf if bound.low is None else bound.low
    high = math.inf if bound.high is None else bound.high
    # SQLite orders NULL before numbers, numbers before text (an object or array reads as its JSON
    # text): a range of numbers keeps numbers alone; one open above keeps text too; and "not above
    # ``high``" keeps text and numbers up to it. Each reads the value once.
    if not bound.text_passes:
        where, params = "BETWEEN ? AND ?", [low, high]
    elif bound.high is None:
        where, params = ">= ?", [low]
    elif bound.low is None:
        where, params = "NOT BETWEEN ? AND ?", [math.nextafter(high, math.inf), math.inf]
    else:
        return ("CASE WHEN json_valid(value) THEN json_extract(value, ?) BETWEEN ? AND ?"
                " OR typeof(json_extract(value, ?)) = 'text' ELSE 0 END"), [at, low, high, at]
    return f"CASE WHEN json_valid(value) THEN json_extract(value, ?) {where} ELSE 0 END", [at, *params]
