"""The literal types a host's type checker sees name exactly the values the run-time accepts."""

from __future__ import annotations

import enum
import inspect
import typing
from typing import Any, Literal

import pytest

import fermix_memory
from fermix_memory import (
    MemorySystem,
    ModeName,
    RoleName,
    ScopeName,
    Session,
    SourceName,
    StyleName,
    TrustName,
    WriterName,
)
from fermix_memory.application.commands import Style
from fermix_memory.domain.scopes import RecallMode, RecallScope, RecallSource, WriterKind
from fermix_memory.domain.values import Role, Trust

NAMES: dict[Any, type[enum.StrEnum]] = {TrustName: Trust, RoleName: Role, ScopeName: RecallScope,
                                        SourceName: RecallSource, WriterName: WriterKind, StyleName: Style,
                                        ModeName: RecallMode}


def literal_values(alias: Any) -> list[str]:
    [literal] = [arg for arg in typing.get_args(alias) if typing.get_origin(arg) is Literal]
    return list(typing.get_args(literal))


@pytest.mark.parametrize("alias", list(NAMES), ids=[cls.__name__ for cls in NAMES.values()])
def test_each_literal_type_lists_its_enum_values_and_takes_the_enum(alias: Any) -> None:
    cls = NAMES[alias]
    assert literal_values(alias) == [member.value for member in cls]
    assert cls in typing.get_args(alias)


# Which type each argument of that name has, on every public method of the facade and the session.
ARGUMENT_TYPES = {"trust": "TrustName", "role": "RoleName", "scope": "ScopeName", "source": "SourceName",
                  "writer": "WriterName", "style": "StyleName", "mode": "ModeName | None"}


@pytest.mark.parametrize("cls", [MemorySystem, Session])
def test_every_enum_argument_of_a_public_method_is_typed_by_its_literal(cls: type) -> None:
    seen = []
    for name, member in inspect.getmembers(cls, callable):
        if name.startswith("_"):
            continue
        for parameter in inspect.signature(member).parameters.values():
            if parameter.name in ARGUMENT_TYPES:
                seen.append((name, parameter.name, str(parameter.annotation)))
    assert seen
    wrong = [(n, p, a) for n, p, a in seen
             if a != ARGUMENT_TYPES[p] and not (n == "record_transcript" and p == "role")]
    assert wrong == []


def test_the_result_and_prompt_types_are_exported_at_the_top_level() -> None:
    for name in ("ReviewResult", "CompactionResult", "MemoryHit", "MessageHit", "Prompt", "OpenAIPrompt",
                 "AnthropicPrompt", "RecallResult", "MemoryClosed",
                 *(t.removesuffix(" | None") for t in ARGUMENT_TYPES.values())):
        assert name in fermix_memory.__all__ and hasattr(fermix_memory, name)
