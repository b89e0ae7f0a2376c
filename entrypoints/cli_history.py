"""``fermix history``: import messages from JSON Lines (all or nothing), export them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fermix_memory.entrypoints.api import MemorySystem
from fermix_memory.entrypoints.cli_output import EXIT_OK, Output, UsageError, plural, progress_bars


def _read_lines(name: str) -> list[str]:
    """The lines of a history file (``-``: standard input), a UTF-8 byte-order mark allowed."""
    try:
        if name == "-":
            raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        else:
            raw = Path(name).read_bytes()
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {name}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    # Split on newlines only: JSON strings may hold U+2028 and friends unescaped.
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def cmd_history_import(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    lines = _read_lines(args.file)
    with progress_bars("checking", "importing") as (checking, writing):
        ids = memory.import_history(lines, checking=checking, importing=writing)
    source = "standard input" if args.file == "-" else args.file
    skipped = sum(1 for line in lines if line.strip()) - len(ids)
    out.emit({"imported": len(ids), "skipped": skipped, "first_id": ids[0] if ids else None,
              "last_id": ids[-1] if ids else None},
             lambda r: [f"imported {plural(r['imported'], 'message')} from {source}"
                        + (f"; skipped {plural(r['skipped'], 'message')} already imported" if skipped else "")])
    return EXIT_OK


def cmd_history_export(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    lines = memory.export_history(agent_id=args.agent)
    if args.output:
        target = Path(args.output)
        count = 0
        with target.open("w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
                count += 1
        out.emit({"exported": count, "file": str(target)},
                 lambda r: [f"exported {plural(r['exported'], 'message')} to {r['file']}"])
    else:
        for line in lines:
            out.out.write(line + "\n")
    return EXIT_OK
