"""A new home's key is created whole or not at all (``durable_file.create_durably``): processes
opening the same new home at once all read the one key, none a half-written file, and a file
already in place is never replaced."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from fermix_memory.adapters.durable_file import create_durably
from fermix_memory.adapters.home_keys import HomeKey

PROCESSES = 8


def _open_key(folder: str, start: object, out: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    try:
        out.put(HomeKey(Path(folder)).public_key())  # type: ignore[attr-defined]
    except Exception as exc:  # reported to the test, not lost in the child
        out.put(f"error: {exc}")  # type: ignore[attr-defined]


@pytest.mark.sqlite_only("no store: the home's key file alone")
@pytest.mark.parametrize("round_", range(3))
def test_processes_opening_a_new_home_at_once_share_one_whole_key(tmp_path: Path, round_: int) -> None:
    context = multiprocessing.get_context("fork")
    start, out = context.Event(), context.Queue()
    folder = tmp_path / f"keys-{round_}"
    children = [context.Process(target=_open_key, args=(str(folder), start, out)) for _ in range(PROCESSES)]
    for child in children:
        child.start()
    start.set()
    keys = [out.get(timeout=60) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert not [k for k in keys if k.startswith("error")], keys
    assert len(set(keys)) == 1 and keys[0] == HomeKey(folder, create=False).public_key()
    assert [p.name for p in folder.iterdir()] == ["home.key"]  # no temp file left behind


@pytest.mark.sqlite_only("no store: a file alone")
def test_a_file_created_durably_is_never_replaced(tmp_path: Path) -> None:
    target = tmp_path / "once"
    create_durably(target, b"first", mode=0o600)
    with pytest.raises(FileExistsError):
        create_durably(target, b"second")
    assert target.read_bytes() == b"first" and (target.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["once"]
