"""The home's keyring of export data keys (ADR-0081): its file and folder are the owner's alone, a
destroyed key is gone from the disk when ``destroy`` returns, a key made again is another key,
and two memories on one home (threads, processes) never lose each other's keys."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fermix_memory.adapters.home_keys import HomeKey, keys_folder
from fermix_memory.adapters.keyring import Keyring, KeyUnusable


def keyring(home: Path) -> Keyring:
    folder = keys_folder(home)
    return Keyring(folder, HomeKey(folder, create=True).wrapping_key())


def test_the_file_and_its_folder_are_the_owners_alone(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    ring.data_key(("ada", "alice"), create=True)
    assert stat.S_IMODE(os.stat(ring.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(ring.folder).st_mode) == 0o700
    ring.data_key(("ada", "bob"), create=True)  # replaced: still 0600
    ring.destroy([("ada", "bob")])
    assert stat.S_IMODE(os.stat(ring.path).st_mode) == 0o600
    assert [p.name for p in ring.folder.iterdir() if p.name.endswith(".tmp")] == []


def test_a_destroyed_key_is_gone_from_the_disk_and_never_comes_back(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    key = ring.data_key(("ada", "alice"), create=True)
    assert key is not None and key.key_id.encode() in ring.path.read_bytes()
    assert ring.destroy([("ada", "alice"), ("ada", "nobody")]) == [("ada", "alice")]
    assert key.key_id.encode() not in ring.path.read_bytes()
    assert keyring(tmp_path).data_key(("ada", "alice")) is None  # a fresh reader sees it gone
    again = ring.data_key(("ada", "alice"), create=True)
    assert again is not None and again.key_id != key.key_id and again.key != key.key
    assert ring.destroy([("ada", "nobody")]) == []


def test_sealed_data_opens_only_under_its_key_and_context(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    a, b = ring.data_key(("ada", "alice"), create=True), ring.data_key(("ada", "bob"), create=True)
    assert a is not None and b is not None
    nonce, sealed = ring.seal(a, b"words", b"context")
    assert ring.open(a, nonce, sealed, b"context") == b"words"
    for key, context in ((b, b"context"), (a, b"other")):
        with pytest.raises(KeyUnusable):
            ring.open(key, nonce, sealed, context)


def test_another_home_key_does_not_unwrap_the_keys(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    ring.data_key(("ada", "alice"), create=True)
    other = Keyring(ring.folder, bytes(32))
    assert other.keyring_id == ring.keyring_id and other.pairs() == [("ada", "alice")]
    with pytest.raises(KeyUnusable, match="does not unwrap"):
        other.data_key(("ada", "alice"))


def test_two_keyrings_on_one_home_lose_no_key_across_threads(tmp_path: Path) -> None:
    rings = [keyring(tmp_path), keyring(tmp_path)]

    def make(n: int) -> None:
        for i in range(25):
            rings[n].data_key((f"agent{n}", f"owner{i}"), create=True)

    threads = [threading.Thread(target=make, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keyring(tmp_path).pairs()) == 50


CHILD = """
import sys
from pathlib import Path
from fermix_memory.adapters.home_keys import HomeKey
from fermix_memory.adapters.keyring import Keyring
folder = Path(sys.argv[1])
ring = Keyring(folder, HomeKey(folder, create=False).wrapping_key())
for i in range(25):
    ring.data_key((sys.argv[2], f"owner{i}"), create=True)
"""


def test_two_processes_on_one_home_lose_no_key(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    ring.data_key(("first", "owner"), create=True)
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(ring.folder), f"agent{n}"]) for n in (0, 1)]
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    assert len(ring.pairs()) == 51
