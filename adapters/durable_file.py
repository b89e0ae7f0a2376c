"""Replacing (or creating) a small file atomically and durably: a temp file in the same folder,
fsync, ``os.replace`` (or ``os.link``, which never replaces), then an fsync of the folder, so a
crash or a concurrent reader finds the old file or the new one, never an empty or half-written one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def replace_durably(target: Path, data: bytes, *, mode: int | None = None) -> None:
    """Make ``target`` hold ``data`` (``mode``: the new file's permissions, else mkstemp's 0600).
    Raises ``OSError``; the temp file is removed on failure."""
    _written(target, data, mode, lambda tmp: os.replace(tmp, target))


def create_durably(target: Path, data: bytes, *, mode: int | None = None) -> None:
    """Make ``target`` hold ``data`` unless it exists (``FileExistsError``, the file left as it
    is): it appears whole, so a process reading it meanwhile never sees it empty or half written."""
    def link(tmp: str) -> None:
        try:
            os.link(tmp, target)  # fails if the target exists: never a replace
        finally:
            Path(tmp).unlink(missing_ok=True)

    _written(target, data, mode, link)


def _written(target: Path, data: bytes, mode: int | None, place: Callable[[str], object]) -> None:
    """``data`` in a synced temp file beside ``target``, put in place by ``place(temp path)``,
    then the folder synced; the temp file is removed on failure."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.chmod(tmp, mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        place(tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_folder(target.parent)


def fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (its directory entry on disk); a no-op where folders
    cannot be opened (Windows)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
