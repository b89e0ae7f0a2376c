"""Every turn hook takes ``context_window=`` on every way in (the session, the asyncio session and
the flat methods): a value given to the call is the one used, a bad one a typed error naming it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import AsyncMemorySystem, DomainError, MemorySystem

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER, CONV = "ada", "alice", "telegram:42"
TURN = {"agent_id": AGENT, "owner_id": OWNER, "conversation": CONV}

# hook name -> how a session calls it with a context window
SESSION_HOOKS: dict[str, Callable[[Any, int], Any]] = {
    "before_turn": lambda s, n: s.before_turn(context_window=n),
    "after_turn": lambda s, n: s.after_turn(1200, context_window=n),
    "handle_command": lambda s, n: s.handle_command("/compact", context_window=n),
    "compact": lambda s, n: s.compact(context_window=n),
}
FLAT_HOOKS: dict[str, Callable[[MemorySystem, int], Any]] = {
    "before_turn": lambda m, n: m.before_turn(**TURN, context_window=n),
    "after_turn": lambda m, n: m.after_turn(**TURN, peak_prompt_tokens=1200, context_window=n),
    "handle_command": lambda m, n: m.handle_command("/compact", **TURN, trust="operator", context_window=n),
    "compact": lambda m, n: m.compact(agent_id=AGENT, conversation=CONV, context_window=n),
}


def chat(memory: MemorySystem) -> None:
    for n in range(6):
        memory.append_message(**TURN, role="user", sender=OWNER, content=f"message {n} " + "word " * 200)


@pytest.mark.parametrize("hook", sorted(SESSION_HOOKS))
def test_each_session_hook_takes_a_context_window(tmp_path: Path, hook: str) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        chat(memory)
        s = memory.session(**TURN, trust="operator", context_window=1_000_000)
        with pytest.raises(DomainError, match="context_window"):
            SESSION_HOOKS[hook](s, 0)
        SESSION_HOOKS[hook](s, 100)
        memory.wait_for_background()


@pytest.mark.parametrize("hook", sorted(FLAT_HOOKS))
def test_each_flat_hook_takes_a_context_window(tmp_path: Path, hook: str) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        chat(memory)
        with pytest.raises(DomainError, match="context_window"):
            FLAT_HOOKS[hook](memory, 0)
        FLAT_HOOKS[hook](memory, 100)
        memory.wait_for_background()


@pytest.mark.parametrize("hook", sorted(SESSION_HOOKS))
def test_each_asyncio_session_hook_takes_a_context_window(tmp_path: Path, hook: str) -> None:
    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home") as memory:
            chat(memory.sync)
            s = memory.session(**TURN, trust="operator", context_window=1_000_000)
            with pytest.raises(DomainError, match="context_window"):
                await SESSION_HOOKS[hook](s, 0)
            await SESSION_HOOKS[hook](s, 100)
            await memory.wait_for_background()

    asyncio.run(main())


def test_the_calls_window_not_the_sessions_is_the_one_compaction_uses(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        chat(memory)
        for n in range(6):
            memory.append_message(**{**TURN, "conversation": "telegram:43"}, role="user", sender=OWNER,
                                  content=f"message {n} " + "word " * 200)
        wide = memory.session(**TURN, trust="operator", context_window=1_000_000)
        other = memory.session(**{**TURN, "conversation": "telegram:43"}, trust="operator", context_window=1_000_000)
        kept_whole = wide.compact()
        kept_small = other.compact(context_window=600)  # a budget of 300 tokens
        assert kept_small.tokens_before == kept_whole.tokens_before
        assert kept_small.tokens_after < 400 < kept_whole.tokens_after
