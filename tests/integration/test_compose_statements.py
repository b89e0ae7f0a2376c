"""How many statements a prompt costs on SQLite (ADR-0062): a cold one (its window not cached)
reads the window with the log's position in one statement, and the owner's prompt files (when not
cached either) in one more; a warm one runs the window's statement too, which then gives one row,
the log's position, its freshness check. Counted with an exec trace (and rows with a row trace) on
the reader of the thread that composes. A count is not a time: a regression that adds a read fails
here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from tests.integration.held_store import memory_on_held_store

AGENT = "ada"


def say(memory: MemorySystem, conversation: str, role: str, content: str, *, owner: str = "alice") -> None:
    memory.append_message(agent_id=AGENT, owner_id=owner, conversation=conversation, role=role, content=content,
                          sender=owner if role == "user" else AGENT)


class Traced(list[str]):
    """The statements a connection ran, and how many rows they gave."""

    rows = 0


@contextmanager
def traced(connection: apsw.Connection) -> Iterator[Traced]:
    """The statements ``connection`` runs inside the block."""
    statements = Traced()

    def trace(_cursor: apsw.Cursor, sql: str, _bindings: Any) -> bool:
        statements.append(sql)
        return True

    def row(_cursor: apsw.Cursor, values: tuple[Any, ...]) -> tuple[Any, ...]:
        statements.rows += 1
        return values

    connection.exec_trace, connection.row_trace = trace, row
    try:
        yield statements
    finally:
        connection.exec_trace = connection.row_trace = None


def fill(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        for c in range(3):
            for i in range(6):
                say(memory, f"tg:{c}", "user" if i % 2 == 0 else "assistant", f"turn {i} of {c}: I live in Paris")
        say(memory, "tg:tools", "user", "Weather?")
        memory.append_message(agent_id=AGENT, owner_id="alice", conversation="tg:tools", role="assistant",
                              content="", sender=AGENT, tool_calls=[{"id": "call_1", "type": "function", "function": {
                                  "name": "get_weather", "arguments": "{}"}}])
        memory.append_message(agent_id=AGENT, owner_id="alice", conversation="tg:tools", role="tool",
                              content="21", sender="tool", tool_call_id="call_1")
        memory.write_memory({"op": "add", "category": "directive", "key": "tone",
                             "value": "Be brief"}, agent_id=AGENT, owner_id="op", trust="operator")
        memory.review_now()  # alice's prompt files get content
        memory.wait_for_background()


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_a_cold_prompt_is_at_most_two_statements_and_a_warm_one_reads_only_the_position(
        tmp_path: Path, style: str) -> None:
    home = tmp_path / "home"
    fill(home)
    with memory_on_held_store(home) as (memory, store):
        reader = store.reader()
        with traced(reader) as first:  # nothing cached: the window, then alice's two files
            prompt = memory.compose_prompt(AGENT, "alice", "tg:0", style=style)
        assert "Be brief" in str(prompt) and "turn 5 of 0" in str(prompt)
        assert len(first) == 2, first
        for conversation in ("tg:1", "tg:tools"):  # her files are kept: the window alone
            with traced(reader) as cold:
                memory.compose_prompt(AGENT, "alice", conversation, style=style)
            assert len(cold) == 1, cold
        with traced(reader) as newcomer:  # an owner with no files: the rules come with the files' read
            prompt = memory.compose_prompt(AGENT, "nobody", "tg:2", style=style)
        assert "Be brief" in str(prompt)
        assert len(newcomer) == 2, newcomer
        window_statement = cold[0]
        with traced(reader) as warm:
            for conversation in ("tg:0", "tg:1", "tg:tools"):
                memory.compose_prompt(AGENT, "alice", conversation, style=style)
        assert warm == [window_statement] * 3 and warm.rows == 3  # each gave the log's position alone


def test_a_write_by_another_process_costs_the_next_prompt_two_statements_and_shows(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(home)
    with memory_on_held_store(home) as (memory, store), MemorySystem.open(home) as other:
        reader = store.reader()
        memory.compose_prompt(AGENT, "alice", "tg:0")
        memory.compose_prompt(AGENT, "alice", "tg:1")
        say(other, "tg:0", "user", "from the other process")
        other.write_memory({"op": "add", "category": "directive", "key": "sign",
                            "value": "Sign with a smile"}, agent_id=AGENT, owner_id="op", trust="operator")
        with traced(reader) as after:  # the window read says the log moved: the files are read again
            prompt = memory.compose_prompt(AGENT, "alice", "tg:0")
        assert prompt[-1] == {"role": "user", "content": "from the other process"}
        assert "Sign with a smile" in prompt[0]["content"]
        assert len(after) == 2, after
        with traced(reader) as other_window:  # every window kept before the write was dropped
            prompt = memory.compose_prompt(AGENT, "alice", "tg:1")
        assert "Sign with a smile" in prompt[0]["content"]
        assert len(other_window) == 1, other_window


def test_a_capped_window_and_a_compacted_one_are_one_statement_each(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[fermix_core.memory]\nmax_conversation_history = 3\n", encoding="utf-8")
    filler = " ".join(["the harbour, the tides and the small wooden boats"] * 4)
    with MemorySystem.open(home) as memory:
        for i in range(8):
            say(memory, "tg:capped", "user" if i % 2 == 0 else "assistant", f"turn {i}")
            say(memory, "tg:compacted", "user" if i % 2 == 0 else "assistant", f"day {i}. {filler}")
        reply = memory.handle_command("/compact", agent_id=AGENT, owner_id="alice", conversation="tg:compacted",
                                      trust="operator", context_window=600)
        assert reply is not None and reply.ok, reply
        say(memory, "tg:compacted", "user", "and after the summary?")
        expected = {c: memory.compose_prompt(AGENT, "alice", c) for c in ("tg:capped", "tg:compacted")}
    with memory_on_held_store(home) as (memory, store):
        memory.compose_prompt(AGENT, "alice", "tg:other")  # her files, once
        for conversation, prompt in expected.items():
            with traced(store.reader()) as cold:
                assert memory.compose_prompt(AGENT, "alice", conversation) == prompt
            assert len(cold) == 1, cold
    assert [m["content"] for m in expected["tg:capped"][1:]] == ["turn 6", "turn 7"]  # turn 5: an orphan
    assert "conversation-summary" in expected["tg:compacted"][0]["content"]



def test_a_cold_prompt_compiles_nothing_once_its_statements_have_run(tmp_path: Path) -> None:
    """SQLite prepares a statement again at every run when a bound value could change its plan
    (ADR-0062's ``+?``): on the owner's files, a newcomer's cold prompt paid ten times the read
    of their empty files. The authorizer is called while a statement is compiled, so once each
    statement of a prompt has run, other owners' and conversations' prompts call it no more."""
    home = tmp_path / "home"
    fill(home)
    with memory_on_held_store(home) as (memory, store):
        reader = store.reader()
        compiled: list[int] = []

        def authorizer(*_what: Any) -> int:
            compiled.append(1)
            return apsw.SQLITE_OK

        reader.authorizer = authorizer  # set first: setting it expires what was prepared
        try:
            memory.compose_prompt(AGENT, "alice", "tg:0")  # the window, her files
            memory.compose_prompt(AGENT, "nobody", "tg:1")  # the window, no files: the agent's rules
            assert compiled  # each was compiled, once
            compiled.clear()
            for owner, conversation in (("bob", "tg:2"), ("carol", "tg:tools"), ("alice", "tg:1"), ("dave", "tg:0")):
                assert "Be brief" in str(memory.compose_prompt(AGENT, owner, conversation))
            assert compiled == []
        finally:
            reader.authorizer = None
