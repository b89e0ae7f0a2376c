"""A ``fermix storage migrate`` killed midway (ADR-0051): the target holds a valid prefix of the
log that would pass ``events verify``, so it carries the mark of an unfinished copy. Every open
refuses it, naming the command that finishes it; ``storage migrate --resume`` finishes it, and
the result is the uncut migration's: the same events, a verifying log, the same tables."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fermix_memory import MemorySystem, UnfinishedCopy
from tests.cli_runner import run_cli

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

# The real command, in a child process, copying 40 events per transaction. Its stderr passes for
# a terminal, so the copy draws its progress bar: once the bar shows a first batch committed but
# not the last, the child says so on stdout and waits there to be killed.
CHILD = """
import re, sys, threading
from fermix_memory.application import log_transfer
from fermix_memory.entrypoints import cli

log_transfer.BATCH = 40


class Terminal:
    def __init__(self, stream):
        self.stream = stream

    def isatty(self):
        return True

    def write(self, text):
        if text.startswith("\\rcopying"):
            done, total = (int(n) for n in re.search(r" (\\d+)/(\\d+)", text).groups())
            if 0 < done < total:
                print(f"copied {done} of {total}", flush=True)
                threading.Event().wait()
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


sys.stderr = Terminal(sys.stderr)
sys.exit(cli.main(sys.argv[1:]))
"""


def fill(memory: MemorySystem) -> None:
    """Messages in two conversations and facts, no erasure: a cut copy of it verifies as it is."""
    for i in range(60):
        for owner in ("alice", "bob"):
            memory.append_message(agent_id="ada", owner_id=owner, conversation=("telegram:42", "slack:C1")[i % 2],
                                  role="user", sender=owner, content=f"message {i} from {owner} \u2615")
    for owner in ("alice", "bob"):
        memory.write_memory({"op": "add", "category": "identity", "key": "home", "value": f"{owner} lives in Lyon"},
                            agent_id="ada", owner_id=owner, trust="operator")


def on_database(folder: Path, url: str) -> Path:
    """A home folder whose memory lives in the database at ``url``."""
    folder.mkdir(exist_ok=True)
    (folder / "config.toml").write_text(f'[fermix_core.storage]\nurl = "{url}"\n', encoding="utf-8")
    return folder


def cut_migration(source: Path, to: str) -> str:
    """Run ``storage migrate --to`` in a child and SIGKILL it once a first batch is copied; what it said."""
    env = {k: v for k, v in os.environ.items() if k != "FERMIX_DATABASE_URL"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, "--home", str(source), "storage", "migrate", "--to", to],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        said = child.stdout.readline() if child.stdout is not None else ""  # the condition: a batch is in
    finally:
        os.kill(child.pid, signal.SIGKILL)
        _, errors = child.communicate()
    assert said.startswith("copied 40 of "), errors
    assert child.returncode == -signal.SIGKILL
    return said


def exported(home: Path) -> str:
    result = run_cli("events", "export", "-", home=home)
    assert result.returncode == 0, result.stderr
    return result.stdout


def checksums(home: Path) -> dict[str, str]:
    result = run_cli("events", "verify", "--json", home=home)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    sums: dict[str, str] = report["table_checksums"]
    return sums


def refused_everywhere(target: Path, source: Path, to: str) -> None:
    """Every command, and the embedding API, refuses the cut copy with one line naming the remedy."""
    remedy = f"fermix --home {shlex.quote(str(source.resolve()))} storage migrate --to {shlex.quote(to)} --resume"
    log = exported(source).encode("utf-8")
    for argv in (("events", "verify"), ("events", "head"), ("memory", "list"), ("history", "export"),
                 ("resource", "list"), ("events", "import", "-", "--resume")):
        result = run_cli(*argv, home=target, stdin=log)
        assert result.returncode == 1, (argv, result.stdout, result.stderr)
        assert result.stderr.count("\n") == 1 and "unfinished copy" in result.stderr, (argv, result.stderr)
        assert remedy in result.stderr, result.stderr
    again = run_cli("storage", "migrate", "--to", to, home=source)
    assert again.returncode == 1 and remedy in again.stderr and again.stderr.count("\n") == 1, again.stderr
    for readonly in (False, True):
        with pytest.raises(UnfinishedCopy, match="unfinished copy"):
            MemorySystem.open(target, create=False, readonly=readonly)


def resumed_as_if_never_cut(source: Path, target: Path, to: str) -> None:
    result = run_cli("storage", "migrate", "--to", to, "--resume", "--json", home=source)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verified"] is True and 40 <= report["events"] - report["appended"] < report["events"]
    assert report["target_head"] == report["source_head"]
    assert exported(target) == exported(source)
    assert checksums(target) == checksums(source)  # verify rebuilds every table from the log: replay agrees
    with MemorySystem.open(target) as memory:  # an ordinary memory again
        assert memory.verify().ok


@pytest.fixture
def no_database_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)


Prepare = Callable[[Path, str], tuple[Path, Path, str]]


def sqlite_to_postgresql(tmp_path: Path, url: str) -> tuple[Path, Path, str]:
    source = tmp_path / "source"
    with MemorySystem.open(source) as memory:
        fill(memory)
    return source, on_database(tmp_path / "on-db", url), url


def postgresql_to_sqlite(tmp_path: Path, url: str) -> tuple[Path, Path, str]:
    source = on_database(tmp_path / "source", url)
    with MemorySystem.open(source) as memory:
        fill(memory)
    target = tmp_path / "moved"
    return source, target, str(target)


@pytest.mark.usefixtures("no_database_variable")
@pytest.mark.parametrize("prepare", [sqlite_to_postgresql, postgresql_to_sqlite])
def test_a_migration_killed_midway_is_refused_until_resume_finishes_it(tmp_path: Path, postgres_url: str,
                                                                       prepare: Prepare) -> None:
    source, target, to = prepare(tmp_path, postgres_url)
    cut_migration(source, to)
    refused_everywhere(target, source, to)
    resumed_as_if_never_cut(source, target, to)


@pytest.mark.usefixtures("no_database_variable")
def test_a_migration_that_fits_in_one_batch_leaves_no_mark(tmp_path: Path) -> None:
    source = tmp_path / "source"
    with MemorySystem.open(source) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                              sender="alice", content="one message")
    result = run_cli("storage", "migrate", "--to", str(tmp_path / "moved"), home=source)
    assert result.returncode == 0, result.stderr
    assert run_cli("events", "verify", home=tmp_path / "moved").returncode == 0
