"""The operator's directives are the agent's standing rules: every owner's MEMORY.md shows them.

Real homes in ``tmp_path``, on SQLite and on PostgreSQL; the files are read from disk and their
revisions from the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.prompt_files import PromptFiles

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT, OTHER_AGENT = "ada", "max"
OPERATOR, GUESTS = "olga", ("bob", "carol")
RULE = "Always answer in English"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as opened:
        yield opened


def say(m: MemorySystem, owner: str, text: str, *, agent: str = AGENT) -> None:
    m.append_message(agent_id=agent, owner_id=owner, conversation=f"telegram:{owner}", role="user", sender=owner,
                     content=text, trust="operator" if owner == OPERATOR else "guest")


def write(m: MemorySystem, op: dict[str, Any], *, owner: str = OPERATOR, agent: str = AGENT,
          trust: str = "operator") -> Any:
    [outcome] = m.write_memory(op, agent_id=agent, owner_id=owner, trust=trust)
    return outcome


def memory_md(m: MemorySystem, owner: str, agent: str = AGENT) -> str:
    path = m.prompt_file(agent, owner, "memory_md")
    return path.read_text(encoding="utf-8") if path.exists() else ""


def revisions(m: MemorySystem, owner: str, agent: str = AGENT, name: str = "memory_md") -> list[int]:
    return [r.revision for r in reversed(m.resource_history(name, agent_id=agent, owner_id=owner))]


def block(m: MemorySystem, owner: str) -> str:
    messages = m.compose_prompt(AGENT, owner, f"telegram:{owner}")
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else ""


@pytest.fixture
def agent_with_guests(memory: MemorySystem) -> MemorySystem:
    say(memory, OPERATOR, "hello, I run this agent")
    for guest in GUESTS:
        say(memory, guest, f"hi, I am {guest}")
    write(memory, {"op": "add", "category": "context", "key": "bob_project", "value": "Bob builds boats"},
          owner="bob", trust="guest")
    say(memory, "dave", "hello from another agent's guest", agent=OTHER_AGENT)
    return memory


def test_operator_directive_changes_revise_every_owners_memory_md(agent_with_guests: MemorySystem) -> None:
    m = agent_with_guests
    owners = (OPERATOR, *GUESTS)
    assert {o: revisions(m, o) for o in owners} == {OPERATOR: [], "bob": [1], "carol": []}

    rule_id = write(m, {"op": "add", "category": "directive", "key": "language", "value": RULE}).memory_id
    assert {o: revisions(m, o) for o in owners} == {OPERATOR: [1], "bob": [1, 2], "carol": [1]}
    for owner in owners:
        assert f"## Working Rules\n- language: {RULE}\n" in memory_md(m, owner)
        assert f"- language: {RULE}" in block(m, owner)
    assert memory_md(m, "bob").startswith("## Context\n- bob_project: Bob builds boats\n")

    write(m, {"op": "replace", "id": rule_id, "value": "Always answer in French"})
    assert {o: revisions(m, o) for o in owners} == {OPERATOR: [1, 2], "bob": [1, 2, 3], "carol": [1, 2]}
    assert all("- language: Always answer in French" in memory_md(m, o) for o in owners)

    write(m, {"op": "archive", "id": rule_id, "reason": "bilingual now"})
    assert {o: revisions(m, o) for o in owners} == {OPERATOR: [1, 2, 3], "bob": [1, 2, 3, 4],
                                                    "carol": [1, 2, 3]}
    assert all("Working Rules" not in memory_md(m, o) for o in owners)
    assert memory_md(m, "bob") == "## Context\n- bob_project: Bob builds boats\n"

    m.restore(rule_id)
    assert all("- language: Always answer in French" in memory_md(m, o) for o in owners)
    # Another agent's owners are not touched.
    assert m.resources(agent_id=OTHER_AGENT) == []


def test_only_directive_changes_fan_out(agent_with_guests: MemorySystem) -> None:
    m = agent_with_guests
    write(m, {"op": "add", "category": "directive", "key": "language", "value": RULE})
    before = {o: revisions(m, o) for o in (OPERATOR, *GUESTS)}
    # The operator's private rows and a guest's rows change only their own files.
    write(m, {"op": "add", "category": "context", "key": "roadmap", "value": "Ship in May"})
    write(m, {"op": "add", "category": "identity", "key": "name", "value": "Olga"})
    write(m, {"op": "add", "category": "context", "key": "boat", "value": "A red boat"}, owner="bob", trust="guest")
    after = {o: revisions(m, o) for o in (OPERATOR, *GUESTS)}
    assert after == {OPERATOR: before[OPERATOR] + [2], "bob": before["bob"] + [3], "carol": before["carol"]}
    for guest in GUESTS:
        assert "roadmap" not in memory_md(m, guest) and "Olga" not in block(m, guest)
    assert "boat" not in memory_md(m, OPERATOR) and "boat" not in memory_md(m, "carol")


def test_a_guest_who_arrives_after_the_rule_gets_it_with_the_first_message(memory: MemorySystem) -> None:
    write(memory, {"op": "add", "category": "directive", "key": "language", "value": RULE})
    assert memory_md(memory, "erin") == ""
    say(memory, "erin", "hello, I am new here")
    assert f"- language: {RULE}" in memory_md(memory, "erin")
    assert f"- language: {RULE}" in block(memory, "erin")
    [rev] = memory.resource_history("memory_md", agent_id=AGENT, owner_id="erin")
    assert rev.reason == "rules"
    say(memory, "erin", "and a second message")
    assert revisions(memory, "erin") == [1]


def test_a_prompt_composed_for_an_owner_never_seen_before_has_the_rules(memory: MemorySystem) -> None:
    write(memory, {"op": "add", "category": "directive", "key": "language", "value": RULE})
    assert f"- language: {RULE}" in block(memory, "frank")
    # The prompt only read (ADR-0057): his MEMORY.md is recorded by the writer, at his first message.
    assert memory_md(memory, "frank") == "" and revisions(memory, "frank") == []
    say(memory, "frank", "hello")
    assert f"- language: {RULE}" in memory_md(memory, "frank")
    assert revisions(memory, "frank") == [1]


def test_no_rules_no_files_for_a_new_guest(memory: MemorySystem) -> None:
    say(memory, "erin", "hello, I am new here")
    assert memory.resources(agent_id=AGENT) == []


def test_forgetting_the_operator_takes_their_rules_out_of_every_file(agent_with_guests: MemorySystem) -> None:
    m = agent_with_guests
    write(m, {"op": "add", "category": "directive", "key": "language", "value": RULE})
    assert all(RULE in memory_md(m, g) for g in GUESTS)
    m.forget_owner(OPERATOR, agent_id=AGENT)
    assert all(RULE not in memory_md(m, g) and RULE not in block(m, g) for g in GUESTS)
    assert memory_md(m, "bob") == "## Context\n- bob_project: Bob builds boats\n"


def test_a_rule_change_records_every_owners_memory_md_in_its_own_commit_and_a_crash_before_the_files_is_repaired(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as m:
        for guest in GUESTS:
            say(m, guest, "hello")
        write(m, {"op": "add", "category": "context", "key": "bob_project", "value": "Boats"}, owner="bob",
              trust="guest")

    def crash(self: PromptFiles, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("crashed before the files of every owner were written (simulated)")

    # Patched before open: the reaction is bound when the system is wired.
    monkeypatch.setattr(PromptFiles, "on_commit", crash)
    with MemorySystem.open(home) as m:
        write(m, {"op": "add", "category": "directive", "key": "language", "value": RULE})  # committed
        assert all(RULE not in memory_md(m, owner) for owner in (OPERATOR, *GUESTS))
        # The revisions are in the commit of the rule itself: only the files lag behind.
        for owner in (OPERATOR, *GUESTS):
            latest = m.resource_history("memory_md", agent_id=AGENT, owner_id=owner, limit=1)[0]
            assert f"- language: {RULE}" in latest.content, owner
    monkeypatch.undo()

    with MemorySystem.open(home) as m:
        assert m.memories(agent_id=AGENT, owner_id=OPERATOR)[0].value == RULE  # it was committed
        for owner in (OPERATOR, *GUESTS):
            assert f"- language: {RULE}" in memory_md(m, owner), owner
            assert f"- language: {RULE}" in block(m, owner), owner
            assert m.resource_history("memory_md", agent_id=AGENT, owner_id=owner, limit=1)[0].reason == "rules"
    with MemorySystem.open(home) as m:  # and nothing more to repair the next time
        assert revisions(m, "bob") == [1, 2]


def test_agent_rules_come_after_the_owners_own_and_share_the_cap(memory: MemorySystem) -> None:
    """An operator may also write a directive into one guest's memory: it is a standing rule of the
    agent as well, but in that guest's file it comes first and wins over another rule of its key."""
    for i in range(10):
        write(memory, {"op": "add", "category": "directive", "key": f"rule_{i}", "value": f"General rule {i}"})
    write(memory, {"op": "add", "category": "directive", "key": "rule_3", "value": "Bob's own rule 3"},
          owner="bob")
    say(memory, "carol", "hello")
    bob = memory_md(memory, "bob").splitlines()
    assert bob[0] == "## Working Rules" and len(bob) == 9
    assert bob[1] == "- rule_3: Bob's own rule 3"
    assert bob[2:] == [f"- rule_{i}: General rule {i}" for i in (9, 8, 7, 6, 5, 4, 2)]
    olga = memory_md(memory, OPERATOR).splitlines()
    assert olga[1:] == [f"- rule_{i}: General rule {i}" for i in range(9, 1, -1)]
    # For Carol the newest statement of rule_3 (Bob's) is the one shown.
    carol = memory_md(memory, "carol").splitlines()
    general = [f"- rule_{i}: General rule {i}" for i in (9, 8, 7, 6, 5, 4, 2)]
    assert carol[1:] == ["- rule_3: Bob's own rule 3", *general]


RULE_WORDS = ("Zanzibarrule", "Yokohamarule", "Quagmirerule")


def test_forgetting_the_operator_leaves_no_byte_of_their_rules_in_other_owners_revisions(
        tmp_path: Path, every_store: str) -> None:
    """Every owner's MEMORY.md revisions showed the operator's rules (a rule changed, archived,
    brought back by a rollback, a live one): after the operator is forgotten no revision shows
    them, no byte of any of them is left in the home's files (memory.db and its WAL on SQLite),
    and the log still verifies and replays."""
    home = tmp_path / "home"
    with MemorySystem.open(home) as m:
        say(m, OPERATOR, "hello, I run this agent")
        for guest in GUESTS:
            say(m, guest, f"hi, I am {guest}")
        write(m, {"op": "add", "category": "context", "key": "bob_project", "value": "Bob builds boats"},
              owner="bob", trust="guest")
        rule_id = write(m, {"op": "add", "category": "directive", "key": "language",
                            "value": f"Always say {RULE_WORDS[0]}"}).memory_id
        write(m, {"op": "replace", "id": rule_id, "value": f"Always say {RULE_WORDS[1]}"})
        with_rule = revisions(m, "bob")[-1]
        write(m, {"op": "archive", "id": rule_id, "reason": "gone"})
        m.resource_rollback("memory_md", with_rule, agent_id=AGENT, owner_id="bob")  # the old text again
        assert RULE_WORDS[1] in memory_md(m, "bob")
        write(m, {"op": "add", "category": "directive", "key": "tone", "value": f"Be {RULE_WORDS[2]}"})
        say(m, "erin", "hi, I am new here")  # her MEMORY.md never showed anything but the rules
        assert all(RULE_WORDS[2] in memory_md(m, o) for o in (*GUESTS, "erin"))
        say(m, "dave", "hello from another agent's guest", agent=OTHER_AGENT)
        m.forget_owner(OPERATOR)
        assert memory_md(m, "bob") == "## Context\n- bob_project: Bob builds boats\n"
        assert memory_md(m, "carol") == ""  # back to her revision between the two rules
        assert not m.prompt_file(AGENT, "erin", "memory_md").exists()
        assert m.resource_history("memory_md", agent_id=AGENT, owner_id="erin") == []
        assert all(not any(w in r.content for w in RULE_WORDS)
                   for r in m.resource_history("memory_md", agent_id=AGENT, owner_id="bob"))
        assert m.verify().ok
        assert m.replay_into(tmp_path / "replayed")["identical"]
    for path in (p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert not [w for w in RULE_WORDS if w.encode() in data], path
    if every_store == "sqlite":
        assert b"Bob builds boats" in (home / "memory.db").read_bytes()  # the scan above read the database
    with MemorySystem.open(home) as m:  # nothing to repair, nothing brought back
        assert m.verify().ok
        assert memory_md(m, "bob") == "## Context\n- bob_project: Bob builds boats\n"
        assert not m.prompt_file(AGENT, "erin", "memory_md").exists()
        write(m, {"op": "add", "category": "directive", "key": "tone", "value": "Be brief"}, owner="zoe")
        assert memory_md(m, "erin") == "## Working Rules\n- tone: Be brief\n"  # the next operator's rules
        assert m.verify().ok


def test_a_file_that_showed_only_a_forgotten_operators_rules_goes_even_after_a_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as m:
        write(m, {"op": "add", "category": "directive", "key": "tone", "value": f"Be {RULE_WORDS[2]}"})
        say(m, "erin", "hi, I am new here")
        assert RULE_WORDS[2] in memory_md(m, "erin")

    def crash(self: PromptFiles, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("crashed before the files were written (simulated)")

    monkeypatch.setattr(PromptFiles, "on_commit", crash)
    with MemorySystem.open(home) as m:
        m.forget_owner(OPERATOR)
        assert RULE_WORDS[2] in memory_md(m, "erin")  # the erasure committed, the file lags behind
    monkeypatch.undo()
    with MemorySystem.open(home) as m:
        assert not m.prompt_file(AGENT, "erin", "memory_md").exists()
