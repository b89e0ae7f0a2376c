"""The request rules of OpenAI's Chat Completions and Anthropic's Messages API, as checks.

``check_openai(messages)`` and ``check_anthropic((system, messages))`` raise AssertionError
naming the first rule a composed prompt breaks: roles, order and alternation, tool calls paired
with their results by id, no empty content, the shape of every field. Every prompt composed
in the test suite goes through both (``tests/conftest.py``). A prompt with no turn yet (only
the system message) is accepted: the host's user turn completes it.
"""

from __future__ import annotations

import json
import re
from typing import Any

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]+")


def _text(value: Any, where: str) -> None:
    assert isinstance(value, str), f"{where}: content must be text, got {type(value).__name__}"
    assert value.strip(), f"{where}: content must not be empty"


def _keys(message: dict[str, Any], allowed: set[str], where: str) -> None:
    assert isinstance(message, dict), f"{where}: must be an object"
    extra = set(message) - allowed
    assert not extra, f"{where}: unexpected fields {sorted(extra)}"


def check_openai(messages: Any) -> None:
    assert isinstance(messages, list), "messages must be a list"
    json.dumps(messages, allow_nan=False)
    pending: list[str] = []  # ids of the calls of the last assistant message still unanswered
    seen: set[str] = set()
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        assert isinstance(m, dict) and "role" in m, f"{where}: needs a role"
        role = m["role"]
        if role != "tool":
            assert not pending, f"{where}: tool calls {pending} were not answered right after their message"
        if role == "system":
            _keys(m, {"role", "content"}, where)
            assert i == 0, f"{where}: the system message comes first"
            _text(m["content"], where)
        elif role == "user":
            _keys(m, {"role", "content", "name"}, where)
            _text(m["content"], where)
            if "name" in m:
                assert isinstance(m["name"], str) and NAME.fullmatch(m["name"]), f"{where}: bad name {m['name']!r}"
        elif role == "assistant":
            _keys(m, {"role", "content", "tool_calls"}, where)
            calls = m.get("tool_calls")
            assert "content" in m, f"{where}: needs content (null with tool_calls)"
            if m["content"] is None or calls:
                assert m["content"] is None or isinstance(m["content"], str), f"{where}: content must be text"
                assert isinstance(calls, list) and calls, f"{where}: no content and no tool_calls"
            else:
                _text(m["content"], where)
            for j, call in enumerate(calls or []):
                at = f"{where}.tool_calls[{j}]"
                _keys(call, {"id", "type", "function"}, at)
                assert isinstance(call.get("id"), str) and call["id"], f"{at}: needs an id"
                assert call["id"] not in seen, f"{at}: id {call['id']!r} used twice"
                seen.add(call["id"])
                assert call.get("type") == "function", f"{at}: type must be 'function'"
                function = call.get("function")
                _keys(function, {"name", "arguments"}, f"{at}.function")
                assert isinstance(function.get("name"), str) and NAME.fullmatch(function["name"]), f"{at}: bad name"
                assert isinstance(function.get("arguments"), str), f"{at}: arguments must be JSON text"
                pending.append(call["id"])
        elif role == "tool":
            _keys(m, {"role", "tool_call_id", "content"}, where)
            call_id = m.get("tool_call_id")
            assert isinstance(call_id, str) and call_id, f"{where}: a tool message needs its tool_call_id"
            assert call_id in pending, f"{where}: tool_call_id {call_id!r} answers no call of the message before"
            pending.remove(call_id)
            _text(m["content"], where)
        else:
            raise AssertionError(f"{where}: unknown role {role!r}")
    assert not pending, f"tool calls {pending} were never answered"


def check_anthropic(prompt: Any) -> None:
    assert isinstance(prompt, tuple) and len(prompt) == 2, "the Anthropic shape is (system, messages)"
    system, messages = prompt
    assert isinstance(system, str), "system must be text"
    assert isinstance(messages, list), "messages must be a list"
    json.dumps(messages, allow_nan=False)
    seen: set[str] = set()
    open_calls: set[str] = set()  # tool_use ids of the assistant message before
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        _keys(m, {"role", "content"}, where)
        role = m.get("role")
        assert role in ("user", "assistant"), f"{where}: role must be user or assistant, got {role!r}"
        assert i > 0 or role == "user", f"{where}: the first message must be a user message"
        assert i == 0 or messages[i - 1]["role"] != role, f"{where}: roles must alternate"
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        assert isinstance(blocks, list) and blocks, f"{where}: content must be text or a non-empty list of blocks"
        answered: set[str] = set()
        calls: set[str] = set()
        others_seen = False
        for j, block in enumerate(blocks):
            at = f"{where}.content[{j}]"
            assert isinstance(block, dict), f"{at}: a block must be an object"
            kind = block.get("type")
            if kind == "text":
                _keys(block, {"type", "text"}, at)
                _text(block.get("text"), at)
                others_seen = True
            elif kind == "tool_use":
                _keys(block, {"type", "id", "name", "input"}, at)
                assert role == "assistant", f"{at}: tool_use belongs to an assistant message"
                assert isinstance(block.get("id"), str) and ANTHROPIC_ID.fullmatch(block["id"]), f"{at}: bad id"
                assert block["id"] not in seen, f"{at}: id {block['id']!r} used twice"
                seen.add(block["id"])
                assert isinstance(block.get("name"), str) and NAME.fullmatch(block["name"]), f"{at}: bad name"
                assert isinstance(block.get("input"), dict), f"{at}: input must be an object"
                calls.add(block["id"])
            elif kind == "tool_result":
                _keys(block, {"type", "tool_use_id", "content"}, at)
                assert role == "user", f"{at}: tool_result belongs to a user message"
                assert not others_seen, f"{at}: tool_result blocks come before any other block"
                use_id = block.get("tool_use_id")
                assert use_id in open_calls, f"{at}: tool_use_id {use_id!r} answers no call of the message before"
                assert use_id not in answered, f"{at}: {use_id!r} answered twice"
                answered.add(use_id)
                _text(block.get("content"), at)
            else:
                raise AssertionError(f"{at}: unknown block type {kind!r}")
        assert answered == open_calls, f"{where}: tool_use ids {sorted(open_calls - answered)} were not answered"
        open_calls = calls
        if i == len(messages) - 1 and role == "assistant":
            last = blocks[-1]
            assert last["type"] != "text" or last["text"] == last["text"].rstrip(), \
                f"{where}: a final assistant text must not end in whitespace"
    assert not open_calls, "the last message's tool calls have no results"


def check_request(prompt: Any) -> None:
    """Check ``prompt`` against the rules of the API whose shape it has."""
    if isinstance(prompt, tuple):
        check_anthropic(prompt)
    else:
        check_openai(prompt)
