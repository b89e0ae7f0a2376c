"""The home's keyring of export data keys (ADR-0081): ``HOME/keys/keyring.json`` (0600, in the
0700 keys folder) holds, per (agent, owner) pair, one random 256-bit AES-GCM data key, stored
wrapped (AES-GCM under the home key's wrapping key, the pair as associated data). An encrypted
export seals each owner's payloads under that owner's data key; forgetting the owner destroys
the key, so every encrypted export made before loses the owner's payloads. It also holds, made by
the first encrypted export and wrapped the same way, the cover of a puncturable tree of per-position
keys (``domain.position_keys``): an erasure of rows or conversations punctures the positions it
redacted, so earlier exports lose those payloads too.

Every change takes a lock held across this process's threads and, with ``flock`` on
``keys/.keyring.lock``, across processes, then re-reads the file and replaces it durably: two
memories on one home never lose each other's keys, and a destroyed key is gone from the disk
before :meth:`Keyring.destroy` returns.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

try:
    import fcntl
except ImportError:  # not POSIX: the lock holds between the threads of one process only
    fcntl = None  # type: ignore[assignment]

from fermix_memory.adapters.durable_file import replace_durably
from fermix_memory.application.errors import StorageError
from fermix_memory.application.sealed_export import DataKey, PositionKeys
from fermix_memory.domain.position_keys import SEED_BYTES, BadCover, Cover, LeafKeys, cover_bytes, held, parse_cover
from fermix_memory.domain.position_keys import puncture as punctured

KEYRING_NAME = "keyring.json"
LOCK_NAME = ".keyring.lock"
FORMAT = "fermix-keyring"
FORMAT_VERSION = 1
NONCE_BYTES = 12
Pair = tuple[str, str]

_LOCKS: dict[Path, threading.RLock] = {}  # one per keys folder in this process
_LOCKS_GUARD = threading.Lock()


class KeyUnusable(ValueError):
    """A data key that does not unwrap (another home's key, an edited keyring), or a sealed
    layer that does not open under its key (edited, or sealed by another keyring)."""


@attrs.frozen
class _Wrapped:
    key_id: str
    nonce: bytes
    wrapped: bytes


@attrs.define
class _Contents:
    """The keyring file: its id ("" before it is made), the wrapped data keys and the wrapped
    cover of the tree of position keys (``key_id``: the tree's id), made by the first export."""

    keyring_id: str
    keys: dict[Pair, _Wrapped]
    tree: _Wrapped | None = None


def _lock(folder: Path) -> threading.RLock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(folder.resolve(), threading.RLock())


def _wrap_context(keyring_id: str, pair: Pair, key_id: str) -> bytes:
    return "\n".join(("fermix-keyring", "1", keyring_id, pair[0], pair[1], key_id)).encode("utf-8")


def _tree_context(keyring_id: str, tree_id: str) -> bytes:
    return "\n".join(("fermix-keyring", "1", keyring_id, "positions", tree_id)).encode("utf-8")


class Keyring:
    """The keyring in ``folder`` (a home's keys folder), whose data keys ``wrapping_key`` wraps."""

    def __init__(self, folder: Path, wrapping_key: bytes) -> None:
        if len(wrapping_key) != 32:
            raise ValueError("the wrapping key is 32 bytes")
        self.folder = folder
        self.path = folder / KEYRING_NAME
        self._wrapper = AESGCM(wrapping_key)
        self._unwrapped: dict[tuple[Pair, str], bytes] = {}

    # --- reading --------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.path.exists()

    @property
    def keyring_id(self) -> str:
        """The random id that names this keyring (made with the file, on first use)."""
        keyring_id = self._read().keyring_id
        if keyring_id:
            return keyring_id
        with self._changing() as contents:
            return contents.keyring_id

    def data_key(self, pair: Pair, create: bool = False) -> DataKey | None:
        """``pair``'s data key; ``None`` when it has none (never had one, or it was destroyed)
        unless ``create``, which makes one. :class:`KeyUnusable` when it does not unwrap."""
        keyring_id, keys = self._ids_and_keys()
        if pair not in keys and create:
            return self.data_keys([pair], create=True)[pair]
        if pair not in keys:
            return None
        return self._unwrap(keyring_id, pair, keys[pair])

    def data_keys(self, pairs: Iterable[Pair], create: bool = False) -> dict[Pair, DataKey]:
        """The data keys of ``pairs`` that have one (with ``create``: all, made as needed, in one
        change of the file)."""
        wanted = sorted(set(pairs))
        keyring_id, keys = self._ids_and_keys()
        if create and (not keyring_id or any(p not in keys for p in wanted)):
            with self._changing() as contents:
                keyring_id, keys = contents.keyring_id, contents.keys
                for pair in wanted:
                    if pair not in keys:
                        keys[pair] = self._wrap(keyring_id, pair, secrets.token_bytes(32))
        return {pair: self._unwrap(keyring_id, pair, keys[pair]) for pair in wanted if pair in keys}

    def pairs(self) -> list[Pair]:
        """The pairs that have a data key, sorted."""
        return sorted(self._read().keys)

    # --- the ExportKeys port ----------------------------------------------------------------------

    def destroy(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Destroy the data keys of ``pairs``; the pairs that had one. The file without them is
        on disk (fsynced, folder too) before this returns."""
        wanted = {(str(a), str(o)) for a, o in pairs}
        if not wanted & set(self._read().keys):
            return []
        with self._changing() as contents:
            keys = contents.keys
            gone = sorted(wanted & set(keys))
            for pair in gone:
                del keys[pair]
        for pair, key_id in list(self._unwrapped):
            if pair in wanted:
                del self._unwrapped[(pair, key_id)]
        return gone

    # --- position keys ----------------------------------------------------------------------------

    def position_keys(self, create: bool = False) -> PositionKeys | None:
        """The tree of per-position keys as it is now; ``None`` when none was made yet, unless
        ``create``, which makes it (a random root, nothing punctured)."""
        contents = self._read()
        if contents.tree is None and create:
            with self._changing() as contents:
                if contents.tree is None:
                    cover = Cover.whole(secrets.token_bytes(SEED_BYTES))
                    contents.tree = self._wrap_tree(contents.keyring_id, secrets.token_hex(8), cover)
        if contents.tree is None:
            return None
        return PositionKeys(contents.tree.key_id, LeafKeys(self._cover(contents)))

    def puncture(self, positions: Iterable[int]) -> int:
        """Destroy the keys of ``positions`` in the tree (none when no export made one); how
        many had one. The file without them is on disk (fsynced) before this returns."""
        wanted = sorted(set(positions))
        contents = self._read()
        if not wanted or contents.tree is None or not held(self._cover(contents), wanted):
            return 0
        with self._changing() as contents:
            tree = contents.tree
            assert tree is not None  # a tree, once made, stays
            cover = self._cover(contents)
            count = len(held(cover, wanted))
            contents.tree = self._wrap_tree(contents.keyring_id, tree.key_id, punctured(cover, wanted))
        return count

    def _wrap_tree(self, keyring_id: str, tree_id: str, cover: Cover) -> _Wrapped:
        nonce = secrets.token_bytes(NONCE_BYTES)
        return _Wrapped(tree_id, nonce, self._wrapper.encrypt(nonce, cover_bytes(cover),
                                                              _tree_context(keyring_id, tree_id)))

    def _cover(self, contents: _Contents) -> Cover:
        tree = contents.tree
        assert tree is not None
        try:
            return parse_cover(self._wrapper.decrypt(tree.nonce, tree.wrapped,
                                                     _tree_context(contents.keyring_id, tree.key_id)))
        except (InvalidTag, BadCover):
            raise KeyUnusable(f"the position keys in {self.path} do not unwrap with this home's key (another"
                              " home's key, or an edited keyring)") from None

    # --- sealing ----------------------------------------------------------------------------------

    def seal(self, key: DataKey, data: bytes, context: bytes) -> tuple[bytes, bytes]:
        """``(nonce, ciphertext)`` of ``data`` under ``key``, ``context`` as associated data."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        return nonce, AESGCM(key.key).encrypt(nonce, data, context)

    @staticmethod
    def open(key: DataKey, nonce: bytes, data: bytes, context: bytes) -> bytes:
        """What :meth:`seal` sealed; :class:`KeyUnusable` when it does not open (edited data,
        another key, another context)."""
        try:
            return AESGCM(key.key).decrypt(nonce, data, context)
        except (InvalidTag, ValueError):
            raise KeyUnusable("a sealed payload does not open under its key (edited, or sealed by another"
                              " keyring)") from None

    # --- the file ---------------------------------------------------------------------------------

    def _wrap(self, keyring_id: str, pair: Pair, key: bytes) -> _Wrapped:
        key_id = secrets.token_hex(8)
        nonce = secrets.token_bytes(NONCE_BYTES)
        return _Wrapped(key_id, nonce, self._wrapper.encrypt(nonce, key, _wrap_context(keyring_id, pair, key_id)))

    def _unwrap(self, keyring_id: str, pair: Pair, item: _Wrapped) -> DataKey:
        cached = self._unwrapped.get((pair, item.key_id))
        if cached is None:
            try:
                cached = self._wrapper.decrypt(item.nonce, item.wrapped, _wrap_context(keyring_id, pair, item.key_id))
            except InvalidTag:
                raise KeyUnusable(f"the data key of {pair[0]}/{pair[1]} in {self.path} does not unwrap with this"
                                  " home's key (another home's key, or an edited keyring)") from None
            self._unwrapped[(pair, item.key_id)] = cached
        return DataKey(item.key_id, cached)

    def _ids_and_keys(self) -> tuple[str, dict[Pair, _Wrapped]]:
        contents = self._read()
        return contents.keyring_id, contents.keys

    def _read(self) -> _Contents:
        """The file's contents (an empty keyring of id "" when there is no file yet)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _Contents("", {})
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read the keyring {self.path}: {exc}") from None
        try:
            return _parse(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"{self.path} is not a keyring ({exc})") from None

    @contextlib.contextmanager
    def _changing(self) -> Iterator[_Contents]:
        """Under the locks, the file as it is now (made when missing); written back durably
        when the block ends without error."""
        with _lock(self.folder), self._across_processes():
            contents = self._read()
            contents.keyring_id = contents.keyring_id or secrets.token_hex(16)
            yield contents
            try:
                replace_durably(self.path, _dump(contents), mode=0o600)
            except OSError as exc:
                raise StorageError(f"cannot write the keyring {self.path}: {exc.strerror or exc}") from None

    @contextlib.contextmanager
    def _across_processes(self) -> Iterator[None]:
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageError(f"cannot lock the keyring in {self.folder}: {exc.strerror or exc}") from None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the file lock


def _parse(item: Any) -> _Contents:
    if not isinstance(item, dict) or item.get("format") != FORMAT or item.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"not a {FORMAT} file of version {FORMAT_VERSION}")
    keyring_id = item["keyring"]
    if not isinstance(keyring_id, str) or len(keyring_id) != 32:
        raise ValueError("its keyring id is not 32 hex digits")
    keys: dict[Pair, _Wrapped] = {}
    for entry in item["keys"]:
        pair = (str(entry["agent"]), str(entry["owner"]))
        keys[pair] = _Wrapped(str(entry["id"]), bytes.fromhex(entry["nonce"]), bytes.fromhex(entry["wrapped"]))
    tree = item.get("positions")
    if tree is None:
        return _Contents(keyring_id, keys)
    try:
        wrapped = base64.b64decode(tree["wrapped"], validate=True)
    except binascii.Error:
        raise ValueError("the cover of its position keys is not base64") from None
    return _Contents(keyring_id, keys, _Wrapped(str(tree["tree"]), bytes.fromhex(tree["nonce"]), wrapped))


def _dump(contents: _Contents) -> bytes:
    entries = [{"agent": a, "owner": o, "id": w.key_id, "nonce": w.nonce.hex(), "wrapped": w.wrapped.hex()}
               for (a, o), w in sorted(contents.keys.items())]
    item: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION, "keyring": contents.keyring_id,
                            "keys": entries}
    if contents.tree is not None:
        tree = contents.tree
        item["positions"] = {"tree": tree.key_id, "nonce": tree.nonce.hex(),
                             "wrapped": base64.b64encode(tree.wrapped).decode("ascii")}
    return (json.dumps(item, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode("ascii")
