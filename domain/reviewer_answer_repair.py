"""The tolerant parser of the memory reviewer's answer: the strict parser
(:mod:`fermix_memory.domain.reviewer_answer`) plus a few conservative repairs of what weak
local models write. Every operation it returns went through the strict parser's structural
checks, and what it repaired is reported.
"""

from __future__ import annotations

import ast
import re

from fermix_memory.domain.errors import ReviewerAnswerError
from fermix_memory.domain.operations import Operation
from fermix_memory.domain.reviewer_answer import (
    answer_too_long,
    decode_json,
    operations_from_document,
    parse_reviewer_answer,
)


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
        if not isinstance(text, str) or answer_too_long(text):
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
            document = decode_json(fixed)
        except (ValueError, RecursionError):
            continue
        return operations_from_document(document), tuple(repairs + ([repair] if repair else []))
    document = _python_literal(candidate)
    if document is None:
        raise error
    return operations_from_document(document), tuple([*repairs, "Python-style literal read as JSON"])


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
