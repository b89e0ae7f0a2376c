"""The one place that turns host input into typed commands (ADR-0017).

Hosts (the embedding API, the session API, the CLI) hand over loose values: text, numbers,
mappings, enum names. :func:`structure` turns a mapping of them into a command of
:mod:`fermix_memory.application.commands` with ONE cattrs converter, whose hook checks each
field by its declared type with the domain's own checks (``check_identifier``, ``check_int``,
``check_text``, the conversation-key parser, the operation parser the reviewer uses). Bad input
raises the same typed errors everywhere, and the error names the field the host got wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import attrs
import cattrs

from fermix_memory.application import commands as c
from fermix_memory.application.as_of import check_moment
from fermix_memory.application.errors import NotFound
from fermix_memory.application.message_input import conversation_key, parse_enum
from fermix_memory.domain.errors import InvalidArgument, InvalidOperation
from fermix_memory.domain.expiry import NEVER, expiry_time
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.scopes import RecallMode, RecallScope, RecallSource, WriterKind
from fermix_memory.domain.values import (
    INT64_MAX,
    INT64_MIN,
    ConversationKey,
    Trust,
    check_identifier,
    check_int,
    check_text,
    preview,
)

MAX_REASON_CHARS = 2000
MAX_SYSTEM_PROMPT_CHARS = 200_000
T = TypeVar("T")
Parser = Callable[[object, str], Any]
# A question's moment may be any time: the log is not asked what it held then (ADR-0075).
_NEVER = datetime.max.replace(tzinfo=UTC)


def _optional(parse: Parser) -> Parser:
    return lambda value, what: None if value is None else parse(value, what)


def _enum(enum_cls: Any) -> Parser:
    return lambda value, what: parse_enum(enum_cls, value, what)


def any_text(value: object, what: str) -> str:
    """Text whatever it says (any text is a safe query, R-FTS); anything else is a host's bug."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text, got {type(value).__name__}")
    return value


def row_id(value: object, what: str) -> int:
    """An id to look up: a whole number (else ``InvalidNumber``); one outside SQLite's 64-bit
    range names nothing (:class:`NotFound`)."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        raise NotFound(f"no {what} with that id (it is beyond the 64-bit range)")
    return check_int(value, f"the {what} id")


def operations(value: object, what: str = "operations") -> tuple[Operation, ...]:
    """One operation, its ``{"op": ...}`` mapping, or a list of them (SPEC §12 shape)."""
    if type(value) is not list and type(value) is not tuple:  # else a list of them, as a host mostly gives
        if isinstance(value, AddOperation | ReplaceOperation | ArchiveOperation | Mapping):
            value = [value]
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise InvalidOperation(f"{what} must be an operation, a mapping or a list of them")
    parsed = []
    for index, item in enumerate(value):
        if isinstance(item, AddOperation | ReplaceOperation | ArchiveOperation):
            parsed.append(_with_expiry(item, f"{what}[{index}]"))
            continue
        if not isinstance(item, Mapping):
            raise InvalidOperation(f"{what}[{index}]: an operation must be a mapping")
        parsed.append(_with_expiry(_operation(item, f"{what}[{index}]"), f"{what}[{index}]"))
    return tuple(parsed)


def _with_expiry(op: Operation, where: str) -> Operation:
    """``op`` with its ``expires_at`` read (ADR-0082): a host's time that is no ISO 8601 time with
    a zone is its bug, :class:`InvalidArgument` (whether it is past is told at the write, by the
    clock: ``MemoryWriter.write``)."""
    if isinstance(op, ArchiveOperation) or op.expires_at is None:
        return op
    moment = expiry_time(op.expires_at, f"{where}.expires_at")
    return attrs.evolve(op, expires_at=NEVER if moment is None else moment)


_OPERATIONS: dict[str, type[Operation]] = {"add": AddOperation, "replace": ReplaceOperation,
                                           "archive": ArchiveOperation}


def _operation(data: Mapping[str, Any], where: str) -> Operation:
    """The operation's shape only: its values are admission's to judge, so that a bad value is
    refused and the refusal recorded (ADR-0003), not raised."""
    op = data.get("op")
    if op not in _OPERATIONS:
        raise InvalidOperation(f"{where}: op must be add, replace or archive, got {preview(op, 20)}")
    try:
        return _OPERATIONS[op](**{k: v for k, v in data.items() if k != "op"})
    except TypeError as exc:
        raise InvalidOperation(f"{where}: bad {op} operation: {exc}") from None


def moment(value: object, what: str) -> datetime:
    """A timezone-aware datetime, or ISO 8601 text with an offset, as a datetime."""
    return check_moment(value, _NEVER, what)


def check_flag(value: object, what: str) -> bool:
    """``value`` if it is ``True`` or ``False`` (a 1, a "yes" or ``None`` is a host's bug)."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{what} must be True or False")
    return value


_PARSERS: dict[Any, Parser] = {
    bool: check_flag,
    c.Identifier: check_identifier,
    c.Label: functools.partial(check_identifier, allow_empty=True),
    c.Count: functools.partial(check_int, minimum=1),
    c.Tokens: functools.partial(check_int, minimum=0),
    c.Limit: functools.partial(check_int, minimum=0),
    c.AnyText: any_text,
    c.Moment: moment,
    c.RowId: check_int,
    c.Reason: functools.partial(check_text, max_chars=MAX_REASON_CHARS),
    c.SystemPrompt: functools.partial(check_text, max_chars=MAX_SYSTEM_PROMPT_CHARS),
    Any: lambda value, what: value,
    ConversationKey: lambda value, what: conversation_key(value),
    Trust: _enum(Trust),
    WriterKind: _enum(WriterKind),
    RecallScope: _enum(RecallScope),
    RecallSource: _enum(RecallSource),
    RecallMode: _enum(RecallMode),
    c.Style: _enum(c.Style),
    tuple[Operation, ...]: operations,
}
_PARSERS.update({kind | None: _optional(parse) for kind, parse in list(_PARSERS.items())
                 if kind is not Any})


# The kinds of host value whose parse is kept for the next call with the very same object: they
# cannot change in between (a ``ConversationKey`` is frozen and holds text only).
_IMMUTABLE = frozenset({str, int, ConversationKey})
_REQUIRED, _ABSENT = object(), object()  # markers: a field without a default; a field not given


def command_hook(cls: type[T]) -> Callable[[Any, Any], T]:
    """The structure hook of one command class: every field parsed by its type, in order.

    Built once per class; it runs on every host call (``append_message`` included), so the plan
    is precomputed and an ``Any`` field (checked later, with the message) is passed through."""
    fields = attrs.fields(attrs.resolve_types(cls))  # type: ignore[arg-type, type-var]
    # A required field's default is a marker no host value is, so ``value is default`` says
    # "the declared default" for the others only.
    plan = [(f.name, _REQUIRED if f.default is attrs.NOTHING else f.default,
             None if f.type is Any else _PARSERS[f.type]) for f in fields]
    names = frozenset(f.name for f in fields)
    # Each field's last value of an immutable kind and what it parsed to: a host writing one
    # scope after another hands over the same agent, owner and conversation each time, and a
    # parser gives the same answer for the same immutable value (a refusal is never kept).
    kept: dict[str, tuple[object, Any]] = {}

    def structure(data: Any, _: Any) -> T:
        if type(data) is not dict and not isinstance(data, Mapping):
            raise InvalidArgument(f"{cls.__name__} input must be a mapping")
        if not names.issuperset(data.keys()):
            unknown = sorted(str(k) for k in data if k not in names)
            raise InvalidArgument(f"unknown argument {unknown[0][:40]!r}")
        values = {}
        for name, default, parse in plan:
            if (value := data.get(name, _ABSENT)) is not _ABSENT:
                # A default value passes unchecked (``None`` for "not given", or the declared default).
                if parse is None or value is default:
                    values[name] = value
                elif (last := kept.get(name)) is not None and last[0] is value:
                    values[name] = last[1]
                else:
                    values[name] = parsed = parse(value, name)
                    if type(value) in _IMMUTABLE:
                        kept[name] = (value, parsed)
            elif default is _REQUIRED:
                raise InvalidArgument(f"{name} is required")
        return cls(**values)

    return structure


converter = cattrs.Converter()
converter.register_structure_hook_factory(
    lambda cls: attrs.has(cls) and cls.__module__ == c.__name__, command_hook)


def structure(data: Mapping[str, Any], cls: type[T]) -> T:
    """``data`` as a ``cls`` command, or a typed :class:`DomainError` naming the bad field."""
    return converter.structure(data, cls)
