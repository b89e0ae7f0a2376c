"""Every event kind has a projection entry (checked here, not by an assert run at import)."""

from __future__ import annotations

import ast
from pathlib import Path

from fermix_memory.adapters.sql.projections import PROJECTIONS
from fermix_memory.domain import events as ev

ROOT = Path(__file__).resolve().parents[2]


def test_every_event_kind_has_a_projection_entry() -> None:
    assert set(PROJECTIONS) == set(ev.ALL_EVENTS)


def test_no_module_asserts_at_import_time() -> None:
    """An ``assert`` at module level vanishes under ``python -O`` and fails imports otherwise."""
    found = []
    for layer in ("domain", "application", "adapters", "entrypoints", "facade"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in tree.body if isinstance(node, ast.Assert)]
    assert found == []
