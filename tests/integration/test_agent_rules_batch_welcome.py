"""Owners who arrive together, in one commit of several messages, each get the agent's rules
in their MEMORY.md (one revision each), as one message each would: the quick path of a commit
of messages only agrees with the general one, here beside a rule change in the same process."""

from __future__ import annotations

from pathlib import Path

from fermix_memory import MemorySystem

RULE = "Always answer in English"


def said(owner: str, text: str) -> dict[str, str]:
    return {"agent_id": "ada", "owner_id": owner, "conversation": f"tg:{owner}", "role": "user", "sender": owner,
            "content": text}


def test_owners_arriving_in_one_batch_each_get_the_rules_once(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.write_memory({"op": "add", "category": "directive", "key": "language", "value": RULE},
                            agent_id="ada", owner_id="olga", trust="operator")
        memory.append_messages([said("erin", "hi"), said("finn", "hello"), said("erin", "me again"),
                                said("gus", "hey")])
        memory.append_messages([said("erin", "once more"), said("gus", "and again")])
        for owner in ("erin", "finn", "gus"):
            path = memory.prompt_file("ada", owner, "memory_md")
            assert f"- language: {RULE}" in path.read_text(encoding="utf-8")
            [revision] = memory.resource_history("memory_md", agent_id="ada", owner_id=owner)
            assert revision.reason == "rules"
