"""Prompt files on disk: safe paths under the home folder and atomic writes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import string
import threading
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: the lock holds between the threads of one process only
    fcntl = None  # type: ignore[assignment]

from fermix_memory.adapters.durable_file import replace_durably
from fermix_memory.application.errors import StorageError

FILE_NAMES = {"user_md": "USER.md", "memory_md": "MEMORY.md"}
_MAX_SEGMENT = 120
# Kept as they are; everything else (dots, upper case, separators, non-ASCII) becomes %XX.
_KEEP = frozenset(string.ascii_lowercase + string.digits + "-_~")


def path_segment(identifier: str) -> str:
    """A file-name-safe, injective spelling of an id, also on case-insensitive file systems.

    Percent-encoding with no safe characters (dots and upper-case letters too, so ``Bob`` and
    ``bob`` never share a folder on macOS or Windows), so no id can be ``..``, contain a
    separator or a NUL. Long ids become ``%%`` + a SHA-256 prefix: a form ``quote`` never
    produces, so the two kinds cannot collide.
    """
    encoded = "".join(c if c in _KEEP else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in identifier)
    if not encoded or len(encoded) > _MAX_SEGMENT:
        return "%%" + hashlib.sha256(identifier.encode("utf-8")).hexdigest()[:40]
    return encoded


class PromptFileFolder:
    """``<home>/memory/<agent>/<owner>/USER.md`` and ``MEMORY.md`` (one folder per owner)."""

    def __init__(self, home: Path) -> None:
        self.root = (home / "memory").resolve()
        # One lock per folder: a removal never runs between a write's mkdir, temp file and rename.
        self._locks: dict[Path, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        # ``syncing`` across the whole tree: this process's threads queue on the RLock, other
        # processes on the file lock, which the outermost holder takes (``_held`` deep).
        self._tree = threading.RLock()
        self._held = 0

    def _lock(self, folder: Path) -> threading.RLock:
        with self._locks_guard:
            return self._locks.setdefault(folder, threading.RLock())

    @contextlib.contextmanager
    def syncing(self, agent_id: str, owner_id: str) -> Iterator[None]:
        """Held while an owner's files are made to match their revisions: no other thread, and
        no other process on this home, writes or removes prompt files meanwhile. Without it a
        process that read an older revision could write it over a newer one, or write back the
        files of an owner another process has just forgotten."""
        folder = self.path(agent_id, owner_id, "user_md").parent
        with self._tree, self._across_processes(), self._lock(folder):
            yield

    @contextlib.contextmanager
    def _across_processes(self) -> Iterator[None]:
        """An exclusive ``flock`` on ``memory/.lock`` (an empty file: it names no one), taken by
        the outermost holder of the tree lock only (a second ``flock`` would wait for itself)."""
        fd = -1
        if self._held == 0 and fcntl is not None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            except OSError:
                fd = -1  # a read-only home: nothing here writes files
        self._held += 1
        try:
            if fd >= 0:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            self._held -= 1
            if fd >= 0:
                os.close(fd)  # releases the file lock

    def path(self, agent_id: str, owner_id: str, name: str) -> Path:
        target = self.root / path_segment(agent_id) / path_segment(owner_id) / FILE_NAMES[name]
        # Belt and braces: the encoding already guarantees this.
        if self.root not in target.resolve().parents:
            raise StorageError(f"refusing to write outside {self.root}")
        return target

    def read(self, agent_id: str, owner_id: str, name: str) -> str | None:
        try:
            return self.path(agent_id, owner_id, name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None  # missing, unreadable or damaged: the caller rewrites it from the log

    def write(self, agent_id: str, owner_id: str, name: str, content: str) -> Path:
        """Write atomically: temp file in the same folder, fsync, ``os.replace``, fsync folder."""
        target = self.path(agent_id, owner_id, name)
        with self._lock(target.parent):
            return self._write(target, content)

    def _write(self, target: Path, content: str) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)  # our derived file's place, taken by a folder: the file wins
        replace_durably(target, content.encode("utf-8"))
        return target

    def discard(self, agent_id: str, owner_id: str, name: str) -> bool:
        """Delete one prompt file (a file without a current revision: its text was erased)."""
        target = self.path(agent_id, owner_id, name)
        with self._lock(target.parent):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
                return True
            if target.exists() or target.is_symlink():
                target.unlink()
                return True
            return False

    def remove(self, agent_id: str, owner_id: str) -> bool:
        """Delete the owner's prompt files (and the folder, once empty of anything else)."""
        with self.syncing(agent_id, owner_id):
            return self._remove(self.path(agent_id, owner_id, "user_md").parent)

    def _remove(self, folder: Path) -> bool:
        found = False
        for name in FILE_NAMES.values():
            target = folder / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
                found = True
            elif target.exists() or target.is_symlink():
                target.unlink()
                found = True
        # A temp file here is a write that died midway (writes of this process hold the lock):
        # it holds the owner's text too.
        for leftover in folder.glob(".*.tmp"):
            leftover.unlink(missing_ok=True)
            found = True
        with contextlib.suppress(OSError):  # absent, or holds something that is not ours: left alone
            folder.rmdir()
        return found
