"""Moving a home (ADR-0030): ``events export`` and ``events import`` of a large home, beside
``events replay --into`` on the same log. Every figure comes from THIS run.

For each size (``--messages``, default 5,000 and 20,000) a source home is built through the
product (history import over 40 agent/owner pairs, then memory writes with their prompt-file
revisions, as ``benchmarks/replay.py`` builds it). Then, side by side on that log:

* **export** — ``MemorySystem.export_events`` written to a file (what ``fermix events export``
  does);
* **import** — ``MemorySystem.import_events`` of that file into a new home: the whole file
  checked (chain, digests, every payload through the codec), then appended in batches with
  the live projection functions, then the prompt files rendered;
* **replay** — ``MemorySystem.replay_into`` (``fermix events replay --into``): the log folded
  into a new database with indexes built once at the end, checksums compared.

Each step runs twice: once timed, once under ``tracemalloc`` for its peak of Python memory
(the figure that must not grow with the log: both are streams). The import's copy is checked:
same head, same projection checksums (``verify``) and a byte-identical re-export.

Run (from the repository root)::

    .venv/bin/python benchmarks/move_home.py --quick    # smoke run (1,000 messages)
    .venv/bin/python benchmarks/move_home.py            # 5,000 and 20,000 messages

The LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem

sys.path.insert(0, str(Path(__file__).parent))
from replay import build_source  # the same source as the replay benchmark


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def measured(step: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(seconds, peak MiB of Python allocations, result)``: the time of one untraced run, the
    peak of a second run under tracemalloc (the step must be repeatable)."""
    start = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        step()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak / 2**20, result


def file_lines(path: Path) -> Callable[[], Iterator[str]]:
    def lines() -> Iterator[str]:
        with path.open("rb") as fh:
            for raw in fh:
                yield raw.decode("utf-8")
    return lines


def one_size(root: Path, messages: int, facts: int) -> dict[str, Any]:
    source = root / f"source-{messages}"
    progress(f"building a home with {messages:,} messages ...")
    build_source(source, messages, facts)
    event_file = root / f"events-{messages}.jsonl"
    runs = iter(range(1000))

    def export() -> int:
        with MemorySystem.open(source, readonly=True) as memory, event_file.open("wb") as fh:
            for line in memory.export_events():
                fh.write(line.encode("utf-8"))
            return memory.head().position

    def import_() -> Path:
        target = root / f"imported-{messages}-{next(runs)}"
        with MemorySystem.open(target) as memory:
            memory.import_events(file_lines(event_file))
        return target

    def replay() -> dict[str, Any]:
        with MemorySystem.open(source, readonly=True) as memory:
            return memory.replay_into(root / f"replayed-{messages}-{next(runs)}")

    progress("export ...")
    export_s, export_mib, events = measured(export)
    progress("import ...")
    import_s, import_mib, target = measured(import_)
    progress("replay --into ...")
    replay_s, replay_mib, replayed = measured(replay)

    with MemorySystem.open(source, readonly=True) as memory:
        live = memory.verify()
        head = memory.head()
    with MemorySystem.open(target) as memory:
        copy = memory.verify()
        same_head = memory.head() == head
        again = b"".join(line.encode("utf-8") for line in memory.export_events())
    return {
        "messages": messages, "events": events, "file_mib": round(event_file.stat().st_size / 2**20, 2),
        "export_s": round(export_s, 3), "export_events_per_s": round(events / export_s),
        "export_peak_mib": round(export_mib, 2),
        "import_s": round(import_s, 3), "import_events_per_s": round(events / import_s),
        "import_peak_mib": round(import_mib, 2),
        "replay_s": round(replay_s, 3), "replay_events_per_s": round(events / replay_s),
        "replay_peak_mib": round(replay_mib, 2),
        "import_vs_replay": round(replay_s / import_s, 2),
        "copy_verifies": copy.ok, "same_head": same_head,
        "same_checksums": copy.table_checksums == live.table_checksums and bool(live.table_checksums),
        "byte_identical_reexport": again == event_file.read_bytes(), "replay_identical": replayed["identical"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[5_000, 20_000])
    parser.add_argument("--facts", type=int, default=400, help="memory writes after the messages")
    parser.add_argument("--quick", action="store_true", help="1,000 messages, 50 facts")
    args = parser.parse_args(argv)
    sizes, facts = ([1_000], 50) if args.quick else (args.messages, args.facts)
    with tempfile.TemporaryDirectory(prefix="fermix-move-") as tmp:
        rows = [one_size(Path(tmp), n, facts) for n in sizes]
    print(f"{'messages':>9} {'events':>7} {'file MiB':>8} | {'export s':>8} {'ev/s':>7} {'MiB':>6} | "
          f"{'import s':>8} {'ev/s':>7} {'MiB':>6} | {'replay s':>8} {'ev/s':>7} {'MiB':>6} | copy ok")
    for r in rows:
        print(f"{r['messages']:>9,} {r['events']:>7,} {r['file_mib']:>8} | {r['export_s']:>8} "
              f"{r['export_events_per_s']:>7,} {r['export_peak_mib']:>6} | {r['import_s']:>8} "
              f"{r['import_events_per_s']:>7,} {r['import_peak_mib']:>6} | {r['replay_s']:>8} "
              f"{r['replay_events_per_s']:>7,} {r['replay_peak_mib']:>6} | "
              f"{r['copy_verifies'] and r['same_checksums'] and r['byte_identical_reexport']}")
    ok = all(r["copy_verifies"] and r["same_head"] and r["same_checksums"] and r["byte_identical_reexport"]
             for r in rows)
    print(json.dumps({"benchmark": "move_home", "ok": ok, "sizes": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
