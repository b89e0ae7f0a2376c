"""Running one of the repository's CI scripts (``.ci/<name>``) on a tree laid out by a test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CI = Path(__file__).resolve().parents[2] / ".ci"


def run_check(name: str, root: Path) -> subprocess.CompletedProcess[str]:
    """``.ci/<name> ROOT``, its output captured."""
    return subprocess.run([sys.executable, str(CI / name), str(root)], capture_output=True, text=True, check=False)


def write(root: Path, rel: str, text: str) -> None:
    """A file ``rel`` under ``root`` holding ``text`` (its folders made)."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
