"""The embedding API: the synchronous :class:`MemorySystem` and its sessions, the base every
other way in (the CLI, MCP, the framework integrations) calls."""
