"""The keyring's tree of position keys (ADR-0081): made once, by the first encrypted export; a
punctured position's key is gone from the disk when ``puncture`` returns and never comes back,
every other position keeps its key; puncturing and making data keys at once lose nothing; another
home's key does not unwrap the tree."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from fermix_memory.adapters.home_keys import HomeKey, keys_folder
from fermix_memory.adapters.keyring import Keyring, KeyUnusable


def keyring(home: Path) -> Keyring:
    folder = keys_folder(home)
    return Keyring(folder, HomeKey(folder, create=True).wrapping_key())


def test_the_tree_is_made_once_and_only_when_asked(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    assert ring.position_keys() is None and ring.puncture([1, 2]) == 0
    assert not ring.exists()  # puncturing nothing makes no file
    made = ring.position_keys(create=True)
    assert made is not None and len(made.tree_id) == 16
    again = keyring(tmp_path).position_keys(create=True)
    assert again is not None and again.tree_id == made.tree_id
    for position in (1, 2, 77, 2**39):
        key, other = made.key_of(position), again.key_of(position)
        assert key is not None and other is not None and key == other and len(key.key) == 32
    assert made.key_of(1) != made.key_of(2)
    assert stat.S_IMODE(os.stat(ring.path).st_mode) == 0o600


def test_a_punctured_key_is_gone_from_the_disk_and_the_rest_stay(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    alice = ring.data_key(("ada", "alice"), create=True)
    before = ring.position_keys(create=True)
    assert before is not None
    keys = {p: before.key_of(p) for p in range(1, 40)}
    assert ring.puncture([5, 6, 7, 30]) == 4
    assert ring.puncture([5, 6, 8]) == 1  # those punctured already are not counted again
    after = keyring(tmp_path).position_keys()  # a fresh reader: what is on the disk
    assert after is not None and after.tree_id == before.tree_id
    assert [p for p in range(1, 40) if after.key_of(p) is None] == [5, 6, 7, 8, 30]
    assert all(after.key_of(p) == keys[p] for p in range(1, 40) if p not in (5, 6, 7, 8, 30))
    assert keyring(tmp_path).data_key(("ada", "alice")) == alice  # the data keys stay
    ring.destroy([("ada", "alice")])
    kept = keyring(tmp_path).position_keys()
    assert kept is not None and kept.key_of(9) == keys[9] and kept.key_of(8) is None  # and the tree stays


def test_another_home_key_does_not_unwrap_the_tree(tmp_path: Path) -> None:
    ring = keyring(tmp_path)
    ring.position_keys(create=True)
    with pytest.raises(KeyUnusable, match="position keys"):
        Keyring(ring.folder, bytes(32)).position_keys()
    with pytest.raises(KeyUnusable, match="position keys"):
        Keyring(ring.folder, bytes(32)).puncture([3])
    assert keyring(tmp_path).position_keys() is not None


def test_puncturing_and_making_keys_at_once_lose_nothing(tmp_path: Path) -> None:
    keyring(tmp_path).position_keys(create=True)
    rings = [keyring(tmp_path), keyring(tmp_path)]

    def puncture() -> None:
        for i in range(20):
            rings[0].puncture([100 + i])

    def make() -> None:
        for i in range(20):
            rings[1].data_key(("ada", f"owner{i}"), create=True)

    threads = [threading.Thread(target=puncture), threading.Thread(target=make)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tree = keyring(tmp_path).position_keys()
    assert tree is not None and [p for p in range(95, 125) if tree.key_of(p) is None] == list(range(100, 120))
    assert len(keyring(tmp_path).pairs()) == 20
