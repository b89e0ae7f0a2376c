"""The ``fermix`` command as a new operator meets it, run in-process (``cli.main(argv)``)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem, ReadOnlyStore
from fermix_memory.entrypoints import cli, reader
from tests.cli_runner import leaf_commands, run_cli
from tests.waits import HANG_GUARD_S

CONFIG_WITH_COMMENTS = """\
# Operator notes: keep this file in git.
[fermix_core.memory]
# Daily review, agreed with the team on 2026-03-01.
review_interval_hours = 24.0  # hours
review_max_messages = 40

[host_app]
colour = "blue"  # the host's own table
"""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def line(**overrides: object) -> str:
    record = {"agent_id": "ada", "owner_id": "alice", "channel": "telegram", "chat_id": "42",
              "role": "user", "sender": "alice", "content": "I live in Paris"}
    record.update(overrides)
    return json.dumps(record)


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def snapshot(home: Path) -> dict[str, str]:
    """Every file under ``home`` and a digest of its bytes (of a database, past the 100-byte header,
    whose change counter any writable open and close may bump)."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()[100 if p.suffix == ".db" else 0:]).hexdigest()
            for p in sorted(home.rglob("*")) if p.is_file()}


def exported(home: Path) -> list[dict[str, object]]:
    with MemorySystem.open(home, readonly=True) as memory:
        return [json.loads(x) for x in memory.export_history()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


ROW = "3"  # the memory row of ``filled``: ids are log positions, after two messages


@pytest.fixture
def filled(home: Path, tmp_path: Path) -> Path:
    """A home with two messages and one memory row (archived), row id :data:`ROW`."""
    with MemorySystem.open(home) as memory:
        memory.import_history([line(), line(content="I like tea")])
        [outcome] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city",
                                         "value": "Lives in Paris"}, agent_id="ada", owner_id="alice", trust="operator")
        assert str(outcome.memory_id) == ROW
        memory.write_memory({"op": "archive", "id": outcome.memory_id, "reason": "moved"},
                            agent_id="ada", owner_id="alice", trust="operator")
    return home


@contextmanager
def read_only(home: Path) -> Iterator[None]:
    """Make ``home`` and its files unchangeable, even by root (the immutable attribute), or by
    the owner (chmod) when not root; skip when neither is possible."""
    paths = [str(p) for p in sorted(home.rglob("*"))] + [str(home)]
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", *paths], capture_output=True,
                                                 check=False).returncode == 0:
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", *paths], capture_output=True, check=True)
        return
    if os.geteuid() == 0:
        pytest.skip("root without chattr: file permissions cannot make the home read-only")
    modes = {p: os.stat(p).st_mode for p in paths}
    for p in paths:
        os.chmod(p, modes[p] & ~0o222)
    try:
        yield
    finally:
        for p in reversed(paths):
            os.chmod(p, modes[p])


# --- a missing home ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ("events", "verify"), ("memory", "list"), ("events", "log"), ("forget", "alice", "--yes"),
    ("history", "export"), ("memory", "show", "1"), ("resource", "list"), ("memory", "restore", "1"),
    ("memory", "review", "--now"),
])
def test_read_commands_on_a_missing_home_say_there_is_no_home_and_create_nothing(
        capsys: pytest.CaptureFixture[str], home: Path, argv: tuple[str, ...]) -> None:
    code, out, err = run(capsys, "--home", str(home), *argv)
    assert code == 1 and out == ""
    assert err.startswith(f"fermix: error: no memory home at {home}") and err.count("\n") == 1
    assert not home.exists()
    # A folder without memory.db (say, only a config.toml) is no home either, and stays as it was.
    home.mkdir()
    code, _, err = run(capsys, "--home", str(home), *argv)
    assert code == 1 and "no memory home" in err and list(home.iterdir()) == []


def test_setup_init_creates_a_home_that_read_commands_accept(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    code, out, _ = run(capsys, "--home", str(home), "setup", "init")
    assert code == 0 and "created" in out and (home / "memory.db").is_file()
    code, out, _ = run(capsys, "--home", str(home), "events", "verify")
    assert code == 0 and out.startswith("ok: 0 events")


# --- provider keys ---------------------------------------------------------------------------------


def test_an_unset_api_key_env_breaks_only_the_commands_that_call_the_model(
        capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_TEST_UNSET_KEY", raising=False)
    home.mkdir()
    (home / "config.toml").write_text(
        '[[fermix_core.providers]]\nname = "main"\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "m"\napi_key_env = "FERMIX_TEST_UNSET_KEY"\n', encoding="utf-8")
    source = write_lines(tmp_path / "in.jsonl", line())
    assert run(capsys, "--home", str(home), "history", "import", str(source))[0] == 0
    for argv in (("events", "verify"), ("memory", "list"), ("history", "export"), ("events", "log")):
        code, _, err = run(capsys, "--home", str(home), *argv)
        assert code == 0, (argv, err)
    code, out, err = run(capsys, "--home", str(home), "memory", "review", "--now")
    assert code == 1
    assert "FERMIX_TEST_UNSET_KEY" in out + err and "is not set" in out + err
    assert "Traceback" not in err


def test_a_failed_review_ends_with_an_error_line_and_library_warnings_are_prefixed(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home.mkdir()
    (home / "config.toml").write_text(
        '[[fermix_core.providers]]\nname = "main"\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "m"\n'
        'api_key_env = "FERMIX_TEST_UNSET_KEY"\n', encoding="utf-8")
    monkeypatch.delenv("FERMIX_TEST_UNSET_KEY", raising=False)
    assert run_cli("history", "import", "-", home=home, stdin=(line() + "\n").encode()).returncode == 0
    result = run_cli("memory", "review", "--now", home=home)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert all(x.startswith(("fermix: warning: ", "fermix: error: ")) for x in lines), result.stderr
    assert lines[-1].startswith("fermix: error: 1 review failed") and "FERMIX_TEST_UNSET_KEY" in lines[-1]


# --- read-only homes -------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ("events", "verify"), ("memory", "list"), ("events", "log"), ("history", "export"), ("memory", "show", ROW),
    ("resource", "list"), ("memory", "search", "Paris", "--agent", "ada", "--owner", "alice", "--source", "all"),
])
def test_a_read_only_home_can_be_verified_listed_and_exported(
        capsys: pytest.CaptureFixture[str], filled: Path, argv: tuple[str, ...]) -> None:
    before = snapshot(filled)
    with read_only(filled):
        code, out, err = run(capsys, "--home", str(filled), *argv)
    assert code == 0, err
    assert out and snapshot(filled) == before


def test_a_read_only_home_can_be_replayed_elsewhere(capsys: pytest.CaptureFixture[str], filled: Path,
                                                   tmp_path: Path) -> None:
    with read_only(filled):
        code, out, err = run(capsys, "--home", str(filled), "events", "replay", "--into", str(tmp_path / "copy"))
    assert code == 0 and "identical" in out, err


def test_a_read_only_copy_whose_wal_cannot_be_read_is_refused_not_shown_stale(
        capsys: pytest.CaptureFixture[str], filled: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    with MemorySystem.open(filled) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:42", role="user",
                              content="the newest words")
        shutil.copytree(filled, copy)  # taken while open: the newest commit is only in memory.db-wal
    (copy / "memory.db-shm").unlink()
    assert (copy / "memory.db-wal").stat().st_size > 0
    with read_only(copy):
        code, out, err = run(capsys, "--home", str(copy), "history", "export")
    assert code == 1 and out == "" and "memory.db-wal" in err and "read-only" in err


def test_read_commands_always_open_the_database_read_only(
        capsys: pytest.CaptureFixture[str], filled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[dict[str, object]] = []
    real_open = MemorySystem.open.__func__  # type: ignore[attr-defined]

    def spy(cls: type[MemorySystem], *args: object, **kwargs: object) -> MemorySystem:
        opened.append(kwargs)
        return real_open(cls, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(MemorySystem, "open", classmethod(spy))
    # The plain reads run on the readers alone (ADR-0063): the store they open, spied on too.
    real_store = reader.open_store

    def store_spy(*args: Any, **kwargs: Any) -> Any:
        opened.append(kwargs)
        return real_store(*args, **kwargs)

    monkeypatch.setattr(reader, "open_store", store_spy)
    for argv in (("events", "verify"), ("memory", "list"), ("events", "log"), ("history", "export"),
                 ("resource", "list"), ("memory", "show", ROW)):
        opened.clear()
        assert run(capsys, "--home", str(filled), *argv)[0] == 0
        assert [o["readonly"] for o in opened] == [True], argv


def test_a_write_command_on_a_read_only_home_says_read_only(
        capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    before = snapshot(filled)
    with read_only(filled):
        code, _, err = run(capsys, "--home", str(filled), "memory", "restore", ROW)
    assert code == 1 and "read-only" in err and err.count("\n") == 1
    assert snapshot(filled) == before
    with MemorySystem.open(filled, readonly=True) as memory, pytest.raises(ReadOnlyStore, match="read-only"):
        memory.restore(int(ROW))


# --- setup -----------------------------------------------------------------------------------------


def test_setup_review_interval_keeps_comments_and_the_rest_of_the_file(
        capsys: pytest.CaptureFixture[str], home: Path) -> None:
    home.mkdir()
    config = home / "config.toml"
    config.write_text(CONFIG_WITH_COMMENTS, encoding="utf-8")
    assert run(capsys, "--home", str(home), "setup", "review-interval", "6")[0] == 0
    assert config.read_text(encoding="utf-8") == CONFIG_WITH_COMMENTS.replace(
        "review_interval_hours = 24.0  # hours", "review_interval_hours = 6.0  # hours")
    # A file without the table gets it added; what was there stays byte for byte.
    config.write_text("# mine\n[host_app]\nx = 1\n", encoding="utf-8")
    assert run(capsys, "--home", str(home), "setup", "review-interval", "0")[0] == 0
    text = config.read_text(encoding="utf-8")
    assert text.startswith("# mine\n[host_app]\nx = 1\n") and "review_interval_hours = 0.0" in text


# --- memory restore and forget ---------------------------------------------------------------------


def test_restoring_an_active_row_says_already_active_and_writes_nothing(
        capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    assert run(capsys, "--home", str(filled), "memory", "restore", ROW)[0] == 0
    with MemorySystem.open(filled, readonly=True) as memory:
        last = memory.head().position
    code, out, _ = run(capsys, "--home", str(filled), "memory", "restore", ROW)
    assert code == 0 and out.startswith(f"already active: {ROW}\t")
    with MemorySystem.open(filled, readonly=True) as memory:
        assert memory.head().position == last


def test_forget_with_an_agent_the_owner_never_used_erases_nothing_and_leaves_the_files(
        capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    before = snapshot(filled)
    code, out, _ = run(capsys, "--home", str(filled), "forget", "alice", "--agent", "max", "--yes")
    assert code == 0 and "nothing to erase" in out
    code, out, _ = run(capsys, "--home", str(filled), "forget", "nobody", "--yes", "--json")
    assert code == 0 and json.loads(out)["erased_events"] == {} and json.loads(out)["bytes_after"] == 0
    assert snapshot(filled) == before  # no event, no scrub, no file rewrite


# --- history import --------------------------------------------------------------------------------


def test_import_rejects_a_channel_containing_a_colon(
        capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", line(channel="tele:gram"))
    code, _, err = run(capsys, "--home", str(home), "history", "import", str(source))
    assert code == 1 and "line 1: channel must not contain ':'" in err


def test_import_accepts_a_utf8_bom_and_standard_input(
        capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "bom.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + (line() + "\n").encode())
    code, out, err = run(capsys, "--home", str(home), "history", "import", str(source))
    assert code == 0, err
    assert out == f"imported 1 message from {source}\n"
    stdin = io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf" + (line(content="from a pipe") + "\n").encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = run(capsys, "--home", str(home), "history", "import", "-")
    assert code == 0 and out == "imported 1 message from standard input\n", err
    assert [r["content"] for r in exported(home)] == ["I live in Paris", "from a pipe"]


def test_import_checks_each_line_once_into_a_new_home_as_into_an_existing_one(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[str] = []
    loads = json.loads

    def counted(text: str | bytes, *args: object, **kwargs: object) -> object:
        decoded.append(str(text))
        return loads(text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(json, "loads", counted)
    lines = [line(content=f"turn {i}") for i in range(5)]
    source = write_lines(tmp_path / "in.jsonl", *lines)
    for home in (tmp_path / "new-home", tmp_path / "new-home"):  # made by the first import, then existing
        decoded.clear()
        code, _, err = run(capsys, "--home", str(home), "history", "import", str(source))
        assert code == 0, err
        assert [decoded.count(text) for text in lines] == [1] * 5


def test_import_reports_every_bad_line_up_to_twenty_then_how_many_more(
        capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path) -> None:
    lines = [line()] + ["{broken"] * 25 + [line(role="wizard")]
    source = write_lines(tmp_path / "bad.jsonl", *lines)
    code, _, err = run(capsys, "--home", str(home), "history", "import", str(source))
    assert code == 1
    reported = err.splitlines()
    assert reported[:2] == ["fermix: error: line 2: not valid JSON (Expecting property name enclosed in double"
                            " quotes)", "fermix: error: line 3: not valid JSON (Expecting property name enclosed"
                            " in double quotes)"]
    assert len([r for r in reported if r.startswith("fermix: error: line ")]) == 20
    assert reported[-2:] == ["fermix: error: and 6 more bad lines", "fermix: error: nothing was imported"]
    assert not (home / "memory.db").exists() or exported(home) == []
    # Two bad lines, as JSON: each one named.
    source = write_lines(tmp_path / "two.jsonl", "{broken", line(), line(trust="root"))
    code, _, err = run(capsys, "--home", str(home), "--json", "history", "import", str(source))
    error = json.loads(err)
    assert code == 1 and error["lines"][:2] == [
        "line 1: not valid JSON (Expecting property name enclosed in double quotes)",
        "line 3: trust must be one of operator, guest, got 'root'"]


def test_reimporting_the_same_file_adds_nothing(capsys: pytest.CaptureFixture[str], home: Path,
                                                tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", line(content="ok"), line(content="ok"),
                         line(content="with an id", message_id="tg-1001"))
    assert run(capsys, "--home", str(home), "history", "import", str(source))[0] == 0
    code, out, _ = run(capsys, "--home", str(home), "history", "import", str(source))
    assert code == 0 and out.startswith("imported 0 messages") and "skipped 3 messages already imported" in out
    # Two identical lines are two messages; the same line again in a grown file is not a third.
    write_lines(source, line(content="ok"), line(content="ok"), line(content="with an id", message_id="tg-1001"),
                line(content="ok"), line(content="new", message_id="tg-1002"))
    code, out, _ = run(capsys, "--home", str(home), "--json", "history", "import", str(source))
    assert code == 0 and json.loads(out)["imported"] == 2 and json.loads(out)["skipped"] == 3
    records = exported(home)
    assert [r["content"] for r in records] == ["ok", "ok", "with an id", "ok", "new"]
    assert records[2]["message_id"] == "tg-1001" and records[2]["metadata"] == {}
    # What export writes imports into another home once, and again adds nothing.
    again = write_lines(tmp_path / "again.jsonl", *(json.dumps(r) for r in records))
    other = tmp_path / "other"
    assert run(capsys, "--home", str(other), "history", "import", str(again))[0] == 0
    assert run(capsys, "--home", str(other), "--json", "history", "import", str(again))[1].count('"imported": 0')
    assert exported(other) == [{**r, "created_at": r["created_at"]} for r in records]


def test_import_refuses_a_message_id_used_twice_in_one_conversation(
        capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", line(message_id="m1"), line(content="other", message_id="m1"),
                         line(chat_id="43", message_id="m1"))
    code, _, err = run(capsys, "--home", str(home), "history", "import", str(source))
    assert code == 1 and err == "fermix: error: line 2: message_id 'm1' is already used on line 1\n"


# --- the command line itself ------------------------------------------------------------------------


def test_home_and_json_are_accepted_after_the_subcommand(capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    code, out, _ = run(capsys, "memory", "list", "--home", str(filled), "--json")
    assert code == 0 and json.loads(out)[0]["key"] == "home_city"


def test_json_errors_are_json_on_stderr(capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    code, out, err = run(capsys, "--home", str(filled), "memory", "show", "999", "--json")
    assert code == 1 and out == ""
    assert json.loads(err) == {"error": "no memory row 999", "type": "NotFound", "lines": ["no memory row 999"]}
    code, _, err = run(capsys, "--json", "memory", "show", "abc")
    assert code == 1 and json.loads(err)["type"] == "UsageError" and "abc" in json.loads(err)["error"]


@pytest.mark.parametrize("argv", [
    (), ("nonsense",), ("memory",), ("memory", "show"), ("memory", "show", "x"), ("events", "log", "--limit", "-1"),
    ("setup", "review-interval", "-1"), ("memory", "list", "--bogus"), ("--home", "", "memory", "list"),
])
def test_argument_errors_exit_1_with_one_line(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert err.startswith("fermix: error: ") and err.count("\n") == 1 and "--help" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("fermix 0.")


def test_python_dash_m_fermix_memory_runs_the_cli(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "fermix_memory", "--home", str(tmp_path / "nohome"),
                             "events", "verify"], capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert result.returncode == 1 and "no memory home" in result.stderr
    shown = subprocess.run([sys.executable, "-m", "fermix_memory", "--version"], capture_output=True, text=True,
                           timeout=HANG_GUARD_S, check=False)
    assert shown.returncode == 0 and shown.stdout.startswith("fermix ")


def offered(*words: str) -> set[str] | None:
    """The sub-commands ``fermix WORDS`` offers (from its error on an unknown one); None for a leaf."""
    err = run_cli(*words, "no-such-command").stderr
    if "choose from" not in err:
        return None
    return {w.strip(" '") for w in err.split("choose from", 1)[1].split(")", 1)[0].split(",")}


def test_the_command_tree_is_every_command_the_parser_runs() -> None:
    runnable: set[tuple[str, ...]] = set()
    for first in offered() or ():
        below = offered(first)
        runnable |= {(first,)} if below is None else {(first, second) for second in below}
    assert runnable == set(leaf_commands())
    assert [c.words for c in cli.command_tree()] == list(leaf_commands())  # one entry per command


def test_every_argument_has_help_and_defaults_are_shown() -> None:
    for words, command in leaf_commands().items():
        shown = run_cli(*words, "--help")
        assert shown.returncode == 0 and shown.stdout.startswith(f"usage: fermix {' '.join(words)} "), words
        text = " ".join(shown.stdout.split())
        for option in command.options:
            assert option.help.strip(), (words, option.flags)
            if option.positional:
                continue
            assert all(flag in text for flag in option.flags), (words, option.flags)
            if cli.shows_default(option.default):
                assert f"(default: {option.default})" in text, (words, option.flags)
    shown = " ".join(run_cli("events", "log", "--help").stdout.split())
    assert "(default: 100)" in shown and "only events after this position (default: 0)" in shown


# --- progress ---------------------------------------------------------------------------------------


def test_import_shows_the_write_phase_on_a_terminal(capsys: pytest.CaptureFixture[str], home: Path,
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_lines(tmp_path / "in.jsonl", *(line(content=f"m{i}") for i in range(3)))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["--home", str(home), "history", "import", str(source)]) == 0
    shown = terminal.getvalue()
    assert "checking [" in shown and "importing [" in shown
    assert len(re.findall(r"\] 3/3\b[^\r\n]*\n", shown)) == 2  # each bar ends once (its rate after the count)


def test_verify_and_replay_show_progress_on_a_terminal_and_replay_ends_once(
        filled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["--home", str(filled), "events", "verify"]) == 0
    assert "verify [" in terminal.getvalue() and terminal.getvalue().endswith("\n")
    terminal.seek(0)
    terminal.truncate()
    assert cli.main(["--home", str(filled), "events", "replay", "--into", str(tmp_path / "rebuilt")]) == 0
    shown = terminal.getvalue()
    assert "replay [" in shown and shown.count("\n") == 1


def test_a_progress_bar_given_the_same_end_twice_prints_it_once() -> None:
    terminal = Terminal()
    progress = cli.Progress("replay", terminal)
    progress(5000, 5000)  # the last batch...
    progress(5000, 5000)  # ...and the end: the same figures
    progress.close()
    assert terminal.getvalue().count("5000/5000") == 1 and terminal.getvalue().count("\n") == 1


# --- text output ------------------------------------------------------------------------------------


def test_events_log_shows_key_and_value(capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    code, out, _ = run(capsys, "--home", str(filled), "events", "log", "--kind", "memory.added")
    assert code == 0
    header, row = out.splitlines()
    assert header == "POSITION\tKIND\tSTREAM\tEVENT"
    assert "\tada/alice  home_city = Lives in Paris  " in row


def test_tables_have_headers(capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    out = run(capsys, "--home", str(filled), "memory", "list")[1].splitlines()
    assert out[0] == "ID\tAGENT\tOWNER\tSCOPE\tCATEGORY\tKEY = VALUE" and out[1].startswith(f"{ROW}\tada\talice\t")
    assert run(capsys, "--home", str(filled), "resource", "list")[1].startswith("NAME\tAGENT/OWNER\tREVISION\t")


def test_one_message_is_singular(capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", line())
    assert run(capsys, "--home", str(home), "history", "import", str(source))[1].startswith("imported 1 message from")
    assert run(capsys, "--home", str(home), "events", "verify")[1].startswith("ok: 1 event,")
    out = run(capsys, "--home", str(home), "history", "export", "-o", str(tmp_path / "out.jsonl"))[1]
    assert out.startswith("exported 1 message to")


def test_verify_names_the_bad_table_and_row_and_never_prints_none(
        capsys: pytest.CaptureFixture[str], filled: Path) -> None:
    conn = apsw.Connection(str(filled / "memory.db"))
    conn.execute(f"UPDATE memories SET value = 'Lives in Rome' WHERE id = {ROW}")
    conn.close()
    code, out, err = run(capsys, "--home", str(filled), "events", "verify")
    assert code == 1
    assert "None" not in out + err
    assert out.startswith("FAILED: projection tables differ from the log: memories")
    assert f"memories row id={ROW} does not match the log" in out


def test_every_command_of_the_table_names_a_function_that_runs_it() -> None:
    for words, command in leaf_commands().items():
        assert callable(command.function()), words
