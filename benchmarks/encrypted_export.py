"""Encrypted exports (ADR-0081): what sealing each owner's payloads costs beside a plain export,
and opening them beside a plain import. Every figure comes from THIS run.

A source home is built as ``benchmarks/replay.py`` builds it (history import over 40
agent/owner pairs, memory writes with their prompt-file revisions). Then, side by side on that
log, each step ``--repeat`` times (the best time kept):

* **plain export** / **encrypted export** — ``MemorySystem.export_events()`` and
  ``export_events(encrypted=True)`` written to a file (the encrypted one reads the log twice:
  each owner's content as ``forget`` finds it, then the lines);
* **plain import** / **encrypted import** — ``import_events`` of each file into a new home (every
  sealed payload opened twice: on the check and on the copy);
* **owners-only export / import** — the encrypted export without the outer layer under each
  payload's position key (the keyring's tree of position keys left out), to price that layer:
  ``position_layer_export_ratio`` and ``position_layer_import_ratio`` are encrypted / owners-only.

The encrypted import's copy is checked: it verifies and re-exports (plain) to the plain file's
bytes. Peak Python memory of each export is taken under ``tracemalloc`` (the encrypted one keeps
a map of which pairs own which position: it grows with the log).

Run (from the repository root)::

    .venv/bin/python benchmarks/encrypted_export.py --quick   # 1,000 messages
    .venv/bin/python benchmarks/encrypted_export.py           # 5,000 messages

The LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from fermix_memory import MemorySystem
from fermix_memory.adapters.home_keys import keys_folder
from fermix_memory.adapters.keyring import Keyring

sys.path.insert(0, str(Path(__file__).parent))
from move_home import file_lines
from replay import build_source  # the same source as the replay benchmark


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def best(step: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_mib(step: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def run(root: Path, messages: int, facts: int, repeat: int) -> dict[str, Any]:
    source = root / "source"
    progress(f"building a home with {messages:,} messages ...")
    build_source(source, messages, facts)
    files = {"plain": root / "plain.jsonl", "encrypted": root / "encrypted.jsonl",
             "owners_only": root / "owners_only.jsonl"}
    runs = iter(range(1000))

    def export(kind: str) -> Callable[[], None]:
        def step() -> None:
            without = mock.patch.object(Keyring, "position_keys", lambda self, create=False: None)
            with MemorySystem.open(source, readonly=True) as memory, files[kind].open("wb") as fh, \
                    without if kind == "owners_only" else contextlib.nullcontext():
                for line in memory.export_events(encrypted=kind != "plain"):
                    fh.write(line.encode("utf-8"))
        return step

    def import_(kind: str) -> Callable[[], Path]:
        def step() -> Path:
            target = root / f"copy-{next(runs)}"
            with MemorySystem.open(target) as memory:
                memory.import_events(file_lines(files[kind]), keys=keys_folder(source))
            return target
        return step

    figures: dict[str, Any] = {"messages": messages}
    for kind in ("plain", "owners_only", "encrypted"):
        progress(f"{kind} export ...")
        figures[f"{kind}_export_s"] = round(best(export(kind), repeat), 3)
        figures[f"{kind}_export_peak_mib"] = round(peak_mib(export(kind)), 2)
        progress(f"{kind} import ...")
        figures[f"{kind}_import_s"] = round(best(import_(kind), repeat), 3)
        figures[f"{kind}_file_mib"] = round(files[kind].stat().st_size / 2**20, 2)
    with MemorySystem.open(source, readonly=True) as memory:
        figures["events"] = memory.head().position
    copy = import_("encrypted")()
    with MemorySystem.open(copy) as memory:
        figures["copy_verifies"] = memory.verify().ok
        again = b"".join(line.encode("utf-8") for line in memory.export_events())
    figures["copy_is_the_source"] = again == files["plain"].read_bytes()
    figures["export_ratio"] = round(figures["encrypted_export_s"] / figures["plain_export_s"], 2)
    figures["import_ratio"] = round(figures["encrypted_import_s"] / figures["plain_import_s"], 2)
    for step in ("export", "import"):
        figures[f"position_layer_{step}_ratio"] = round(
            figures[f"encrypted_{step}_s"] / figures[f"owners_only_{step}_s"], 2)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--facts", type=int, default=400, help="memory writes after the messages")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1,000 messages, 50 facts")
    args = parser.parse_args(argv)
    messages, facts = (1_000, 50) if args.quick else (args.messages, args.facts)
    with tempfile.TemporaryDirectory(prefix="fermix-sealed-") as tmp:
        figures = run(Path(tmp), messages, facts, args.repeat)
    progress(f"export: plain {figures['plain_export_s']} s, encrypted {figures['encrypted_export_s']} s"
             f" (x{figures['export_ratio']}); import: plain {figures['plain_import_s']} s, encrypted"
             f" {figures['encrypted_import_s']} s (x{figures['import_ratio']}); the position layer: export"
             f" x{figures['position_layer_export_ratio']}, import x{figures['position_layer_import_ratio']}")
    ok = figures["copy_verifies"] and figures["copy_is_the_source"]
    print(json.dumps({"benchmark": "encrypted_export", "ok": ok, **figures}))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
