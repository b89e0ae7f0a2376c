"""``compose_prompt``'s own paths give what the general ones give: its arguments are checked as
the converter checks a ``ComposePrompt`` (the same command, the same error), and a window kept
as plain rows that a tool call then joins is composed as a window read afresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.commands import ComposePrompt, Style
from fermix_memory.application.host_input import structure

AGENT, OWNER = "ada", "alice"
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}

ARGUMENTS: list[dict[str, Any]] = [
    {}, {"system": "You are Ada."}, {"style": "anthropic"}, {"style": Style.ANTHROPIC}, {"style": Style.OPENAI},
    {"style": "bogus"}, {"style": None}, {"system": 1}, {"system": "a\x00b"}, {"system": "x" * 1_000_001},
    {"conversation": "bad"}, {"conversation": ("tg", "1")}, {"conversation": {"channel": "tg"}},
    {"conversation": 7}, {"agent_id": ""}, {"agent_id": 3}, {"owner_id": "a\nb"}, {"owner_id": None},
    {"agent_id": "", "conversation": "bad"},
]


def outcome(action: Any) -> object:
    try:
        return action()
    except Exception as exc:  # the outcome compared is the error itself
        return type(exc), str(exc)


@pytest.mark.parametrize("given", ARGUMENTS)
def test_the_arguments_are_checked_as_the_converter_checks_a_compose_command(tmp_path: Path,
                                                                              given: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"agent_id": AGENT, "owner_id": OWNER, "conversation": "tg:1", "system": "",
                                 "style": "openai", **given}
    expected = outcome(lambda: structure(arguments, ComposePrompt))
    with MemorySystem.open(tmp_path / "home") as memory:
        got = outcome(lambda: memory.compose_prompt(arguments.pop("agent_id"), arguments.pop("owner_id"),
                                                    arguments.pop("conversation"), **arguments))
    if isinstance(expected, ComposePrompt):
        assert not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], type)), got
    else:
        assert got == expected


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_a_window_kept_as_plain_rows_takes_a_tool_call_as_a_fresh_read_would(tmp_path: Path, style: str) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        for i in range(4):
            memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="tg:1", role="user",
                                  content=f"question {i}", sender=OWNER)
            memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="tg:1", role="assistant",
                                  content=f"answer {i} ", sender=AGENT)
        memory.wait_for_background()
    with MemorySystem.open(tmp_path / "home") as memory:
        kept = memory.compose_prompt(AGENT, OWNER, "tg:1", style=style)  # type: ignore[call-overload]
        assert kept == memory.compose_prompt(AGENT, OWNER, "tg:1", style=style)  # type: ignore[call-overload]
        memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="tg:1", role="assistant", content="",
                              sender=AGENT, metadata={"tool_calls": [CALL]})
        memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="tg:1", role="tool",
                              content="sunny", sender=AGENT, metadata={"tool_call_id": "call_1"})
        memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="tg:1", role="user",
                              content="thanks  ", sender=OWNER)
        later = memory.compose_prompt(AGENT, OWNER, "tg:1", style=style)  # type: ignore[call-overload]
        memory.wait_for_background()
    with MemorySystem.open(tmp_path / "home") as memory:
        assert later == memory.compose_prompt(AGENT, OWNER, "tg:1", style=style)  # type: ignore[call-overload]
    assert later != kept
