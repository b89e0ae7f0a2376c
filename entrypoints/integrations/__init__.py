"""Adapters to agent frameworks (the OpenAI Agents SDK, LangGraph, LangChain), each an optional extra."""
