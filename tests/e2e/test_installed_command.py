"""Smoke tests of the real processes: the installed ``fermix`` console script (its exit codes and
stderr lines), the demo through it, and the layer folders installed under ``fermix_memory``.
Everything else about the command runs in-process (tests.cli_runner)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FERMIX = Path(sys.executable).parent / "fermix"


def installed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FERMIX), *args], capture_output=True, text=True, timeout=120, check=False)


def test_the_layer_folders_are_not_top_level_modules() -> None:
    probe = (
        "import importlib, json\n"
        "def imports(name):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        return False\n"
        "    return True\n"
        "names = ['domain', 'application', 'adapters', 'entrypoints', 'fermix_memory.domain.values']\n"
        "print(json.dumps({n: imports(n) for n in names}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd="/", check=True)
    assert json.loads(result.stdout) == {
        "domain": False, "application": False, "adapters": False, "entrypoints": False,
        "fermix_memory.domain.values": True,
    }


def test_the_installed_command_runs_the_demo(tmp_path: Path) -> None:
    result = installed("--home", str(tmp_path / "home"), "demo", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["imported"] == 12 and data["verified"] is True
    assert "- home_city: Berlin" in data["user_md"]


def test_the_installed_command_exit_codes(tmp_path: Path) -> None:
    assert installed("--version").returncode == 0
    assert installed("--help").returncode == 0
    missing = installed("--home", str(tmp_path / "nohome"), "events", "verify")
    assert missing.returncode == 1
    assert missing.stderr.startswith("fermix: error: ") and missing.stderr.count("\n") == 1
    assert "Traceback" not in missing.stderr
    usage = installed("no-such-command")
    assert usage.returncode == 1 and usage.stderr.startswith("fermix: error: ")
