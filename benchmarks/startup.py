"""Start-up of the ``fermix`` command: how long short commands take in a fresh interpreter.

Each command runs ``--rounds`` times as ``python -m fermix_memory ...`` on a small home (one
message, one memory row): ``--help``, the read-only ``memory list`` and ``events verify``, and
``memory restore`` (a write). Each command's CPU time (user + system, of the child process) is
measured beside that of its raw counterpart, ``python -c "import apsw"``, run alternately in the same
loop, and printed as a ratio. Beside each, whether the process loaded tiktoken's tables
(``tiktoken`` in ``sys.modules``): only commands that count tokens should.

Run (from the repository root)::

    .venv/bin/python benchmarks/startup.py --rounds 5

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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str]) -> tuple[float, float, bool]:
    """Wall seconds, CPU seconds and whether tiktoken was loaded, for one run of ``fermix argv``."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    return elapsed, _children_cpu() - cpu, "tiktoken=True" in done.stderr


def raw_cpu() -> float:
    """CPU seconds of the raw counterpart: a fresh interpreter that only imports apsw."""
    cpu = _children_cpu()
    subprocess.run([sys.executable, "-c", "import apsw"], capture_output=True, check=True)
    return _children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from fermix_memory import MemorySystem

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        with MemorySystem.open(home) as memory:
            mid = memory.append_message(agent_id="ada", owner_id="alice", conversation="tg:1", role="user",
                                        content="I live in Paris")
            [row] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city",
                                         "value": "Lives in Paris"}, agent_id="ada", owner_id="alice",
                                        trust="operator", source_message_id=mid)
        commands = {"--help": ["--help"], "memory list": ["--home", str(home), "memory", "list"],
                    "events verify": ["--home", str(home), "events", "verify"],
                    "memory restore": ["--home", str(home), "memory", "restore", str(row.memory_id)]}
        figures: dict[str, object] = {}
        for name, argv in commands.items():
            runs, raws = [], []
            for _ in range(args.rounds):  # ours and the raw counterpart alternately
                runs.append(timed(argv))
                raws.append(raw_cpu())
            median = statistics.median(t for t, _, _ in runs)
            cpu = statistics.median(c for _, c, _ in runs)
            raw = statistics.median(raws)
            loaded = any(flag for _, _, flag in runs)
            figures[name] = {"median_s": round(median, 3), "cpu_s": round(cpu, 3), "import_apsw_cpu_s": round(raw, 3),
                             "cpu_ratio": round(cpu / raw, 2) if raw else None, "tiktoken_loaded": loaded}
            print(f"fermix {name:<15} median {median * 1000:7.0f} ms  CPU {cpu * 1000:5.0f} ms"
                  f" = {cpu / raw if raw else float('nan'):5.1f}x 'import apsw'"
                  f"  tiktoken loaded: {'yes' if loaded else 'no'}")
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
