"""Where the suite keeps its scratch files: in memory (``/dev/shm``) when the machine has it with
room to spare. Test homes, SQLite files and the test PostgreSQL server's data need no disk; on a
virtual disk each fsync and each file copy costs several times what it costs in memory, and a
crash test kills processes, not the machine, so nothing a test checks depends on the disk."""

from __future__ import annotations

import os
from pathlib import Path

IN_MEMORY = Path("/dev/shm")
ROOM = 2 << 30  # free bytes it must have: the test homes of a run, a few databases and the WAL


def in_memory_folder() -> Path | None:
    """``/dev/shm`` when it is there, writable and roomy, else ``None`` (the usual temp folder)."""
    try:
        stats = os.statvfs(IN_MEMORY)
    except OSError:
        return None
    roomy = stats.f_bavail * stats.f_frsize >= ROOM
    return IN_MEMORY if roomy and os.access(IN_MEMORY, os.W_OK) else None
