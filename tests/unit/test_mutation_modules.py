"""The mutation tool's list of modules (tools/mutation/modules.toml) covers the whole domain:
every module with a mutation site names the tests a run uses, the equivalent mutants it lists
(for the modules outside domain/ too) still exist, every module it lists exists, and the floor
every module must reach is the 90% of ADR-0013."""

from __future__ import annotations

import functools
import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "tools/mutation/modules.toml").read_text(encoding="utf-8"))
DOMAIN = {str(p.relative_to(ROOT)) for p in (ROOT / "domain").glob("*.py")}
# The domain, and the modules listed outside it (the rules model's extractor, once in domain/).
COVERED = sorted(DOMAIN | {module for module in CONFIG["modules"] if (ROOT / module).is_file()})


@functools.cache
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools/mutation/mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_tool"] = module  # its dataclasses resolve their annotations there
    spec.loader.exec_module(module)
    return module


def test_the_floor_is_90_percent() -> None:
    assert CONFIG["floor"] == 90.0
    assert tool().floor() == 90.0


@pytest.mark.parametrize("module", COVERED)
def test_every_module_with_a_mutation_site_names_its_tests(module: str) -> None:
    sites = tool().mutants((ROOT / module).read_text(encoding="utf-8"))
    entry = CONFIG["modules"].get(module)
    if not sites:
        return
    assert entry is not None, f"{module} has {len(sites)} mutants and no entry in modules.toml"
    assert entry["tests"], module
    for test in entry["tests"]:
        assert (ROOT / test).is_file(), f"{module}: {test} does not exist"


@pytest.mark.parametrize("module", COVERED)
def test_the_equivalent_mutants_listed_still_exist(module: str) -> None:
    entry = CONFIG["modules"].get(module, {})
    wording = frozenset(entry.get("wording", []))
    keys = {m.key for m in tool().mutants((ROOT / module).read_text(encoding="utf-8"), wording)}
    assert [e["mutant"] for e in entry.get("equivalent", []) if e["mutant"] not in keys] == []


def test_every_module_listed_exists() -> None:
    assert [module for module in CONFIG["modules"] if not (ROOT / module).is_file()] == []
