"""LangGraph and LangChain (the ``[langgraph]`` extra): :class:`FermixStore`, a LangGraph
``BaseStore`` over fermix memory rows, and :func:`memory_tools`, the memory tools as LangChain
tools (ADR-0028). Importing this module without the extra raises ``MissingExtra`` naming it."""

from __future__ import annotations

from fermix_memory.entrypoints.integrations.langchain_tools import memory_tools
from fermix_memory.entrypoints.integrations.langgraph_items import (
    FilterNotSupported,
    KeyCollision,
    NamespaceNotMapped,
    StoreError,
    ValueNotStorable,
    WriteRefused,
)
from fermix_memory.entrypoints.integrations.langgraph_store import FermixStore

__all__ = [
    "FermixStore",
    "FilterNotSupported",
    "KeyCollision",
    "NamespaceNotMapped",
    "StoreError",
    "ValueNotStorable",
    "WriteRefused",
    "memory_tools",
]
