"""Forgetting an owner while their prompt files are being written: the files end up matching
the log (gone when no current revision exists, present and current when one does)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from tests.integration.test_forget import found

SECRET = "Zanzibarhiddenkey"


def files_match_the_log(memory: MemorySystem, agent: str, owner: str) -> None:
    for name in ("user_md", "memory_md"):
        current = next((r for r in memory.resources(agent_id=agent, owner_id=owner) if r.name == name), None)
        path = memory.prompt_file(agent, owner, name)
        if current is None:
            assert not path.exists(), f"{path} outlived its owner's erasure"
        else:
            assert path.exists(), f"{path} is missing while revision {current.revision} is current"
            assert path.read_text(encoding="utf-8") == current.content


def test_forget_racing_a_memory_write_neither_loses_nor_resurrects_prompt_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        memory.write_memory({"op": "add", "category": "preference", "key": "tea", "value": "Likes tea"},
                            agent_id="ada", owner_id="alice", trust="operator")
        files = memory.app.prompt_files._files
        real_write = files.write
        writing, release = threading.Event(), threading.Event()

        def slow_write(*args: Any) -> Any:  # the writer is between reading its revision and writing
            writing.set()
            release.wait(2)
            return real_write(*args)

        files.write = slow_write  # type: ignore[method-assign]
        writer = threading.Thread(target=memory.write_memory, args=(
            {"op": "add", "category": "preference", "key": "place", "value": f"Lives at {SECRET}"},),
            kwargs={"agent_id": "ada", "owner_id": "alice"})
        writer.start()
        assert writing.wait(10)
        forget = threading.Thread(target=memory.forget_owner, args=("alice",))
        forget.start()
        forget.join(0.5)  # with the lock, the removal waits for the write in flight
        release.set()
        writer.join(30)
        forget.join(30)
        assert not writer.is_alive() and not forget.is_alive()
        files.write = real_write  # type: ignore[method-assign]
        files_match_the_log(memory, "ada", "alice")
        assert not (home / "memory" / "ada" / "alice").exists()
    assert found(home, (SECRET,)) == {}


def test_forget_and_memory_writes_racing_for_many_rounds_keep_files_matching_the_log(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        for round_ in range(20):
            start = threading.Barrier(2)

            def write(i: int = round_, gate: threading.Barrier = start) -> None:
                gate.wait()
                memory.write_memory({"op": "add", "category": "preference", "key": f"k{i}",
                                     "value": f"Likes thing {i}"}, agent_id="ada", owner_id="alice", trust="operator")

            def forget(gate: threading.Barrier = start) -> None:
                gate.wait()
                memory.forget_owner("alice", agent_id="ada")

            threads = [threading.Thread(target=write), threading.Thread(target=forget)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            files_match_the_log(memory, "ada", "alice")
