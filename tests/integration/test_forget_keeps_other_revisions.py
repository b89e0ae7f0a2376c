"""Forgetting one memory row (or one conversation) redacts only the prompt-file revisions that
showed what goes: every other revision stays readable under its number, and a number is never
given to a second revision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem, NotFound
from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

WHO = {"agent_id": "ada", "owner_id": "alice"}
NAMES = ("Ada", "Ada L", "Ada Lovelace")


def add(memory: MemorySystem, category: str, key: str, value: str) -> int:
    [outcome] = memory.write_memory({"op": "add", "category": category, "key": key, "value": value},
                                    trust="operator", **WHO)
    assert outcome.memory_id is not None
    return outcome.memory_id


def revisions(memory: MemorySystem, name: str) -> dict[int, str]:
    """Every readable revision of alice's file ``name``: number -> text."""
    return {r.revision: memory.resource_revision(name, r.revision, **WHO).content
            for r in memory.resource_history(name, limit=1000, **WHO)}


def tool_row_then_three_names(memory: MemorySystem) -> int:
    """A note stored through the tool (never shown in USER.md), then three statements of her
    name: USER.md revisions 1-3. Returns the note's id."""
    stored = memory.dispatch_tool("memory_store", {"key": "note", "value": "Parcel code Wombatgate"},
                                  conversation="telegram:alice", **WHO)
    assert stored["ok"], stored
    name = add(memory, "identity", "name", NAMES[0])
    for value in NAMES[1:]:
        memory.write_memory({"op": "replace", "id": name, "value": value}, trust="operator", **WHO)
    assert sorted(revisions(memory, "user_md")) == [1, 2, 3]
    return int(stored["id"])


def checked(memory: MemorySystem, tmp_path: Path) -> None:
    verified = memory.verify()
    assert verified.ok, verified.problem
    replay = memory.replay_into(tmp_path / "replayed")
    assert replay["identical"], replay["differing_tables"]


def test_forgetting_a_row_user_md_never_showed_leaves_its_history_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        note = tool_row_then_three_names(memory)
        before = revisions(memory, "user_md")
    done = run_cli("forget", "--memory", str(note), "--yes", home=home)
    assert done.returncode == 0, done.stderr
    assert "1 events redacted (0 prompt-file revisions)" in done.stdout
    history = run_cli("resource", "history", "user_md", "--agent", "ada", "--owner", "alice", home=home)
    assert [line.split("\t")[2] for line in history.stdout.splitlines()[1:]] == ["rev 3", "rev 2", "rev 1"]
    shown = run_cli("resource", "show", "user_md", "3", "--agent", "ada", "--owner", "alice", home=home)
    assert shown.returncode == 0 and f"- name: {NAMES[2]}" in shown.stdout, shown
    with MemorySystem.open(home) as memory:
        assert revisions(memory, "user_md") == before
        with pytest.raises(NotFound):
            memory.memory(note)
        checked(memory, tmp_path)


def test_a_revision_number_is_never_given_twice(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        add(memory, "identity", "name", NAMES[2])  # USER.md revision 1
        birds = add(memory, "interest", "birds", "Watches Kestrelhawks")  # revision 2 shows it
        report = memory.forget_memory(birds)
        assert report.redacted_revisions == 1
        assert sorted(revisions(memory, "user_md")) == [1]  # its text is current again: nothing new
        add(memory, "interest", "tea", "Likes Sencha")
        kept = revisions(memory, "user_md")
        assert sorted(kept) == [1, 3] and "Sencha" in kept[3]  # 2 is gone for good, never reused
        assert memory.prompt_file("ada", "alice", "user_md").read_text(encoding="utf-8") == kept[3]
        with pytest.raises(NotFound):
            memory.resource_revision("user_md", 2, **WHO)
        checked(memory, tmp_path)


def test_each_file_keeps_the_revisions_that_never_showed_the_row(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        project = add(memory, "context", "project", "Builds Heliotropebridge")  # MEMORY.md revision 1
        name = add(memory, "identity", "name", NAMES[2])  # USER.md revision 1
        add(memory, "context", "team", "Works with Marmosetcrew")  # MEMORY.md revision 2 shows both
        add(memory, "goal", "run", "Run a marathon")  # USER.md revision 2 shows both
        user_md, memory_md = revisions(memory, "user_md"), revisions(memory, "memory_md")
        assert memory.forget_memory(name).redacted_revisions == 2  # USER.md 1 and 2; MEMORY.md untouched
        assert revisions(memory, "memory_md") == memory_md
        assert sorted(revisions(memory, "user_md")) == [3] and NAMES[2] not in revisions(memory, "user_md")[3]
        assert memory.forget_memory(project).redacted_revisions == 2  # MEMORY.md 1 and 2; USER.md untouched
        assert sorted(revisions(memory, "user_md")) == [3]
        assert [n for n, text in revisions(memory, "memory_md").items() if "Heliotropebridge" in text] == []
        assert sorted(revisions(memory, "memory_md")) == [3]
        assert "Heliotropebridge" not in str(user_md)  # USER.md never showed it
        checked(memory, tmp_path)


def test_revisions_recorded_after_the_row_fell_out_for_space_stay(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        oldest = add(memory, "interest", "i0", "Likes Okapiwatching")
        for i in range(1, 7):  # Interests shows 6: the sixth newer row pushes the oldest out
            add(memory, "interest", f"i{i}", f"Likes thing {i}")
        texts = revisions(memory, "user_md")
        showing = sorted(n for n, text in texts.items() if "Okapiwatching" in text)
        assert showing == [1, 2, 3, 4, 5, 6] and sorted(texts) == [1, 2, 3, 4, 5, 6, 7]
        assert memory.forget_memory(oldest).redacted_revisions == 6
        assert revisions(memory, "user_md") == {7: texts[7]}
        checked(memory, tmp_path)


def test_forgetting_a_conversation_leaves_the_revisions_of_other_facts(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.append_message(conversation="telegram:secret", role="user", sender="alice",
                              content="the gate code is Pangolinkey", **WHO)
        stored = memory.dispatch_tool("memory_store", {"key": "gate", "value": "Gate Pangolinkey"},
                                      conversation="telegram:secret", **WHO)
        tool_row_then_three_names(memory)  # USER.md revisions recorded while the note is live
        add(memory, "context", "project", "Builds Heliotropebridge")
        before = {name: revisions(memory, name) for name in ("user_md", "memory_md")}
        report = memory.forget_conversation("ada", "telegram:secret")
        assert report.memory_ids == [stored["id"]] and report.messages == 1
        assert {name: revisions(memory, name) for name in ("user_md", "memory_md")} == before
        checked(memory, tmp_path)


def test_the_other_owners_memory_md_keeps_its_revisions_when_a_personal_row_goes(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        mine = add(memory, "context", "tea", "Drinks Rooibos daily")  # alice's own, agent-scoped
        bob: dict[str, Any] = {"agent_id": "ada", "owner_id": "bob"}
        memory.write_memory({"op": "add", "category": "context", "key": "tea", "value": "Drinks Rooibos daily"},
                            trust="operator", **bob)  # bob's own row, in the same words
        memory.write_memory({"op": "add", "category": "directive", "key": "tone", "value": "Be brief"},
                            trust="operator", **bob)  # a standing rule: every owner's MEMORY.md changes
        bobs = {r.revision for r in memory.resource_history("memory_md", **bob)}
        assert memory.forget_memory(mine).redacted_revisions == 2  # alice's MEMORY.md 1 and 2 only
        assert {r.revision for r in memory.resource_history("memory_md", **bob)} == bobs
        checked(memory, tmp_path)
