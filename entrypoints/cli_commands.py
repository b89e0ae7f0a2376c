"""The ``fermix`` command tree as one table: every runnable command's words, what it runs, how it
opens the memory (see :mod:`fermix_memory.entrypoints.cli`) and its arguments.

:func:`build_parser` builds the argparse parser from this table and nothing else, so
:func:`command_tree` (what tests and tools list the commands by) cannot drift from what the
parser accepts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

import attrs

from fermix_memory.domain.values import INT64_MAX
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
from fermix_memory.entrypoints.cli_output import UsageError
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

READ, WRITE, CREATE, CONFIG = "read", "write", "create", "config"


@attrs.frozen
class Option:
    """One argument of a command: ``flags`` are its option strings (``("--limit",)``), or its
    name alone for a positional argument (``("owner",)``)."""

    flags: tuple[str, ...]
    help: str
    type: Callable[[str], Any] | None = None
    default: object = None
    choices: tuple[str, ...] = ()
    required: bool = False
    switch: bool = False  # an on/off flag that takes no value (``--yes``)
    metavar: str | None = None

    @property
    def positional(self) -> bool:
        return not self.flags[0].startswith("-")


@attrs.frozen
class Command:
    """One runnable command: ``fermix <words...> <options...>``. ``options`` include the ones every
    command accepts (``--home``, ``--json``)."""

    words: tuple[str, ...]
    run: Callable[..., int]
    access: str
    help: str
    options: tuple[Option, ...] = ()


def shows_default(default: object) -> bool:
    """Whether an option's default is worth printing in its help ("(default: ...)")."""
    return not (default is None or default is False or default is argparse.SUPPRESS)


# --- argument types ----------------------------------------------------------------------------------


def _path(text: str) -> str:
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError("a path must be non-empty, without NUL characters")
    return text


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


# --- the table ---------------------------------------------------------------------------------------

COMMON = (
    Option(("--home",), "memory home folder (default: $FERMIX_HOME, else ~/.fermix)", type=_path),
    Option(("--json",), "print one JSON document on stdout (and errors as JSON on stderr)", switch=True),
)
GROUPS = {  # the help of each group of commands
    "events": "the event log: verify, head, replay, log",
    "history": "conversation history: import, export",
    "memory": "memory rows: list, show, search, review, restore",
    "setup": "the config file: init, show, review-interval",
    "resource": "versioned prompt files: list, history, show, diff, rollback",
}
_AGENT = Option(("--agent",), "agent id (needed when several agents have prompt files)")
_OWNER = Option(("--owner",), "owner id (needed when several owners have prompt files)")
_NAME = Option(("name",), "the prompt file: user_md (USER.md) or memory_md (MEMORY.md)",
               choices=("user_md", "memory_md"))
_CONVERSATION = "CHANNEL:CHAT_ID[:THREAD]"

COMMANDS: tuple[Command, ...] = (
    Command(("demo",), cmd_demo, CREATE, "run the whole loop on the sample conversation shipped with the package"),
    Command(("events", "verify"), cmd_events_verify, READ, "check the hash chain and the projections (read-only)", (
        Option(("--expect-head",), "a head printed earlier by 'events head': the log must still hold it"
               " (default: none)", metavar="POSITION:HASH"),
    )),
    Command(("events", "head"), cmd_events_head, READ, "print the log's last POSITION:HASH, to keep elsewhere"),
    Command(("events", "replay"), cmd_events_replay, READ, "rebuild every projection from the log into a new folder", (
        Option(("--into",), "folder for the rebuilt memory.db (must not hold one)", type=_path, required=True),
    )),
    Command(("events", "log"), cmd_events_log, READ, "print events in log order (redacted ones show as such)", (
        Option(("--after",), "only events after this position", type=_position, default=0),
        Option(("--limit",), "print at most this many events", type=_positive, default=100),
        Option(("--kind",), "only events of this kind, e.g. memory.added"),
    )),
    Command(("forget",), cmd_forget, WRITE, "erase everything an owner left (messages, facts, files, jobs)", (
        Option(("owner",), "the owner id to forget"),
        Option(("--agent",), "only what they left with this agent (default: every agent)"),
        Option(("--reason",), "kept in the record of the erasure (no content of the owner's)"),
        Option(("--yes",), "required: the erasure cannot be undone", switch=True),
    )),
    Command(("history", "import"), cmd_history_import, CREATE,
            "import messages from a JSON Lines file: every line is checked first, then all or nothing;"
            " messages imported before are skipped", (
        Option(("file",), "the JSON Lines file, '-' for standard input (UTF-8, a BOM is fine)", type=_path),
    )),
    Command(("history", "export"), cmd_history_export, READ, "export messages as JSON Lines", (
        Option(("--agent",), "only this agent's messages (default: every agent)"),
        Option(("--output", "-o"), "file to write (default: standard output)", type=_path),
    )),
    Command(("memory", "list"), cmd_memory_list, READ, "list memory rows", (
        Option(("--agent",), "only this agent's rows (default: every agent)"),
        Option(("--owner",), "only this owner's rows (default: every owner)"),
        Option(("--active",), "leave out archived rows", switch=True),
    )),
    Command(("memory", "show"), cmd_memory_show, READ, "a row and the events and messages behind it", (
        Option(("id",), "the memory row id", type=_id),
    )),
    Command(("memory", "search"), cmd_memory_search, READ, "full-text search as a reader would", (
        Option(("query",), "words to look for"),
        Option(("--agent",), "the agent searching", required=True),
        Option(("--owner",), "the owner it searches for", required=True),
        Option(("--conversation",), f"the reader's conversation, {_CONVERSATION}"),
        Option(("--scope",), "which rows the reader may see", choices=("current", "owner", "all"), default="current"),
        Option(("--source",), "search memory rows, messages, or both", choices=("memories", "history", "all"),
               default="memories"),
        Option(("--limit",), "at most this many hits of each source", type=_positive, default=10),
    )),
    Command(("memory", "review"), cmd_memory_review, WRITE, "review conversations with new messages now", (
        Option(("--now",), "past the interval and back-off gates (required)", switch=True),
        Option(("--conversation",), f"only this conversation, {_CONVERSATION}"),
        Option(("--agent",), "only this agent's conversations (default: every agent)"),
        Option(("--owner",), "only this owner's conversations (default: every owner)"),
    )),
    Command(("memory", "restore"), cmd_memory_restore, WRITE,
            "un-archive a memory row and rebuild the prompt files (an active row is left as it is:"
            " 'already active', exit 0)", (
        Option(("id",), "the memory row id", type=_id),
    )),
    Command(("setup", "init"), cmd_setup_init, CONFIG,
            "create the memory home: a config.toml with every knob at its default, and memory.db"),
    Command(("setup", "show"), cmd_setup_show, CONFIG, "the settings in effect"),
    Command(("setup", "review-interval"), cmd_setup_review_interval, CONFIG,
            "set the background review interval in hours (0 disables it; --now still works);"
            " the rest of config.toml, comments included, is kept", (
        Option(("hours",), "hours between background reviews; 0 turns them off", type=_hours),
    )),
    Command(("resource", "list"), cmd_resource_list, READ, "the current revision of every resource", (
        _AGENT, _OWNER,
    )),
    Command(("resource", "history"), cmd_resource_history, READ, "revisions of a resource, newest first", (
        _AGENT, _OWNER, _NAME, Option(("--limit",), "at most this many revisions", type=_positive, default=20),
    )),
    Command(("resource", "show"), cmd_resource_show, READ, "the content of one revision", (
        _AGENT, _OWNER, _NAME, Option(("rev",), "the revision number", type=_id),
    )),
    Command(("resource", "diff"), cmd_resource_diff, READ, "unified diff between two revisions", (
        _AGENT, _OWNER, _NAME, Option(("a",), "the older revision", type=_id),
        Option(("b",), "the newer revision", type=_id),
    )),
    Command(("resource", "rollback"), cmd_resource_rollback, WRITE, "restore a revision's content as a new revision", (
        _AGENT, _OWNER, _NAME, Option(("rev",), "the revision whose content comes back", type=_id),
    )),
)  # fmt: skip


def command_tree() -> tuple[Command, ...]:
    """Every runnable command, in the order of ``fermix --help``, with all the options it accepts
    (the common ``--home`` and ``--json`` first; ``--help`` is argparse's own)."""
    return tuple(attrs.evolve(c, options=(*COMMON, *c.options)) for c in COMMANDS)


# --- the parser --------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is a :class:`UsageError` (one line, exit 1), not exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


class HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (shows_default(action.default) and "%(default)" not in text and action.option_strings):
            text += " (default: %(default)s)"
        return text


def _add(parser: argparse.ArgumentParser, option: Option, *, common_below_top: bool = False) -> None:
    """``option`` on ``parser``. A common option below the top level defaults to "not given", so
    that it does not overwrite the value given before the sub-command."""
    kwargs: dict[str, Any] = {"help": option.help}
    if option.switch:
        kwargs |= {"action": "store_true", "default": argparse.SUPPRESS if common_below_top else False}
    else:
        kwargs |= {"type": option.type, "default": argparse.SUPPRESS if common_below_top else option.default}
        if option.choices:
            kwargs["choices"] = option.choices
        if option.metavar:
            kwargs["metavar"] = option.metavar
    if option.required:
        kwargs["required"] = True
    parser.add_argument(*option.flags, **kwargs)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fermix-memory")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of :data:`COMMANDS`."""
    parser = Parser(prog="fermix", description="Admin and audit tool of fermix-memory.",
                    formatter_class=HelpFormatter, allow_abbrev=False)
    for option in COMMON:
        _add(parser, option)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print the version and exit")
    top_level = sorted({c.words[0] for c in COMMANDS})
    groups = parser.add_subparsers(dest="group", required=True, parser_class=Parser,
                                   metavar="{" + ",".join(top_level) + "}")
    subparsers: dict[str, Any] = {}
    for command in COMMANDS:
        *group, name = command.words
        if group and group[0] not in subparsers:
            subparsers[group[0]] = groups.add_parser(
                group[0], help=GROUPS[group[0]], description=GROUPS[group[0]], formatter_class=HelpFormatter,
                allow_abbrev=False,
            ).add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
        sub = subparsers[group[0]] if group else groups
        p = sub.add_parser(name, help=command.help, description=command.help, formatter_class=HelpFormatter,
                           allow_abbrev=False)
        for option in COMMON:
            _add(p, option, common_below_top=True)
        for option in command.options:
            _add(p, option)
        p.set_defaults(func=command.run, access=command.access)
    return parser
