"""Composing a prompt only reads (ADR-0057): no event, no revision, no prompt file, also for an
owner the memory has never seen, whose prompt still shows the agent's standing rules; a
read-only open composes the same prompt. On SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OPERATOR, GUEST, NEWCOMER = "ada", "olga", "bob", "frank"
RULE = "Always answer in English"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with a standing rule of the agent, a guest with messages and a row of their own."""
    home = tmp_path / "home"
    with MemorySystem.open(home) as m:
        m.append_message(agent_id=AGENT, owner_id=GUEST, conversation="telegram:bob", role="user", sender=GUEST,
                         content="hi, I build boats")
        m.write_memory({"op": "add", "category": "context", "key": "boats", "value": "Bob builds boats"},
                       agent_id=AGENT, owner_id=GUEST, trust="guest")
        add_rule(m, RULE)
    return home


@pytest.fixture
def memory(home: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(home) as opened:
        yield opened


def add_rule(m: MemorySystem, text: str, key: str = "language") -> int:
    [outcome] = m.write_memory({"op": "add", "category": "directive", "key": key, "value": text},
                               agent_id=AGENT, owner_id=OPERATOR, trust="operator")
    return int(outcome.memory_id)


def memory_block(m: MemorySystem, owner: str, style: str = "openai") -> str:
    prompt: Any = m.compose_prompt(AGENT, owner, f"telegram:{owner}", style=style)  # type: ignore[call-overload]
    if style == "anthropic":
        return str(prompt[0])
    return str(prompt[0]["content"]) if prompt and prompt[0]["role"] == "system" else ""


def stored(m: MemorySystem, home: Path) -> tuple[object, ...]:
    """Everything a write would change: the log's head, every current revision, the files on disk."""
    files = sorted((str(p.relative_to(home)), p.read_bytes()) for p in (home / "memory").rglob("*.md"))
    return m.head(), [(r.agent_id, r.owner_id, r.name, r.revision) for r in m.resources()], files


def test_composing_a_prompt_writes_nothing(memory: MemorySystem, home: Path) -> None:
    before = stored(memory, home)
    for owner in (OPERATOR, GUEST, NEWCOMER, "grace"):
        for style in ("openai", "anthropic"):
            assert f"- language: {RULE}" in memory_block(memory, owner, style), (owner, style)
    assert "Bob builds boats" in memory_block(memory, GUEST)
    assert memory.compose_prompt("max", NEWCOMER, "telegram:frank") == []  # another agent: no rules
    assert stored(memory, home) == before
    assert memory.resource_history("memory_md", agent_id=AGENT, owner_id=NEWCOMER) == []


def test_a_read_only_open_composes_the_same_prompt(home: Path, memory: MemorySystem) -> None:
    written = {owner: memory.compose_prompt(AGENT, owner, f"telegram:{owner}") for owner in (GUEST, NEWCOMER)}
    memory.close()
    with MemorySystem.open(home, readonly=True) as m:
        before = stored(m, home)
        for owner, prompt in written.items():
            assert m.compose_prompt(AGENT, owner, f"telegram:{owner}") == prompt
        assert f"- language: {RULE}" in memory_block(m, "grace")  # never seen by any open
        assert stored(m, home) == before


def test_a_newcomers_prompt_follows_every_change_of_the_rules(memory: MemorySystem, home: Path) -> None:
    rule_id = add_rule(memory, "Be brief", key="tone")
    assert "- tone: Be brief" in memory_block(memory, NEWCOMER)
    memory.write_memory({"op": "replace", "id": rule_id, "value": "Be very brief"}, agent_id=AGENT,
                        owner_id=OPERATOR, trust="operator")
    assert "- tone: Be very brief" in memory_block(memory, NEWCOMER)
    memory.write_memory({"op": "archive", "id": rule_id, "reason": "verbose now"}, agent_id=AGENT,
                        owner_id=OPERATOR, trust="operator")
    assert "tone" not in memory_block(memory, NEWCOMER)
    memory.restore(rule_id)
    assert "- tone: Be very brief" in memory_block(memory, NEWCOMER)
    memory.forget_owner(OPERATOR, agent_id=AGENT)  # every rule was theirs
    assert memory_block(memory, NEWCOMER) == ""
    add_rule(memory, "Be kind", key="manners")  # a rule where the memory had none
    assert "- manners: Be kind" in memory_block(memory, NEWCOMER)
    with MemorySystem.open(home) as other:  # another writer on the same home
        add_rule(other, "Sign with a smile", key="signature")
    assert "- signature: Sign with a smile" in memory_block(memory, NEWCOMER)
    assert memory.resource_history("memory_md", agent_id=AGENT, owner_id=NEWCOMER) == []
