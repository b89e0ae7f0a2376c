"""The ways in beside what a host would use instead, in one run: the OpenAI Agents SDK session
against ``agents.SQLiteSession`` (``peers_agents.py``) and the LangGraph store against
LangGraph's ``SqliteStore`` (``peers_langgraph.py``, where present).

Run from the repository root::

    .venv/bin/python benchmarks/peers.py --quick            # well under a minute each
    .venv/bin/python benchmarks/peers.py --only agents      # one of them

The last line of stdout is one JSON object: ``{"agents": {...}, "langgraph": {...}}`` (progress
goes to stderr).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # storage figures: no model (ADR-0044)

PEERS = {"agents": "peers_agents", "langgraph": "peers_langgraph"}


def run(quick: bool = False, only: str | None = None) -> dict[str, Any]:
    """Each peer module's ``run(quick)`` whose file is here (``only``: that one), by its name."""
    figures: dict[str, Any] = {}
    for name, module in PEERS.items():
        if only not in (None, name):
            continue
        if not (HERE / f"{module}.py").exists():
            figures[name] = {"skipped": f"benchmarks/{module}.py is not there"}
            continue
        print(f"peers: {name}", file=sys.stderr, flush=True)
        figures[name] = importlib.import_module(module).run(quick)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    p.add_argument("--only", choices=sorted(PEERS), help="run one peer comparison only")
    args = p.parse_args(argv)
    print(json.dumps(run(args.quick, args.only)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
