"""Start-up of the ``fermix`` command: how long short commands take in a fresh interpreter.

Each command runs ``--rounds`` times as ``python -m fermix_memory ...`` on a small home (one
message, one memory row): ``--help``, the read-only ``memory list``, ``memory show``,
``resource list``, ``history show`` and ``events verify``, and ``memory restore`` (a write). Each
command's CPU time (user + system, of the child process; the median of ``--rounds`` runs) is
measured beside that of its raw counterparts, a bare ``python -c "import apsw"`` and ``python -c
"import sqlite3"``, run alternately in the same loop, and printed as a ratio to ``import apsw``.
Beside each, whether the process loaded tiktoken's tables (``tiktoken`` in ``sys.modules``): only
commands that count tokens should.

``memory list (whole memory)`` is the same ``memory list`` opened as before ADR-0063, through the
whole ``MemorySystem`` (every use case wired), in the same loop: its ratio to ``memory list`` is
what running the read-only commands on the readers alone saves.

Run (from the repository root)::

    .venv/bin/python benchmarks/startup.py --rounds 5
    .venv/bin/python benchmarks/startup.py --quick   # memory list only, 3 rounds: well under a minute

The LAST line of stdout is one JSON object with every figure (median seconds per command).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = ("import runpy, sys\nsys.argv = ['fermix', *sys.argv[1:]]\n"
         "try:\n    runpy.run_module('fermix_memory', run_name='__main__')\n"
         "except SystemExit:\n    pass\nsys.stderr.write('tiktoken=%s\\n' % ('tiktoken' in sys.modules))\n")
# The same command with no command on the readers: a read-only command opens the whole memory.
WHOLE = "import fermix_memory.entrypoints.cli as cli\ncli.ON_READER = frozenset()\n" + PROBE


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], probe: str = PROBE) -> tuple[float, float, bool]:
    """Wall seconds, CPU seconds and whether tiktoken was loaded, for one run of ``fermix argv``."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    return elapsed, _children_cpu() - cpu, "tiktoken=True" in done.stderr


def raw_cpu(module: str = "apsw") -> float:
    """CPU seconds of a raw counterpart: a fresh interpreter that only imports ``module``."""
    cpu = _children_cpu()
    subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, check=True)
    return _children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="memory list (both ways) only, 3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    from fermix_memory import MemorySystem

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        with MemorySystem.open(home) as memory:
            mid = memory.append_message(agent_id="ada", owner_id="alice", conversation="tg:1", role="user",
                                        content="I live in Paris")
            [row] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city",
                                         "value": "Lives in Paris"}, agent_id="ada", owner_id="alice",
                                        trust="operator", source_message_id=mid)
        h = ["--home", str(home)]
        commands: dict[str, tuple[list[str], str]] = {
            "--help": (["--help"], PROBE), "memory list": ([*h, "memory", "list"], PROBE),
            "memory list (whole memory)": ([*h, "memory", "list"], WHOLE),
            "memory show": ([*h, "memory", "show", str(row.memory_id)], PROBE),
            "resource list": ([*h, "resource", "list"], PROBE),
            "history show": ([*h, "history", "show", "tg:1", "--agent", "ada"], PROBE),
            "events verify": ([*h, "events", "verify"], PROBE),
            "memory restore": ([*h, "memory", "restore", str(row.memory_id)], PROBE)}
        if args.quick:
            commands = {k: v for k, v in commands.items() if k.startswith("memory list")}
        figures: dict[str, object] = {}
        for name, (argv, probe) in commands.items():
            figures[name] = measure(name, argv, probe, rounds)
        whole, reader = figures.get("memory list (whole memory)"), figures.get("memory list")
        if isinstance(whole, dict) and isinstance(reader, dict) and reader["cpu_s"]:
            figures["memory_list_whole_over_reader_cpu"] = round(whole["cpu_s"] / reader["cpu_s"], 2)
            print(f"memory list on the readers: {figures['memory_list_whole_over_reader_cpu']}x less CPU than"
                  " through the whole memory", file=sys.stderr)
    print(json.dumps(figures, sort_keys=True))


def measure(name: str, argv: list[str], probe: str, rounds: int) -> dict[str, object]:
    """One command's medians beside its raw counterparts, run alternately ``rounds`` times."""
    runs, apsws, sqlites = [], [], []
    for _ in range(rounds):  # ours and the raw counterparts alternately
        runs.append(timed(argv, probe))
        apsws.append(raw_cpu("apsw"))
        sqlites.append(raw_cpu("sqlite3"))
    median = statistics.median(t for t, _, _ in runs)
    cpu = statistics.median(c for _, c, _ in runs)
    raw, raw_sqlite = statistics.median(apsws), statistics.median(sqlites)
    loaded = any(flag for _, _, flag in runs)
    print(f"fermix {name:<26} median {median * 1000:7.0f} ms  CPU {cpu * 1000:5.0f} ms"
          f" = {cpu / raw if raw else float('nan'):5.1f}x 'import apsw' ({raw * 1000:.0f} ms;"
          f" 'import sqlite3' {raw_sqlite * 1000:.0f} ms)  tiktoken loaded: {'yes' if loaded else 'no'}",
          file=sys.stderr)
    return {"median_s": round(median, 3), "cpu_s": round(cpu, 3), "import_apsw_cpu_s": round(raw, 3),
            "import_sqlite3_cpu_s": round(raw_sqlite, 3), "cpu_ratio": round(cpu / raw, 2) if raw else None,
            "tiktoken_loaded": loaded}


if __name__ == "__main__":
    main()
