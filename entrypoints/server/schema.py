"""JSON Schemas from the types the Python API already declares (ADR-0073): one definition of each
shape.

A request body's schema comes from the command class the API structures that call into
(``application/commands.py``): each attrs field by its declared type, with what the one converter
checks (``Identifier``: 1 to 256 characters, ``Count``: from 1, the enums' values...). A field whose
check belongs to the message (typed ``Any``) carries its JSON Schema in its attrs metadata
(``json_schema``). A result's schema comes from its attrs class as the codec unstructures it.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NewType

import attrs

from fermix_memory.application import commands as c
from fermix_memory.application.host_input import MAX_REASON_CHARS, MAX_SYSTEM_PROMPT_CHARS
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.values import ConversationKey

Schema = dict[str, Any]
REF = "#/components/schemas/"
_IDENTIFIER: Schema = {"type": "string", "minLength": 1, "maxLength": 256}
_CONVERSATION_TEXT: Schema = {"type": "string", "description": "CHANNEL:CHAT_ID or CHANNEL:CHAT_ID:THREAD_SCOPE"}

# What the converter checks of each declared field type (application/host_input.py's parsers).
_NEWTYPES: Mapping[Any, Schema] = {
    c.Identifier: _IDENTIFIER,
    c.Label: {"type": "string", "maxLength": 256},
    c.Count: {"type": "integer", "minimum": 1},
    c.Tokens: {"type": "integer", "minimum": 0},
    c.Limit: {"type": "integer", "minimum": 0},
    c.RowId: {"type": "integer"},
    c.Reason: {"type": "string", "maxLength": MAX_REASON_CHARS},
    c.SystemPrompt: {"type": "string", "maxLength": MAX_SYSTEM_PROMPT_CHARS},
    c.AnyText: {"type": "string"},
    c.Moment: {"type": "string", "format": "date-time"},
}
_OPERATIONS: Mapping[type, str] = {AddOperation: "add", ReplaceOperation: "replace", ArchiveOperation: "archive"}


class Schemas:
    """Builds schemas, collecting the attrs classes they name under ``components``."""

    def __init__(self) -> None:
        self.components: dict[str, Schema] = {}

    def body(self, cls: type, *, drop: Sequence[str] = (), optional: Sequence[str] = (),
             extra: Mapping[str, Schema] | None = None) -> Schema:
        """The request body of a command class: its fields but ``drop``; ``optional`` ones need
        not be given (the server fills them, as the agent of a host token); ``extra`` fields the
        call takes beside the command's."""
        schema = self._object(cls, drop=drop, optional=optional, inline=True)
        for name, field_schema in (extra or {}).items():
            schema["properties"][name] = field_schema
        return schema

    def of(self, tp: Any, *, field: attrs.Attribute[Any] | None = None, output: bool = True) -> Schema:
        """The schema of a declared type (``output``: as results are written; else as input is read)."""
        if field is not None and "json_schema" in field.metadata:
            return dict(field.metadata["json_schema"])
        if tp is Any or tp is object:
            return {}
        if tp in _NEWTYPES:
            return dict(_NEWTYPES[tp])
        if isinstance(tp, NewType):
            return self.of(tp.__supertype__, output=output)
        if tp is type(None):
            return {"type": "null"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        if tp is str:
            return {"type": "string"}
        if tp is datetime:
            return {"type": "string", "format": "date-time"}
        if tp is ConversationKey and not output:
            return {"anyOf": [_CONVERSATION_TEXT, self._ref(ConversationKey, output=False)]}
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return {"type": "string", "enum": [m.value for m in tp]}
        if tp == tuple[Operation, ...]:
            one = {"oneOf": [self._operation(cls) for cls in _OPERATIONS]}
            return {"anyOf": [one, {"type": "array", "items": one}]}
        if attrs.has(tp):
            return self._ref(tp, output)
        return self._generic(tp, output)

    def _generic(self, tp: Any, output: bool) -> Schema:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            options: list[Schema] = []
            for arg in args:
                option = self.of(arg, output=output)
                options += option["anyOf"] if list(option) == ["anyOf"] else [option]
            return {"anyOf": options}
        if origin is typing.Literal:
            return {"enum": list(args)}
        if origin in (list, tuple, Sequence, set, frozenset):
            item = args[0] if args else Any
            return {"type": "array", "items": self.of(item, output=output)}
        if origin in (dict, Mapping):
            value = args[1] if len(args) == 2 else Any
            return {"type": "object", "additionalProperties": self.of(value, output=output)}
        raise TypeError(f"no JSON Schema for {tp!r}")

    def _ref(self, cls: type, output: bool) -> Schema:
        name = cls.__name__ if output else f"{cls.__name__}Input"
        if name not in self.components:
            self.components[name] = {}  # a class that names itself refers to its own entry
            self.components[name] = self._object(cls, output=output)
        return {"$ref": REF + name}

    def _object(self, cls: type, *, drop: Sequence[str] = (), optional: Sequence[str] = (), inline: bool = False,
                output: bool = False) -> Schema:
        hints = typing.get_type_hints(cls)
        properties: dict[str, Schema] = {}
        required: list[str] = []
        for field in attrs.fields(cls):
            if field.name in drop or field.name.startswith("_"):
                continue
            properties[field.name] = self.of(hints.get(field.name, Any), field=field, output=output and not inline)
            if (output and not inline) or (field.default is attrs.NOTHING and field.name not in optional):
                required.append(field.name)
        schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        if cls.__doc__ and not inline:
            schema["description"] = " ".join(cls.__doc__.split())
        return schema

    def _operation(self, cls: type) -> Schema:
        name = f"{cls.__name__}Input"
        if name not in self.components:
            schema = self._object(cls)
            schema["properties"] = {"op": {"const": _OPERATIONS[cls]}, **schema["properties"]}
            schema["required"] = ["op", *schema.get("required", [])]
            self.components[name] = schema
        return {"$ref": REF + name}
