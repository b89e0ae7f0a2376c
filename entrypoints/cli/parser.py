"""The ``fermix`` parser, built from the command table (:data:`~.commands.COMMANDS`) and nothing
else; a bad argument is a :class:`UsageError` (one line, exit 1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from typing import Any, NoReturn

from fermix_memory.entrypoints.cli.commands import COMMANDS, COMMON, GROUPS, Option
from fermix_memory.entrypoints.cli.output import UsageError


def shows_default(default: object) -> bool:
    """Whether an option's default is worth printing in its help ("(default: ...)")."""
    return not (default is None or default is False or default is argparse.SUPPRESS)


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
        if option.optional:
            kwargs["nargs"] = "?"
    if option.required:
        kwargs["required"] = True
    parser.add_argument(*option.flags, **kwargs)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fermix-memory")
    except PackageNotFoundError:
        return "unknown"


class VersionAction(argparse.Action):
    """``--version``: like argparse's own, but the version is looked up only when asked for, so that
    other commands never load ``importlib.metadata``."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: object = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> NoReturn:
        sys.stdout.write(f"{parser.prog} {_version()}\n")
        parser.exit()


def parse_command_line(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed; an option its command does not take is named first (argparse would set
    it aside and complain about what follows it instead)."""
    from fermix_memory.entrypoints.cli.flags import unknown_option

    options = {c.words: [f for o in c.options if not o.positional for f in o.flags] for c in COMMANDS}
    problem = unknown_option(argv, options, [f for o in COMMON for f in o.flags])
    if problem is not None:
        raise UsageError(problem)
    return build_parser(frozenset(argv)).parse_args(argv)


def build_parser(words: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argparse parser of :data:`COMMANDS`. ``words``: the words of the command line to parse,
    when known: a group none of them names keeps its parser (its name and help) without its
    commands, which that command line cannot reach; it parses, errs and helps as the whole one."""
    parser = Parser(prog="fermix", description="Admin and audit tool of fermix-memory.",
                    formatter_class=HelpFormatter, allow_abbrev=False)
    for option in COMMON:
        _add(parser, option)
    parser.add_argument("--version", action=VersionAction, help="print the version and exit")
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
        if group and words is not None and group[0] not in words:
            continue
        sub = subparsers[group[0]] if group else groups
        p = sub.add_parser(name, help=command.help, description=command.help, formatter_class=HelpFormatter,
                           allow_abbrev=False)
        for option in COMMON:
            _add(p, option, common_below_top=True)
        for option in command.options:
            _add(p, option)
        p.set_defaults(command_to_run=command, access=command.access)
    return parser
