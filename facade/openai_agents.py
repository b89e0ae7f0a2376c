"""fermix memory for the OpenAI Agents SDK (extra ``[openai-agents]``): a session that keeps an
agent's conversation in fermix, and the memory tools as function tools (ADR-0027).

::

    from fermix_memory.openai_agents import FermixAgentsSession, memory_instructions, memory_tools
"""

from __future__ import annotations

from fermix_memory.entrypoints.integrations.openai_agents import (
    FermixAgentsSession,
    memory_instructions,
    memory_tools,
)

__all__ = ["FermixAgentsSession", "memory_instructions", "memory_tools"]
