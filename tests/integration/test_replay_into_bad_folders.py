"""``replay_into`` a folder that cannot be made answers with a typed error and leaves nothing:
a name longer than the file system allows, a file in the way, a folder holding a memory already."""

from __future__ import annotations

from pathlib import Path

import pytest

from fermix_memory import MemorySystem, StorageError


@pytest.mark.parametrize("target", ["x" * 300, "a_file/inside", "done"])
def test_a_folder_that_cannot_take_a_replay_is_a_storage_error(tmp_path: Path, target: str) -> None:
    (tmp_path / "a_file").write_text("in the way")
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="t:1", role="user", content="hi")
        assert memory.replay_into(tmp_path / "done")["identical"]
        before = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(StorageError):
            memory.replay_into(tmp_path / target)
        assert sorted(p.name for p in tmp_path.iterdir()) == before
