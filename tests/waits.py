"""How long a test waits before it calls a wait a hang.

A guard, never a measure: a test waits for a condition (a thread ends, a file appears, a child
exits), and this bound only turns a real hang into a failure instead of a stuck suite. It is
minutes long on purpose: a loaded CI machine may take many times the usual time, and a limit it
can reach would fail a correct program. What must finish in bounded time is a benchmark's to
measure (benchmarks/), not a test's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

HANG_GUARD_S = 900.0


def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; only a hang (:data:`HANG_GUARD_S`) fails it."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {HANG_GUARD_S} s: {what}"
        time.sleep(0.01)
