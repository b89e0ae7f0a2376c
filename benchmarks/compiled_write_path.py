"""What compiling the write path's Python to C would do to a LangGraph ``put`` (ADR-0111).

The package is copied twice into folders laid out as installed (``fermix_memory/`` and its layers);
in one of them the modules a put runs through are compiled with mypyc (the mypy of the ``[dev]``
extra; a C compiler and Python's headers are needed, and the build takes a minute or two). Child
processes then run ``write_floor.py``'s put (ours, ours with its writer running no statement, and
``SqliteStore``) against each copy in turn, so the only difference between the two is the
compilation. Modules mypyc cannot compile as written (a class built on ``list``, lone surrogates
in a literal) and classes it must leave to the interpreter (``attrs`` classes, the store built on
LangGraph's ``BaseStore``) stay interpreted in both.

Run from the repository root::

    .venv/bin/python benchmarks/compiled_write_path.py --quick

The last line of stdout is one JSON object of the figures (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# The modules a put runs through that mypyc compiles as they are (package-relative paths).
COMPILED = (
    "domain/admission.py", "domain/log_chain.py", "domain/expiry.py",
    "application/memory_writes.py", "application/caches.py", "application/shown_prompt_files.py",
    "application/prompt_files.py", "application/log_position.py", "application/index_upkeep.py",
    "application/streams.py",
    "adapters/sql/memory_payload.py", "adapters/sql/codec.py", "adapters/sql/projections.py",
    "adapters/sql/transaction.py", "adapters/sql/head.py",
    "adapters/sqlite/transaction.py", "adapters/sqlite/group_commit.py", "adapters/sqlite/event_store.py",
)

# A child: the copy at argv[1] is the package (the editable install's finder set aside), and it
# prints write_floor's put figures.
CHILD = """
import json, sys, tempfile
from pathlib import Path
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (getattr(f, "__module__", "") or "")]
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import write_floor
import fermix_memory.domain.admission as admission
with tempfile.TemporaryDirectory(prefix="fermix-compiled-") as tmp:
    figures = write_floor.langgraph_put(Path(tmp), int(sys.argv[3]), int(sys.argv[4]))
print(json.dumps({"compiled": not admission.__file__.endswith(".py"), **figures}))
"""


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _copy(into: Path) -> Path:
    """The package laid out as installed under ``into`` (the facade's files at its top)."""
    package = into / "fermix_memory"
    package.mkdir(parents=True)
    for f in (ROOT / "facade").iterdir():
        if f.is_file():
            shutil.copy(f, package / f.name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so")
    for layer in ("domain", "application", "adapters", "entrypoints"):
        shutil.copytree(ROOT / layer, package / layer, ignore=ignore)
    return into


def _compile(tree: Path) -> None:
    mypyc = Path(sys.executable).parent / "mypyc"
    if not mypyc.exists():
        raise SystemExit("mypyc is not installed here: install the [dev] extra")
    _say(f"compiling {len(COMPILED)} modules with mypyc (a minute or two)")
    done = subprocess.run(
        [str(mypyc), "--strict", "--follow-imports=silent", "--config-file", str(ROOT / "pyproject.toml"),
         *(f"fermix_memory/{m}" for m in COMPILED)],
        cwd=tree, env={**os.environ, "MYPYPATH": str(tree)},
        capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mypyc failed (a C compiler and Python's headers are needed):\n{done.stdout[-3000:]}"
                         f"{done.stderr[-3000:]}")


def _put(tree: Path, slices: int, per_slice: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(ROOT / "benchmarks"), str(slices),
                          str(per_slice)], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run(quick: bool = False) -> dict[str, Any]:
    rounds, slices, per_slice = (2, 7, 40) if quick else (3, 15, 100)
    with tempfile.TemporaryDirectory(prefix="fermix-compiled-trees-") as tmp:
        trees = {"interpreted": _copy(Path(tmp) / "interpreted"), "compiled": _copy(Path(tmp) / "compiled")}
        _compile(trees["compiled"])
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for k in range(rounds):
            for name, tree in trees.items():
                figures = _put(tree, slices, per_slice)
                if figures["compiled"] != (name == "compiled"):
                    raise SystemExit(f"the {name} copy did not run as {name}")
                runs[name].append(figures)
                ms = figures["put_ms"]
                _say(f"  round {k + 1}, {name:>11}: ours {ms['ours']:.4f} ms, its Python {ms['python']:.4f} ms,"
                     f" peer {ms['peer']:.4f} ms -> {figures['put_ours_to_peer']:.3f}")
    out: dict[str, Any] = {"benchmark": "compiled_write_path", "quick": quick, "rounds": rounds,
                           "slices": slices, "puts_per_slice": per_slice, "compiled_modules": len(COMPILED)}
    for name, each in runs.items():
        for side in ("ours", "python", "peer"):
            out[f"{name}_{side}_ms"] = round(statistics.median(f["put_ms"][side] for f in each), 4)
        out[f"{name}_put_to_peer"] = round(statistics.median(f["put_ours_to_peer"] for f in each), 3)
    out["compiled_python_to_interpreted"] = round(out["compiled_python_ms"] / out["interpreted_python_ms"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two rounds of fewer slices")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
