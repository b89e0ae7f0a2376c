"""Smoke tests of the real processes: the installed ``fermix`` console script (its exit codes and
stderr lines), the demo through it, and the layer folders installed under ``fermix_memory``.
Everything else about the command runs in-process (tests.cli_runner)."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.waits import HANG_GUARD_S

FERMIX = Path(sys.executable).parent / "fermix"
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "fermix_memory"


def installed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FERMIX), *args], capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)


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


def installed_layout(target: Path) -> Path:
    """The package laid out as ``pip install .`` installs it (from pyproject's package-dir
    mapping), made of symlinks to the source folders."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    top = target / PACKAGE
    top.mkdir(parents=True)
    for entry in (ROOT / mapping[PACKAGE]).iterdir():
        (top / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        if name != PACKAGE:
            (target / name.replace(".", "/")).symlink_to(ROOT / folder)
    return target


def test_no_folder_of_the_repository_is_named_like_the_package() -> None:
    """Run from the clone's root, a folder named ``fermix_memory`` there would be imported in
    place of the installed package (the current directory comes first on ``sys.path``)."""
    assert not (ROOT / PACKAGE).exists()


def test_the_package_runs_from_the_clone_root_installed_either_way(tmp_path: Path) -> None:
    # As installed by `pip install -e .` (this environment), started from the clone's root.
    editable = subprocess.run([sys.executable, "-m", PACKAGE, "--version"], capture_output=True, text=True,
                              cwd=ROOT, timeout=HANG_GUARD_S, check=False)
    assert editable.returncode == 0 and editable.stdout.startswith("fermix "), editable.stderr
    # As installed by `pip install .`: the package copied into a folder on sys.path, no editable
    # finder (-S skips the .pth files; the dependencies come from site-packages on PYTHONPATH).
    site_dir = installed_layout(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site_dir), *site.getsitepackages()])}
    copied = subprocess.run([sys.executable, "-S", "-m", PACKAGE, "--version"], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=HANG_GUARD_S, check=False)
    assert copied.returncode == 0 and copied.stdout.startswith("fermix "), copied.stderr
    script = "import fermix_memory, fermix_memory.application; print(fermix_memory.__file__)"
    imported = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=HANG_GUARD_S, check=False)
    assert imported.returncode == 0 and imported.stdout.startswith(str(site_dir)), imported.stderr


def test_every_package_folder_is_listed_for_pip_install() -> None:
    """``pip install .`` installs the packages pyproject lists, no more: a package folder left off
    the list is missing from a non-editable install, though every editable test passes."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = set()
    for name, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                parts = init.parent.relative_to(ROOT / folder).parts
                found.add(".".join((name, *parts)))
    assert found == set(setuptools["packages"])
