"""The memory tools as LangChain tools (ADR-0028): ``memory_tools(session)`` gives
``memory_store``, ``memory_recall`` and ``memory_sources_list`` as ``StructuredTool``s built from
the one set of definitions (application/tool_definitions.py), their JSON schemas as
``args_schema``. Each call goes through :meth:`Session.dispatch_tool` with the session's agent,
owner, conversation and trust; a bad call is the tool's ``{"ok": false, ...}`` result, never an
exception into the graph.
"""

from __future__ import annotations

from typing import Any

from fermix_memory.application.tool_definitions import tool_definitions
from fermix_memory.domain.errors import FermixError
from fermix_memory.entrypoints.api.session import Session
from fermix_memory.entrypoints.extras import require

require("langgraph", "langchain_core.tools")

from langchain_core.tools import StructuredTool  # noqa: E402


def memory_tools(session: Session) -> list[MemoryTool]:
    """The memory tools for a model talking in ``session`` (who speaks is the session's, never
    the model's arguments)."""
    if not isinstance(session, Session):
        raise TypeError(f"memory_tools needs a Session (memory.session(...)), got {type(session).__name__}")
    return [_tool(session, definition) for definition in tool_definitions()]


class MemoryTool(StructuredTool):
    """A memory tool: the model's whole input goes to ``dispatch_tool`` as one value, so our
    checks see every argument (LangChain would otherwise take arguments named ``config`` or
    ``run_manager`` for itself, and refuse text input with an exception)."""

    def _to_args_and_kwargs(self, tool_input: str | dict[str, Any],
                            tool_call_id: str | None) -> tuple[tuple[str, ...], dict[str, Any]]:
        return (), {"arguments": tool_input}


def _tool(session: Session, definition: dict[str, Any]) -> MemoryTool:
    name: str = definition["name"]

    def call(arguments: Any) -> dict[str, Any]:
        try:
            return session.dispatch_tool(name, arguments)
        except FermixError as exc:  # a closed or read-only memory: still the tool's result
            return {"ok": False, "error": str(exc), "code": type(exc).__name__}

    return MemoryTool(func=call, name=name, description=definition["description"],
                      args_schema=definition["parameters"])
