"""The ``fermix`` admin command: review, restore, audit, import/export (SPEC §11).

``main(argv) -> int`` never raises for user errors: it prints one clear line on stderr (one
JSON object with ``--json``) and returns 1; only a bug gives 70. ``--home`` and ``--json`` are
accepted before or after the sub-command.

Each command declares how it opens the memory: ``read`` commands open an existing home
read-only (they never create or change anything, and work on a read-only mount), ``write``
commands need an existing home, ``config`` commands (``setup``) work on ``config.toml`` first,
and ``own`` commands open the memory themselves once they have checked what they were given:
``history import`` creates a home only for a file whose every line is good, and the demo
never touches a home that holds data (ADR-0023).

This module holds the dispatch. The command tree (every command's words, access and options)
is in ``commands``, the parser built from it in ``parser``; each command group lives in its own
module (``events``, ``history``, ``memory``, ``resources``, ``setup``) and
what the command prints in ``output``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from fermix_memory.domain.errors import FermixError
from fermix_memory.entrypoints.cli.commands import (
    CONFIG,
    ON_READER,
    OWN,
    READ,
    Command,
    Option,
    command_tree,
)
from fermix_memory.entrypoints.cli.output import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    LogLine,
    Output,
    Progress,
    UsageError,
    jsonable,
    log_lines,
    one_line,
    plural,
    report_error,
)
from fermix_memory.entrypoints.cli.parser import build_parser, parse_command_line, shows_default

__all__ = [
    "EXIT_ERROR", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "Command", "LogLine", "Option", "Output", "Progress",
    "UsageError", "build_parser", "command_tree", "jsonable", "log_lines", "main", "one_line", "plural", "run",
    "shows_default", "wants_json",
]


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (before any ``--``): errors are then one JSON object."""
    args = list(argv)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _embedder_asked(args: argparse.Namespace) -> Any:
    """The embedder a command asked for (``--mode semantic`` or ``hybrid``), else ``None``: only
    then, or when the home's settings turn recall by meaning on, is the model loaded (ADR-0043)."""
    if getattr(args, "mode", None) in (None, "keyword"):
        return None
    from fermix_memory.adapters.embedding import load_embedder

    return load_embedder()


def _run(args: argparse.Namespace, out: Output) -> int:
    """Run the parsed command. Only now are the command's module and the memory's modules
    imported (--help needs neither); a read-only command on the readers alone imports none of
    the writer side (ADR-0063)."""
    run_command = args.command_to_run.function()
    if args.access in (CONFIG, OWN):
        return int(run_command(args, out))
    if args.command_to_run.words in ON_READER:
        from fermix_memory.entrypoints.reader import MemoryReader

        with MemoryReader.open(args.home) as reader:
            return int(run_command(reader, args, out))
    from fermix_memory.entrypoints.api.memory_system import MemorySystem

    with MemorySystem.open(args.home, create=False, readonly=args.access == READ,
                           embedder=_embedder_asked(args)) as memory:
        return int(run_command(memory, args, out))


def _import_problems(exc: FermixError) -> list[str] | None:
    """The lines of a history import's problems (each line of the file that is wrong), when
    there are several; the history module is loaded already when it raised one."""
    history = sys.modules.get("fermix_memory.application.history")
    if history is None or not isinstance(exc, history.HistoryImportError) or len(exc.problems) <= 1:
        return None
    return [*exc.lines(), "nothing was imported"]


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    try:
        args = parse_command_line(argv)
    except UsageError as exc:
        report_error(as_json, exc)
        return EXIT_ERROR
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    out = Output(bool(args.json), stdout or sys.stdout)
    try:
        return _run(args, out)
    except FermixError as exc:
        report_error(out.as_json, exc, _import_problems(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("fermix: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a file the operator named (export -o, replay --into): their problem to fix
        report_error(out.as_json, exc, [f"{exc.filename or 'file'}: {exc.strerror or exc}"])
        return EXIT_ERROR
    except Exception as exc:  # a bug: still one line, and a distinct exit code
        sys.stderr.write(f"fermix: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_INTERNAL


def run() -> None:
    """Console-script entry point: the library's warnings (a failed model call) show as
    ``fermix: warning: ...`` lines on stderr."""
    with log_lines(sys.stderr):
        code = main()
    sys.exit(code)
