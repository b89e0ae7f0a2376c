"""Every SQL dialect provides the same set (ADR-0056): each module :data:`REQUIREMENTS` names,
with a class derived from the core's base and the names asked for."""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import pytest

from fermix_memory.adapters.sql.dialect import DIALECTS, REQUIREMENTS, Requirement

pytest.importorskip("psycopg")  # the PostgreSQL dialect's driver (the [postgres] extra)


def _base(requirement: Requirement) -> type:
    module, name = requirement.base.split(":")
    base = getattr(importlib.import_module(module), name)
    assert inspect.isclass(base)
    return base


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("requirement", REQUIREMENTS, ids=lambda r: r.module)
def test_a_dialect_provides_what_the_core_asks(dialect: str, requirement: Requirement) -> None:
    module = importlib.import_module(f"fermix_memory.adapters.{dialect}.{requirement.module}")
    missing = [name for name in requirement.names if not hasattr(module, name)]
    assert not missing, f"{dialect}.{requirement.module} lacks {missing} ({requirement.why})"
    if requirement.base:
        base = _base(requirement)
        derived = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if issubclass(c, base) and c is not base and c.__module__ == module.__name__]
        assert derived, f"{dialect}.{requirement.module} defines no {base.__name__} ({requirement.why})"


def test_the_dialects_provide_the_same_modules() -> None:
    provided = {d: {r.module for r in REQUIREMENTS
                    if importlib.util.find_spec(f"fermix_memory.adapters.{d}.{r.module}") is not None}
                for d in DIALECTS}
    assert all(modules == provided[DIALECTS[0]] for modules in provided.values()), provided
