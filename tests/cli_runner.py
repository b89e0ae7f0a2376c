"""The ``fermix`` command run in-process: ``cli.main(argv)`` with its stdout, stderr and the
library's log lines captured, as the console script would print them."""

from __future__ import annotations

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


def leaf_commands() -> dict[tuple[str, ...], cli.Command]:
    """Every runnable sub-command (its words), with its options, from the CLI's command tree."""
    return {command.words: command for command in cli.command_tree()}
