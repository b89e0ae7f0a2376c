"""The CI size check (.ci/sizes): names every module over 400 lines and every function over 60,
in the four layers only."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from tests.unit.ci_script import run_check as run_ci_script
from tests.unit.ci_script import write

run_check = partial(run_ci_script, "sizes")


def function(name: str, lines: int, indent: str = "") -> str:
    """A function of exactly ``lines`` lines, its ``def`` line included."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
    return f"{indent}def {name}() -> int:\n{body}{indent}    return 0\n"


def test_within_the_limits_passes(tmp_path: Path) -> None:
    write(tmp_path, "domain/rules.py", function("longest", 60) + "\n" * (400 - 60))
    write(tmp_path, "application/use.py", "class Service:\n" + function("method", 60, "    "))

    result = run_check(tmp_path)

    assert result.returncode == 0, result.stdout
    assert "0 over the limits" in result.stdout


def test_each_limit_is_reported_with_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, "domain/rules.py", "x = 1\n" * 401)
    write(tmp_path, "adapters/store.py", "import os\n\n" + function("long", 61))
    write(tmp_path, "entrypoints/api/app.py", "class App:\n    async " + function("run", 62, "    ").lstrip())
    write(tmp_path, "application/outer.py", "def outer() -> None:\n" + function("inner", 61, "    "))
    write(tmp_path, "tests/test_long.py", function("test_long", 100) + "x = 1\n" * 500)  # outside the layers

    result = run_check(tmp_path)

    assert result.returncode == 1
    out = result.stdout
    assert "domain/rules.py:1: module has 401 lines (at most 400)" in out
    assert "adapters/store.py:3: function long has 61 lines (at most 60)" in out
    assert "entrypoints/api/app.py:2: function run has 62 lines (at most 60)" in out
    assert "application/outer.py:1: function outer has 62 lines (at most 60)" in out
    assert "application/outer.py:2: function inner has 61 lines (at most 60)" in out
    assert "tests/" not in out
    assert "5 over the limits" in out
