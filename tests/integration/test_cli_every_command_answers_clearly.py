"""Every ``fermix`` command, fed arbitrary arguments: a clear answer, never a crash.

The commands are enumerated from the CLI's command tree (the table the parser is built from),
so a new command is fuzzed without editing this file. Each run ends with ``events verify``:
whatever the arguments did, the log still verifies.
"""

from __future__ import annotations

import functools
import io
import json
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fermix_memory import MemorySystem
from fermix_memory.entrypoints import cli
from fermix_memory.entrypoints.cli import parser as cli_parser
from tests.cli_runner import leaf_commands

COMMANDS = leaf_commands()
# Words the commands understand, and values that mean something in the seeded home.
KNOWN = ["alice", "bob", "ada", "max", "user_md", "memory_md", "telegram:42", "telegram", "0", "1", "2", "3",
         "5", "-1", "999", "1e9", "nan", "inf", "", " ", "-", "--", "a:b:c:d", "memory.added", "\u2028", "é"]
# No path separators or home markers: arbitrary paths must not escape the test's folder.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\~"), max_size=12)


def vocabulary(command: cli.Command) -> list[str]:
    words = ["-h", "--help"]  # argparse's own option, on every command
    for option in command.options:
        words += [flag for flag in option.flags if flag.startswith("-") and flag != "--home"]
        words += list(option.choices)
    return words


def arguments(command: cli.Command) -> st.SearchStrategy[list[str]]:
    token = st.one_of(st.sampled_from(vocabulary(command) + KNOWN), TEXT, st.integers(-3, 10**12).map(str))
    return st.lists(token, max_size=6)


def run(home: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["--home", str(home), *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module", autouse=True)
def one_parser() -> Iterator[None]:
    """The parser is built once for the module's thousand commands, not once for each: it is
    made from the same command table every time, and parsing leaves it as it was."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_parser, "build_parser", functools.cache(cli_parser.build_parser))
        yield


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("fuzz") / "home"
    lines = [json.dumps({"agent_id": "ada", "owner_id": owner, "channel": "telegram", "chat_id": "42",
                         "role": "user", "sender": owner, "content": f"{owner} lives in Paris"})
             for owner in ("alice", "bob")]
    with MemorySystem.open(home) as memory:
        memory.import_history(lines)
        for owner in ("alice", "bob"):
            [row] = memory.write_memory({"op": "add", "category": "identity", "key": "city", "value": "Paris"},
                                        agent_id="ada", owner_id=owner, trust="operator")
        memory.write_memory({"op": "archive", "id": row.memory_id, "reason": "moved"}, agent_id="ada",
                            owner_id="bob", trust="operator")
    return home


def test_the_fuzzed_commands_are_every_command_of_the_parser() -> None:
    assert ("events", "verify") in COMMANDS and ("history", "import") in COMMANDS and ("forget",) in COMMANDS
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_command_answers_arbitrary_arguments_clearly(
        path: tuple[str, ...], seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths the arguments name land here
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))

    @settings(max_examples=4 if path == ("demo",) else 25, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(arguments(COMMANDS[path]))
    def check(args: list[str]) -> None:
        code, _, err = run(seeded, *path, *args)
        assert code in (cli.EXIT_OK, cli.EXIT_ERROR), (args, code, err)
        assert "Traceback" not in err and "internal error" not in err, (args, err)
        if code == cli.EXIT_ERROR and cli.wants_json(args):
            assert json.loads(err)["error"], (args, err)  # one JSON object
        elif code == cli.EXIT_ERROR:
            lines = err.splitlines()
            assert lines and all(x.startswith("fermix: error: ") for x in lines), (args, err)
            assert len(lines) == 1 or path == ("history", "import"), (args, err)

    check()
    code, out, err = run(seeded, "events", "verify")
    assert code == cli.EXIT_OK, (out, err)
