"""A forget made on one host reaches the prompt files of every host sharing the database (two
homes, one PostgreSQL database), and ``verify`` on a host says when its prompt files still show
what an erasure removed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from tests.waits import until

SECRET = "Marmalade-lighthouse"


def config(url: str) -> dict[str, Any]:
    return {"fermix_core": {"storage": {"url": url}}}


def alice_facts(memory: MemorySystem) -> None:
    for agent in ("ada", "max"):
        memory.append_message(agent_id=agent, owner_id="alice", conversation="telegram:alice", role="user",
                              content="hello")
        memory.write_memory({"op": "add", "category": "identity", "key": "home", "value": f"Lives by {SECRET}"},
                            agent_id=agent, owner_id="alice", trust="operator")
        memory.write_memory({"op": "add", "category": "identity", "key": "name", "value": "Bob"},
                            agent_id=agent, owner_id="bob", trust="operator")


def shows(path: Path) -> bool:
    return path.exists() and SECRET in path.read_text(encoding="utf-8")


def test_a_forget_on_one_host_removes_the_owners_prompt_files_from_the_other_host(
        postgres_url: str, tmp_path: Path) -> None:
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store_b = PostgresEventStore(postgres_url)
    with MemorySystem.open(tmp_path / "host-a", config=config(postgres_url)) as a, \
            MemorySystem(bootstrap(tmp_path / "host-b", store=store_b)) as b:
        until(lambda: store_b.listening, "host b listens")
        alice_facts(a)
        on_b = {agent: b.prompt_file(agent, "alice", "user_md") for agent in ("ada", "max")}
        bob_on_b = b.prompt_file("ada", "bob", "user_md")
        until(lambda: all(shows(p) for p in on_b.values()) and bob_on_b.exists(),
              "host b renders alice's and bob's USER.md from the database")

        a.forget_owner("alice", agent_id="ada")
        until(lambda: not on_b["ada"].exists(), "host b's USER.md of the forgotten owner is removed")
        assert not on_b["ada"].with_name("MEMORY.md").exists()
        assert shows(on_b["max"]) and bob_on_b.exists()  # another agent's files and another owner's stay
        assert not a.prompt_file("ada", "alice", "user_md").exists()
        assert b.verify().ok and a.verify().ok

        # A host the erasure has not reached (its file put back as it was): verify names the file.
        on_b["ada"].parent.mkdir(parents=True, exist_ok=True)
        on_b["ada"].write_text(f"# User\n- home: Lives by {SECRET}\n", encoding="utf-8")
        report = b.verify()
        assert not report.ok and str(on_b["ada"]) in report.problem and "erased" in report.problem
        assert a.verify().ok  # host a's own files are as the log says

        # Alice with the other agent: the feed brings that forget too; the file put back stays
        # named until this host's files are made to match the log again.
        a.forget_owner("alice")
        until(lambda: not on_b["max"].exists(), "host b's USER.md of alice with max is removed")
        report = b.verify()
        assert not report.ok and str(on_b["ada"]) in report.problem and str(on_b["max"]) not in report.problem
        b.rebuild_prompt_files("ada", "alice")
        assert not on_b["ada"].exists() and b.verify().ok


def test_verify_names_a_forgotten_owners_file_put_back_into_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        alice_facts(memory)
        user_md = memory.prompt_file("ada", "alice", "user_md")
        assert shows(user_md)
        memory.forget_owner("alice", agent_id="ada")
        assert not user_md.exists() and memory.verify().ok
        user_md.parent.mkdir(parents=True)
        user_md.write_text(f"- Lives by {SECRET}\n", encoding="utf-8")
        report = memory.verify()
        assert not report.ok and str(user_md) in report.problem
        bob_md = memory.prompt_file("ada", "bob", "user_md")
        bob_md.write_text(bob_md.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
        assert str(bob_md) not in memory.verify().problem  # no erasure touched bob's files
