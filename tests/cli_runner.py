"""The ``fermix`` command run in-process: ``cli.main(argv)`` with its stdout, stderr and the
library's log lines captured, as the console script would print them."""

from __future__ import annotations

import argparse
import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import attrs

from fermix_memory.entrypoints import cli


@attrs.frozen
class CliResult:
    """What one command printed and its exit code (the shape of ``subprocess.CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*argv: str, home: Path | None = None, stdin: bytes | None = None) -> CliResult:
    """Run ``fermix [--home HOME] ARGV...`` in this process; ``stdin`` feeds ``-`` arguments."""
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with redirect_stdout(out), redirect_stderr(err), cli.log_lines(err):
            code = cli.main([*(["--home", str(home)] if home is not None else []), *argv])
    finally:
        sys.stdin = saved_stdin
    return CliResult(code, out.getvalue(), err.getvalue())


def leaf_commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every runnable sub-command of the parser (its words), with its own parser."""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found[path] = parser
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, (*path, name))

    walk(cli.build_parser(), ())
    return found
