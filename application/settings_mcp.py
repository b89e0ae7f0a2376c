"""The settings of ``fermix mcp`` (ADR-0025): ``[fermix_core.mcp]``, who speaks over stdio, and
``[[fermix_core.mcp_tokens]]``, the HTTP server's bearer tokens and who each speaks as."""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from fermix_memory.application.errors import ConfigError
from fermix_memory.application.settings_checks import STR, Rule, about, choice, is_env_var_name
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.log_chain import is_hex_digest
from fermix_memory.domain.values import ConversationKey, check_identifier


def _is_identifier(value: str) -> bool:
    try:
        check_identifier(value, "id")
    except DomainError:
        return False
    return True


def _is_conversation(value: str) -> bool:
    try:
        ConversationKey.parse(value)
    except DomainError:
        return False
    return True


_IDENTIFIER = Rule(STR, _is_identifier, "a non-empty id without control characters, at most 256 characters")
_CONVERSATION = Rule(STR, _is_conversation, "a conversation key CHANNEL:CHAT_ID[:THREAD]")
_TRUST = choice("guest", "operator")
_SHA256_HEX = Rule(STR, lambda v: v == "" or is_hex_digest(v),
                   "64 lowercase hexadecimal digits (the SHA-256 of the token), or empty")


@attrs.frozen(kw_only=True)
class McpSettings:
    """``[fermix_core.mcp]``: who speaks through ``fermix mcp`` over stdio (its flags win; ADR-0025)."""

    agent_id: str = attrs.field(default="assistant", metadata=about(
        _IDENTIFIER, "The agent the MCP client talks to (--agent)."))
    owner_id: str = attrs.field(default="me", metadata=about(
        _IDENTIFIER, "The owner whose memory the MCP client reads and writes (--owner)."))
    conversation: str = attrs.field(default="mcp:stdio", metadata=about(
        _CONVERSATION, "The conversation every chat of the client shares, CHANNEL:CHAT_ID (--conversation):"
        " a fact stored in one chat is recalled in the next."))
    trust: str = attrs.field(default="guest", metadata=about(
        _TRUST, 'What the client\'s writes may change: "guest" or "operator" (--trust).'))


# How every token entry names its secret: its hash, or the variable holding it.
_SHA256_ABOUT = about(_SHA256_HEX, "The SHA-256 of the token in hex (never the token itself), or use token_env.",
                      "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
_TOKEN_ENV_ABOUT = about(Rule(STR, is_env_var_name, "the NAME of the environment variable that holds the token"),
                         "Instead of sha256: the NAME of the environment variable holding the token.")


@attrs.frozen(kw_only=True)
class McpTokenSettings:
    """One ``[[fermix_core.mcp_tokens]]`` entry: a bearer token of ``fermix mcp --http`` and who it speaks as."""

    name: str = attrs.field(metadata=about(_IDENTIFIER, "Unique; names the client in logs.", "laptop"))
    sha256: str = attrs.field(default="", metadata=_SHA256_ABOUT)
    token_env: str | None = attrs.field(default=None, metadata=_TOKEN_ENV_ABOUT)
    agent_id: str = attrs.field(metadata=about(_IDENTIFIER, "The agent this token speaks to.", "assistant"))
    owner_id: str = attrs.field(metadata=about(_IDENTIFIER, "The owner this token speaks as.", "me"))
    trust: str = attrs.field(default="guest", metadata=about(_TRUST, '"guest" or "operator".'))
    conversation: str = attrs.field(default="", metadata=about(
        Rule(STR, lambda v: v == "" or _is_conversation(v), "a conversation key CHANNEL:CHAT_ID[:THREAD] or empty"),
        'The conversation the token\'s chats share; empty: "mcp:<name>".'))


SERVER_ROLES = ("host", "operator", "reader")
T = TypeVar("T")


@attrs.frozen(kw_only=True)
class ServerTokenSettings:
    """One ``[[fermix_core.server_tokens]]`` entry: a bearer token of ``fermix serve`` and its role (ADR-0073)."""

    name: str = attrs.field(metadata=about(_IDENTIFIER, "Unique; recorded as who asked, and in logs.", "telegram-bot"))
    sha256: str = attrs.field(default="", metadata=_SHA256_ABOUT)
    token_env: str | None = attrs.field(default=None, metadata=_TOKEN_ENV_ABOUT)
    role: str = attrs.field(metadata=about(
        choice(*SERVER_ROLES), '"host" (one agent\'s turns, any owner), "operator" (everything) or'
        ' "reader" (reads only).', "host"))
    agent_id: str = attrs.field(default="", metadata=about(
        Rule(STR, lambda v: v == "" or _is_identifier(v), "an agent id, or empty"),
        "The one agent a host token speaks for (required for a host, empty for the others).", "assistant"))


def tokens(entries: list[tuple[str, dict[str, Any]]], source: str, cls: type[T]) -> tuple[T, ...]:
    """The checked ``[[...tokens]]`` entries (prefix, values) as ``cls``: each names exactly one of
    sha256 and token_env."""
    found: list[T] = []
    for prefix, values in entries:
        if bool(values.get("sha256")) == bool(values.get("token_env")):
            raise ConfigError(f"{source}: {prefix} needs exactly one of sha256 and token_env")
        found.append(cls(**values))
    return tuple(found)


def server_tokens(entries: list[tuple[str, dict[str, Any]]], key: str, source: str) -> tuple[ServerTokenSettings, ...]:
    """``[[fermix_core.server_tokens]]``: a host token names its agent, no other token does."""
    found = tokens(entries, source, ServerTokenSettings)
    for index, token in enumerate(found):
        if (token.role == "host") != bool(token.agent_id):
            raise ConfigError(f"{source}: {key}[{index}].agent_id is required for a host token and only for one")
    return found
