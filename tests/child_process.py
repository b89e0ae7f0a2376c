"""A child process killed at a chosen moment: the crash tests' one way to run a writer, read
what it acknowledges, and SIGKILL it as soon as it has said enough."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.waits import HANG_GUARD_S


def kill_when(args: list[str], enough: Callable[[bytes], bool], what: str, **popen: Any) -> bytes:
    """Run ``args``, read its stdout until ``enough(out)`` holds, SIGKILL it at once (it must still
    be running) and return all it printed, what was still in the pipe included (acknowledged
    before the kill). ``what`` names the awaited output for a failure; ``popen``: more
    ``subprocess.Popen`` arguments (``stdin``, ``env``, ``cwd``)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)
    out = b""
    deadline = time.monotonic() + HANG_GUARD_S
    try:
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        while not enough(out):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"the child never printed {what} (only {out[-500:]!r})")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    err = proc.stderr.read().decode(errors="replace")  # type: ignore[union-attr]
                    pytest.fail(f"the child exited early (rc={proc.wait()}): {err[-2000:]}")
                out += chunk
        assert proc.poll() is None, "the child must still be running when it is killed"
        os.kill(proc.pid, signal.SIGKILL)
        out += proc.stdout.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    return out
