"""Chat commands ``/compact``, ``/new`` and ``/clear`` through the embedding API (SPEC §8).

All three are operator-only. ``/new`` and ``/clear`` clear the conversation window and nothing
else: memory rows, prompt-file revisions, the event log and history recall stay. ``/compact``
summarises the older part of the window now, on the same provider route as auto-compaction
(here a loopback OpenAI-compatible server on 127.0.0.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory.application.compaction import COMPACTOR_SYSTEM_PROMPT
from fermix_memory.application.turns import CommandResult
from fermix_memory.domain import events as ev
from fermix_memory.domain.fence import conversation_summary_block
from fermix_memory.domain.values import ConversationKey, Role
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from tests.integration.loopback_models import LoopbackModelServer, RecordedRequest, Reply
from tests.manual_clock import TestClock

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT, OWNER, CONV = "ada", "alice", "telegram:7"
KEY = ConversationKey("telegram", "7")
OTHER_CONV = "telegram:8"
SUMMARY = "Checkpoint: the user planned a sailing trip and asked about tides."
COMMANDS = ("/compact", "/new", "/clear", "/clear@mybot")
CLEARING = ("/new", "/clear", "/clear@mybot", "/new@mybot now please")



def is_compactor(request: RecordedRequest) -> bool:
    return (request.json or {}).get("messages", [{}])[0].get("content") == COMPACTOR_SYSTEM_PROMPT


@pytest.fixture
def server(openai_server: LoopbackModelServer) -> LoopbackModelServer:
    def answer(request: RecordedRequest) -> Reply:
        return openai_server.ok(SUMMARY if is_compactor(request) else "Nothing to save.")

    openai_server.always(answer)
    return openai_server


@pytest.fixture
def memory(tmp_path: Path, server: LoopbackModelServer) -> Iterator[MemorySystem]:
    config = {"fermix_core": {
        "providers": [{"name": "p", "kind": "openai", "base_url": server.base_url, "model": "m",
                       "context_window": 2_000}],
        "timeouts": {"llm_buffered_s": 0.5},
    }}
    with MemorySystem.open(tmp_path / "home", config=config, clock=TestClock()) as memory:
        yield memory


def say(memory: MemorySystem, text: str, *, role: str = "user", conversation: str = CONV) -> int:
    return memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=conversation, role=role,
                                 content=text, sender=OWNER if role == "user" else AGENT, trust="operator")


def fill(memory: MemorySystem, turns: int = 12, conversation: str = CONV) -> list[tuple[int, str]]:
    """User/assistant pairs with a unique marker word each; returns (id, marker)."""
    out = []
    for i in range(turns):
        marker = f"c{i:03d}mark"
        out.append((say(memory, f"Question {i} {marker}: " + "what are the tides like near the harbour today " * 3,
                        conversation=conversation), marker))
        marker = f"a{i:03d}mark"
        out.append((say(memory, f"Answer {i} {marker}: " + "the tides are moderate and the wind is calm " * 3,
                        role="assistant", conversation=conversation), marker))
    return out


def command(memory: MemorySystem, text: Any, *, trust: str, conversation: str = CONV) -> CommandResult | None:
    return memory.handle_command(text, agent_id=AGENT, owner_id=OWNER, conversation=conversation, trust=trust)


def log(memory: MemorySystem) -> list[tuple[int, str]]:
    return [(r.position, r.event.kind) for r in memory.events()]


def window_ids(memory: MemorySystem, conversation: str = CONV) -> list[int]:
    return [m.id for m in memory.history(AGENT, conversation)]


def with_long_term_state(memory: MemorySystem) -> None:
    """A memory row and its prompt-file revision, as a real conversation would have produced."""
    [outcome] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city",
                                     "value": "Lives in Porto"}, agent_id=AGENT, owner_id=OWNER, trust="operator")
    assert outcome.status == "added"
    assert memory.resources(agent_id=AGENT, owner_id=OWNER), "the write produced a USER.md revision"


# --- /compact ------------------------------------------------------------------------------------------


def test_operator_compact_compacts_now(memory: MemorySystem, server: LoopbackModelServer) -> None:
    ids = fill(memory)
    result = command(memory, "/compact", trust="operator")
    assert result is not None and result.ok and result.command == "/compact"
    [compacted] = [r.event for r in memory.events() if isinstance(r.event, ev.HistoryCompacted)]
    assert result.reply == f"Summarised {compacted.replaced_count} older messages into a checkpoint."
    window = memory.history(AGENT, CONV)
    assert window[0].kind == "checkpoint" and window[0].role is Role.SYSTEM
    assert window[0].content == conversation_summary_block(SUMMARY)
    assert [m.id for m in window[1:]] == [mid for mid, _ in ids][-(len(window) - 1):]
    assert len([r for r in server.requests if is_compactor(r)]) == 1
    # No peak was ever measured: /compact does not wait for one, and the notice is for preflight only.
    for mid, marker in ids:
        hits = memory.recall(marker, agent_id=AGENT, owner_id=OWNER, conversation=CONV, source="history").messages
        assert mid in [h.message.id for h in hits]


def test_compact_with_nothing_to_compact(memory: MemorySystem, server: LoopbackModelServer) -> None:
    result = command(memory, "/compact", trust="operator")
    assert result == CommandResult(command="/compact", ok=True, reply="Nothing to compact yet.")
    assert server.requests == []


def test_compact_failure_leaves_the_window_alone(memory: MemorySystem, server: LoopbackModelServer) -> None:
    fill(memory)
    server.always(lambda request: server.error(500) if is_compactor(request) else server.ok("Nothing to save."))
    before = window_ids(memory)
    result = command(memory, "/compact", trust="operator")
    assert result is not None and result.ok is False and "unchanged" in result.reply
    assert window_ids(memory) == before
    assert [r.event.kind for r in memory.events()
            if r.event.kind.startswith("conversation.")] == ["conversation.compaction_failed"]


# --- /new and /clear -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", CLEARING)
def test_operator_clear_empties_only_the_window(memory: MemorySystem, server: LoopbackModelServer, text: str) -> None:
    ids = fill(memory)
    other = fill(memory, 2, conversation=OTHER_CONV)
    with_long_term_state(memory)
    memories_before = memory.memories()
    resources_before = memory.resources()
    log_before = log(memory)

    result = command(memory, text, trust="operator")
    assert result is not None and result.ok and result.command == text.split("@")[0].split()[0]
    assert "memory" in result.reply.lower()
    assert memory.history(AGENT, CONV) == []
    assert window_ids(memory, OTHER_CONV) == [mid for mid, _ in other], "other conversations keep their window"
    assert memory.memories() == memories_before
    assert memory.resources() == resources_before
    after = log(memory)
    assert after[: len(log_before)] == log_before, "the event log is append-only"
    assert [kind for _, kind in after[len(log_before):]] == ["conversation.window_cleared"]
    assert server.requests == [], "clearing calls no model"
    for mid, marker in ids:
        hits = memory.recall(marker, agent_id=AGENT, owner_id=OWNER, conversation=CONV, source="history").messages
        assert mid in [h.message.id for h in hits], f"{marker} must stay recallable after {text}"
    assert {m.id for m in memory.messages(AGENT, KEY)} == {mid for mid, _ in ids}

    # The conversation goes on in a fresh window.
    new = say(memory, "Starting over: what is the forecast for tomorrow?")
    assert window_ids(memory) == [new]


def test_clear_after_compaction_drops_the_checkpoint_from_the_window(
        memory: MemorySystem, server: LoopbackModelServer) -> None:
    fill(memory)
    assert command(memory, "/compact", trust="operator").ok  # type: ignore[union-attr]
    assert memory.history(AGENT, CONV)[0].kind == "checkpoint"
    assert command(memory, "/clear", trust="operator").ok  # type: ignore[union-attr]
    assert memory.history(AGENT, CONV) == []
    assert memory.conversation_state(agent_id=AGENT, conversation=KEY).checkpoint_message_id is None


def test_clear_survives_a_restart(tmp_path: Path, memory: MemorySystem) -> None:
    fill(memory, 3)
    assert command(memory, "/new", trust="operator").ok  # type: ignore[union-attr]
    memory.close()
    with MemorySystem.open(tmp_path / "home", config={}) as reopened:
        assert reopened.history(AGENT, CONV) == []
        assert len(reopened.messages(AGENT, KEY)) == 6


# --- guests --------------------------------------------------------------------------------------------------


@pytest.mark.sqlite_only("a guest's command is refused before any store is asked")
@pytest.mark.parametrize("text", COMMANDS)
def test_guest_is_refused_and_nothing_changes(memory: MemorySystem, server: LoopbackModelServer, text: str) -> None:
    fill(memory)
    with_long_term_state(memory)
    window_before = window_ids(memory)
    log_before = log(memory)
    memories_before = memory.memories()

    result = command(memory, text, trust="guest")
    assert result is not None and result.ok is False
    assert result.command == text.split("@")[0]
    assert "operator" in result.reply.lower()
    assert log(memory) == log_before, "a refused command writes no event"
    assert window_ids(memory) == window_before
    assert memory.memories() == memories_before
    assert server.requests == []


# --- not commands ---------------------------------------------------------------------------------------------


@pytest.mark.sqlite_only("a command is told from a message before any store is asked")
@pytest.mark.parametrize("text", [
    "hello there", "", "   ", "please /new", "compact", "/newline", "/compacted", "/clearly not",
    "/help", "/start", "//new", "/ new", "new/", "I typed /clear by mistake",
])  # a value that is not text at all is a typed error (tests/integration/test_typed_errors.py)
@pytest.mark.parametrize("trust", ["operator", "guest"])
def test_non_commands_return_none(memory: MemorySystem, text: Any, trust: str) -> None:
    fill(memory, 2)
    log_before = log(memory)
    assert command(memory, text, trust=trust) is None
    assert log(memory) == log_before
    assert len(memory.history(AGENT, CONV)) == 4
