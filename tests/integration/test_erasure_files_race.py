"""Forgetting an owner while their prompt files are being written: the files end up matching
the log (gone when no current revision exists, present and current when one does)."""

from __future__ import annotations

import threading
from pathlib import Path

from fermix_memory import MemorySystem
from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.integration.test_forget import found
from tests.waits import HANG_GUARD_S

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


class HeldFiles(PromptFileFolder):
    """Prompt files whose writes can be held, as a writer stalled between reading its revision and writing."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.held = False
        self.writing, self.release = threading.Event(), threading.Event()

    def write(self, agent_id: str, owner_id: str, name: str, content: str) -> Path:
        if self.held:
            self.writing.set()
            self.release.wait(2)
        return super().write(agent_id, owner_id, name, content)


def test_forget_racing_a_memory_write_neither_loses_nor_resurrects_prompt_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    files = HeldFiles(home)
    with MemorySystem(bootstrap(home, files=files)) as memory:
        memory.write_memory({"op": "add", "category": "preference", "key": "tea", "value": "Likes tea"},
                            agent_id="ada", owner_id="alice", trust="operator")
        files.held = True  # the writer is between reading its revision and writing
        writing, release = files.writing, files.release
        writer = threading.Thread(target=memory.write_memory, args=(
            {"op": "add", "category": "preference", "key": "place", "value": f"Lives at {SECRET}"},),
            kwargs={"agent_id": "ada", "owner_id": "alice"})
        writer.start()
        assert writing.wait(HANG_GUARD_S)
        forget = threading.Thread(target=memory.forget_owner, args=("alice",))
        forget.start()
        forget.join(0.5)  # with the lock, the removal waits for the write in flight
        release.set()
        writer.join(HANG_GUARD_S)
        forget.join(HANG_GUARD_S)
        assert not writer.is_alive() and not forget.is_alive()
        files.held = False
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
                t.join(HANG_GUARD_S)
            files_match_the_log(memory, "ada", "alice")
