"""A parser built for one command line's words (only the groups they name get their commands)
parses, helps and errs as the whole parser does on that command line."""

from __future__ import annotations

import argparse

import pytest

from fermix_memory.entrypoints.cli.commands import COMMANDS, GROUPS
from fermix_memory.entrypoints.cli.output import UsageError
from fermix_memory.entrypoints.cli.parser import build_parser


def _help(parser: argparse.ArgumentParser, words: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``fermix <words> --help`` prints with ``parser``."""
    with pytest.raises(SystemExit):
        parser.parse_args([*words, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_a_group_named_gets_the_same_help(group: str, capsys: pytest.CaptureFixture[str]) -> None:
    whole, pruned = build_parser(), build_parser(frozenset([group]))
    assert pruned.format_help() == whole.format_help()
    assert _help(pruned, [group], capsys) == _help(whole, [group], capsys)


def test_every_command_parses_the_same_way() -> None:
    for command in COMMANDS:
        argv = [*command.words, *(["1"] * sum(1 for o in command.options if o.positional and not o.optional))]
        try:
            expected: object = vars(build_parser().parse_args(argv))
        except UsageError as exc:
            expected = str(exc)
        try:
            got: object = vars(build_parser(frozenset(argv)).parse_args(argv))
        except UsageError as exc:
            got = str(exc)
        assert got == expected, command.words


def test_a_group_not_named_has_no_commands(capsys: pytest.CaptureFixture[str]) -> None:
    pruned = build_parser(frozenset(["memory", "list"]))
    assert _help(pruned, ["memory"], capsys) == _help(build_parser(), ["memory"], capsys)
    others = [c for c in COMMANDS if c.words[0] != "memory" and len(c.words) > 1]
    assert others
    for command in others:  # the group is there, its commands are not built
        listed = _help(pruned, [command.words[0]], capsys).split("positional arguments:")[1].split("options:")[0]
        whole = _help(build_parser(), [command.words[0]], capsys).split("positional arguments:")[1]
        assert command.words[1] not in listed.split() and command.words[1] in whole.split()
