"""The ``fermix`` admin command: review, restore, audit, import/export (SPEC §11).

``main(argv) -> int`` never raises for user errors: it prints one clear line on stderr (one
JSON object with ``--json``) and returns 1; only a bug gives 70. ``--home`` and ``--json`` are
accepted before or after the sub-command.

Each command declares how it opens the memory: ``read`` commands open an existing home
read-only (they never create or change anything, and work on a read-only mount), ``write``
commands need an existing home, ``create`` commands (imports, the demo, ``setup init``) may
create one, and ``config`` commands work on ``config.toml`` alone.

This module holds the parser and the dispatch; each command group lives in its own module
(``cli_events``, ``cli_history``, ``cli_memory``, ``cli_resources``, ``cli_setup``) and what
the command prints in ``cli_output``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from fermix_memory.application.history import HistoryImportError
from fermix_memory.domain.errors import FermixError
from fermix_memory.domain.values import INT64_MAX
from fermix_memory.entrypoints.api import MemorySystem
from fermix_memory.entrypoints.cli_events import (
    cmd_events_head,
    cmd_events_log,
    cmd_events_replay,
    cmd_events_verify,
)
from fermix_memory.entrypoints.cli_history import cmd_history_export, cmd_history_import
from fermix_memory.entrypoints.cli_memory import (
    cmd_forget,
    cmd_memory_list,
    cmd_memory_restore,
    cmd_memory_review,
    cmd_memory_search,
    cmd_memory_show,
)
from fermix_memory.entrypoints.cli_output import (
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
from fermix_memory.entrypoints.cli_resources import (
    cmd_resource_diff,
    cmd_resource_history,
    cmd_resource_list,
    cmd_resource_rollback,
    cmd_resource_show,
)
from fermix_memory.entrypoints.cli_setup import (
    cmd_demo,
    cmd_setup_init,
    cmd_setup_review_interval,
    cmd_setup_show,
)

__all__ = [
    "EXIT_ERROR", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "LogLine", "Output", "Progress", "UsageError",
    "build_parser", "jsonable", "log_lines", "main", "one_line", "plural", "run", "shows_default", "wants_json",
]

READ, WRITE, CREATE, CONFIG = "read", "write", "create", "config"


# --- parser -----------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is a :class:`UsageError` (one line, exit 1), not exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def shows_default(default: object) -> bool:
    """Whether an option's default is worth printing in its help ("(default: ...)")."""
    return not (default is None or default is False or default is argparse.SUPPRESS)


class HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (shows_default(action.default) and "%(default)" not in text and action.option_strings):
            text += " (default: %(default)s)"
        return text


def _path(text: str) -> str:
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError("a path must be non-empty, without NUL characters")
    return text


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument("--home", default=default, type=_path,
                        help="memory home folder (default: $FERMIX_HOME, else ~/.fermix)")
    parser.add_argument("--json", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="print one JSON document on stdout (and errors as JSON on stderr)")


def _whole(text: str, minimum: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if not minimum <= value <= INT64_MAX:  # SQLite cannot even compare with a larger number
        raise argparse.ArgumentTypeError(f"must be {rule} of at most {INT64_MAX}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1, "a positive number")


def _position(text: str) -> int:
    return _whole(text, 0, "a position (0 or more)")


def _id(text: str) -> int:
    return _positive(text)


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of hours") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("hours must be 0 (off) or more")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fermix-memory")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="fermix", description="Admin and audit tool of fermix-memory.",
                    formatter_class=HelpFormatter, allow_abbrev=False)
    _common(parser, top=True)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print the version and exit")
    groups = parser.add_subparsers(dest="group", required=True, parser_class=Parser,
                                   metavar="{demo,events,forget,history,memory,resource,setup}")

    def group(name: str, help_text: str) -> Any:
        return groups.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter,
                                 allow_abbrev=False).add_subparsers(dest="command", required=True,
                                                                    parser_class=Parser, metavar="COMMAND")

    def command(sub: Any, name: str, func: Any, access: str, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text,
                                                    formatter_class=HelpFormatter, allow_abbrev=False)
        _common(p, top=False)
        p.set_defaults(func=func, access=access)
        return p

    command(groups, "demo", cmd_demo, CREATE,
            "run the whole loop on the sample conversation shipped with the package")

    events = group("events", "the event log: verify, head, replay, log")
    p = command(events, "verify", cmd_events_verify, READ, "check the hash chain and the projections (read-only)")
    p.add_argument("--expect-head", metavar="POSITION:HASH", default=None,
                   help="a head printed earlier by 'events head': the log must still hold it (default: none)")
    command(events, "head", cmd_events_head, READ, "print the log's last POSITION:HASH, to keep elsewhere")
    p = command(events, "replay", cmd_events_replay, READ, "rebuild every projection from the log into a new folder")
    p.add_argument("--into", required=True, type=_path, help="folder for the rebuilt memory.db (must not hold one)")
    p = command(events, "log", cmd_events_log, READ, "print events in log order (redacted ones show as such)")
    p.add_argument("--after", type=_position, default=0, help="only events after this position")
    p.add_argument("--limit", type=_positive, default=100, help="print at most this many events")
    p.add_argument("--kind", help="only events of this kind, e.g. memory.added")

    p = command(groups, "forget", cmd_forget, WRITE, "erase everything an owner left (messages, facts, files, jobs)")
    p.add_argument("owner", help="the owner id to forget")
    p.add_argument("--agent", help="only what they left with this agent (default: every agent)")
    p.add_argument("--reason", help="kept in the record of the erasure (no content of the owner's)")
    p.add_argument("--yes", action="store_true", help="required: the erasure cannot be undone")

    history = group("history", "conversation history: import, export")
    p = command(history, "import", cmd_history_import, CREATE,
                "import messages from a JSON Lines file: every line is checked first, then all or nothing;"
                " messages imported before are skipped")
    p.add_argument("file", type=_path, help="the JSON Lines file, '-' for standard input (UTF-8, a BOM is fine)")
    p = command(history, "export", cmd_history_export, READ, "export messages as JSON Lines")
    p.add_argument("--agent", help="only this agent's messages (default: every agent)")
    p.add_argument("--output", "-o", type=_path, help="file to write (default: standard output)")

    mem = group("memory", "memory rows: list, show, search, review, restore")
    p = command(mem, "list", cmd_memory_list, READ, "list memory rows")
    p.add_argument("--agent", help="only this agent's rows (default: every agent)")
    p.add_argument("--owner", help="only this owner's rows (default: every owner)")
    p.add_argument("--active", action="store_true", help="leave out archived rows")
    p = command(mem, "show", cmd_memory_show, READ, "a row and the events and messages behind it")
    p.add_argument("id", type=_id, help="the memory row id")
    p = command(mem, "search", cmd_memory_search, READ, "full-text search as a reader would")
    p.add_argument("query", help="words to look for")
    p.add_argument("--agent", required=True, help="the agent searching")
    p.add_argument("--owner", required=True, help="the owner it searches for")
    p.add_argument("--conversation", help="the reader's conversation, CHANNEL:CHAT_ID[:THREAD]")
    p.add_argument("--scope", choices=("current", "owner", "all"), default="current",
                   help="which rows the reader may see")
    p.add_argument("--source", choices=("memories", "history", "all"), default="memories",
                   help="search memory rows, messages, or both")
    p.add_argument("--limit", type=_positive, default=10, help="at most this many hits of each source")
    p = command(mem, "review", cmd_memory_review, WRITE, "review conversations with new messages now")
    p.add_argument("--now", action="store_true", help="past the interval and back-off gates (required)")
    p.add_argument("--conversation", help="only this conversation, CHANNEL:CHAT_ID[:THREAD]")
    p.add_argument("--agent", help="only this agent's conversations (default: every agent)")
    p.add_argument("--owner", help="only this owner's conversations (default: every owner)")
    p = command(mem, "restore", cmd_memory_restore, WRITE,
                "un-archive a memory row and rebuild the prompt files (an active row is left as it is:"
                " 'already active', exit 0)")
    p.add_argument("id", type=_id, help="the memory row id")

    setup = group("setup", "the config file: init, show, review-interval")
    command(setup, "init", cmd_setup_init, CONFIG,
            "create the memory home: a config.toml with every knob at its default, and memory.db")
    command(setup, "show", cmd_setup_show, CONFIG, "the settings in effect")
    p = command(setup, "review-interval", cmd_setup_review_interval, CONFIG,
                "set the background review interval in hours (0 disables it; --now still works);"
                " the rest of config.toml, comments included, is kept")
    p.add_argument("hours", type=_hours, help="hours between background reviews; 0 turns them off")

    res_cmds = group("resource", "versioned prompt files: list, history, show, diff, rollback")

    def resource_command(name: str, func: Any, access: str, help_text: str) -> argparse.ArgumentParser:
        p = command(res_cmds, name, func, access, help_text)
        p.add_argument("--agent", help="agent id (needed when several agents have prompt files)")
        p.add_argument("--owner", help="owner id (needed when several owners have prompt files)")
        return p

    name_help = "the prompt file: user_md (USER.md) or memory_md (MEMORY.md)"
    resource_command("list", cmd_resource_list, READ, "the current revision of every resource")
    names = ("user_md", "memory_md")
    p = resource_command("history", cmd_resource_history, READ, "revisions of a resource, newest first")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("--limit", type=_positive, default=20, help="at most this many revisions")
    p = resource_command("show", cmd_resource_show, READ, "the content of one revision")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("rev", type=_id, help="the revision number")
    p = resource_command("diff", cmd_resource_diff, READ, "unified diff between two revisions")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("a", type=_id, help="the older revision")
    p.add_argument("b", type=_id, help="the newer revision")
    p = resource_command("rollback", cmd_resource_rollback, WRITE, "restore a revision's content as a new revision")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("rev", type=_id, help="the revision whose content comes back")
    return parser


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (before any ``--``): errors are then one JSON object."""
    args = list(argv)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        report_error(as_json, exc)
        return EXIT_ERROR
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    out = Output(bool(args.json), stdout or sys.stdout)
    try:
        if args.access == CONFIG:
            return int(args.func(args, out))
        with MemorySystem.open(args.home, create=args.access == CREATE, readonly=args.access == READ) as memory:
            return int(args.func(memory, args, out))
    except HistoryImportError as exc:
        report_error(out.as_json, exc, [*exc.lines(), "nothing was imported"] if len(exc.problems) > 1 else None)
        return EXIT_ERROR
    except FermixError as exc:
        report_error(out.as_json, exc)
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
