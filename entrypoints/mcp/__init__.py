"""The MCP server: the memory tools, prompt files and memory block over MCP (``fermix mcp``)."""
