"""Tampering that a valid chain alone cannot show: a cut-off tail, dropped append-only
triggers; and a damaged file, which is a failed verification, not a crash."""

from __future__ import annotations

import errno
import io
import json
import os
import threading
from pathlib import Path

import apsw
import pytest

from fermix_memory import FermixError, MemorySystem
from fermix_memory.adapters import durable_file
from fermix_memory.adapters.sql import head as head_module
from fermix_memory.adapters.sql.head import WRITE_EVERY_EVENTS, BadHeadAnchor, Head, HeadFile, parse_head
from fermix_memory.adapters.sqlite.schema import APPEND_ONLY_TRIGGERS
from fermix_memory.entrypoints.cli import main
from tests.cli_runner import run_cli

CUT = 5


def fill(home: Path, messages: int = 40) -> None:
    with MemorySystem.open(home) as memory:
        for i in range(messages):
            memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                                  content=f"message number {i} " + "padding " * 20)


def cli(*args: str, home: Path) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--home", str(home), *args], stdout=out)
    return code, out.getvalue()


def cut_the_tail(home: Path, count: int = CUT) -> None:
    """What an attacker does: drop the delete trigger, delete the last events and the rows they
    made (so replay still matches), put the trigger back."""
    raw = apsw.Connection(str(home / "memory.db"))
    try:
        with raw:
            raw.execute("DROP TRIGGER events_append_only_delete")
            last = raw.execute("SELECT max(position) FROM events").fetchall()[0][0]
            raw.execute("DELETE FROM events WHERE position > ?", (last - count,))
            raw.execute("DELETE FROM messages WHERE id > ?", (last - count,))
            raw.execute(APPEND_ONLY_TRIGGERS["events_append_only_delete"])
    finally:
        raw.close()


def test_events_head_prints_position_and_hash_and_verify_expect_head_checks_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(home)
    code, text = cli("events", "head", home=home)
    assert code == 0
    anchor = text.strip()
    position, digest = anchor.split(":")
    assert int(position) == 40 and len(digest) == 64
    code, text = cli("events", "head", "--json", home=home)
    assert code == 0 and json.loads(text) == {"position": 40, "hash": digest, "anchor": anchor}
    assert cli("events", "verify", "--expect-head", anchor, home=home)[0] == 0
    wrong = f"{position}:{'0' * 64}"
    assert cli("events", "verify", "--expect-head", wrong, home=home)[0] == 1
    assert cli("events", "verify", "--expect-head", "not-a-head", home=home)[0] == 1


def test_tail_truncation_fails_verify_against_a_kept_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    fill(home)
    with MemorySystem.open(home) as memory:
        kept = memory.head()
    cut_the_tail(home)
    (home / "head").unlink()  # even with the home's own anchor gone too
    code, _ = cli("events", "verify", "--expect-head", str(kept), home=home)
    assert code == 1
    assert "cut off" in capsys.readouterr().err
    with MemorySystem.open(home) as memory:
        report = memory.verify(expect_head=kept)
        assert not report.ok and f"{kept.position}" in report.problem
        assert memory.verify().ok  # without an anchor, a shorter chain is a valid chain


def test_tail_truncation_is_reported_on_open_from_the_homes_own_head(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    fill(home)
    anchor = (home / "head").read_text(encoding="ascii").strip()
    assert anchor.startswith("40:")
    cut_the_tail(home)
    with MemorySystem.open(home) as memory:
        assert "cut off" in caplog.text
        report = memory.verify()
        assert not report.ok and "cut off" in report.problem and "35" in report.problem
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                              content="a new message after the cut")
    # The evidence stays: the anchor is not overwritten while it is unexplained.
    assert (home / "head").read_text(encoding="ascii").strip() == anchor
    with MemorySystem.open(home) as memory:
        assert not memory.verify().ok


def test_the_homes_head_follows_commits_and_a_clean_reopen_verifies(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(home, 3)
    with MemorySystem.open(home) as memory:
        head = memory.head()
        assert (home / "head").read_text(encoding="ascii").strip() == str(head)
        assert memory.verify(expect_head=head).ok and memory.verify(expect_head=str(head)).ok
        with pytest.raises(FermixError, match="POSITION:HASH"):
            memory.verify(expect_head="3:xyz")


def test_dropped_append_only_triggers_are_restored_on_open_and_reported_by_verify(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(home, 5)
    raw = apsw.Connection(str(home / "memory.db"))
    for name in APPEND_ONLY_TRIGGERS:
        raw.execute(f"DROP TRIGGER {name}")
    raw.close()
    code, _ = cli("events", "verify", home=home)  # read-only: reports, changes nothing
    assert code == 1
    with MemorySystem.open(home) as memory:  # a writable open puts them back, and says so once
        report = memory.verify()
        assert not report.ok and "append-only triggers" in report.problem
    with MemorySystem.open(home) as memory:
        conn = apsw.Connection(str(memory.home / "memory.db"))  # another connection, while it is open
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'")}
        assert set(APPEND_ONLY_TRIGGERS) <= names
        with pytest.raises(apsw.ConstraintError):
            conn.execute("DELETE FROM events WHERE position = 1")
        assert memory.verify().ok
    raw = apsw.Connection(str(home / "memory.db"))
    raw.execute("DROP TRIGGER events_redact_only")
    raw.close()
    with MemorySystem.open(home) as memory:
        report = memory.verify()
        assert not report.ok and "events_redact_only" in report.problem and "missing" in report.problem


def test_verify_of_a_file_with_a_corrupt_page_is_a_failed_verification(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    fill(home, 200)
    db = home / "memory.db"
    raw = apsw.Connection(str(db))
    page_size = raw.execute("PRAGMA page_size").fetchall()[0][0]
    [(page,)] = raw.execute("SELECT min(pageno) FROM dbstat WHERE name = 'events' AND pagetype = 'leaf'").fetchall()
    raw.close()
    with db.open("r+b") as fh:
        fh.seek((page - 1) * page_size)
        fh.write(b"\xff" * 64 + b"\x00" * 64)
    code, _ = cli("events", "verify", home=home)
    err = capsys.readouterr().err
    assert code == 1, err
    assert "internal error" not in err and "damaged" in err


def damage(head: Path, form: str) -> None:
    head.unlink()
    if form == "directory":
        head.mkdir()
        return
    anchor = "40:" + "ab" * 32
    head.write_bytes({"empty": b"", "garbage": b"this is not a head\n", "upper-case hex": anchor.upper().encode(),
                      "non-UTF-8": b"40:\xff\xfe" + b"a" * 62 + b"\n", "no newline, cut short": b"40:abc"}[form])


DAMAGED_FORMS = ["empty", "garbage", "upper-case hex", "directory", "non-UTF-8", "no newline, cut short"]


@pytest.mark.parametrize("form", DAMAGED_FORMS)
def test_a_damaged_head_file_warns_keeps_the_memory_usable_and_fails_verify(
        tmp_path: Path, form: str, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    fill(home, 3)
    damage(home / "head", form)
    with MemorySystem.open(home) as memory:
        assert "damaged" in caplog.text and str(home / "head") in caplog.text
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                              content="still usable")
        assert len(memory.messages("ada", "telegram:alice")) == 4
        report = memory.verify()
        assert not report.ok and "damaged" in report.problem and str(home / "head") in report.problem
    assert (home / "head").is_dir() == (form == "directory")  # kept as evidence, not overwritten
    result = run_cli("events", "verify", home=home)
    assert result.returncode == 1 and "internal error" not in result.stderr
    assert "damaged" in result.stdout and str(home / "head") in result.stdout
    result = run_cli("memory", "list", home=home)
    assert result.returncode == 0 and "internal error" not in result.stderr
    if form != "directory":
        (home / "head").unlink()  # the operator accepts the log as it is
        assert run_cli("events", "verify", home=home).returncode == 0


def test_the_head_file_is_replaced_durably_through_an_fsynced_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(durable_file.os, "fsync", fsync)
    home = tmp_path / "home"
    fill(home, 3)
    assert any(Path(p).name.startswith(".head.") for p in synced)  # the new content, before the rename
    assert str(home) in synced  # and the folder, after it
    assert not list(home.glob(".head.*"))


def test_an_anchor_at_position_zero_holds_only_for_an_empty_log(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        assert memory.verify(expect_head=f"0:{'0' * 64}").ok
        assert not memory.verify(expect_head=f"0:{'f' * 64}").ok
    assert not (home / "head").exists()  # an empty log: the head is recorded at the first commit
    fill(home, 3)
    for anchor in (f"0:{'f' * 64}", f"0:{'0' * 64}"):
        result = run_cli("events", "verify", "--expect-head", anchor, home=home)
        assert result.returncode == 1 and "empty log" in result.stdout, result
    (home / "head").write_text(f"0:{'0' * 64}\n", encoding="ascii")
    with MemorySystem.open(home) as memory:
        report = memory.verify()
        assert not report.ok and "empty log" in report.problem


def test_a_new_home_records_its_head_at_its_first_commit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                              content="first")
        assert (home / "head").read_text(encoding="ascii").startswith("1:")  # not only at close


def test_an_expected_head_out_of_range_is_a_typed_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(home, 3)
    with MemorySystem.open(home) as memory:
        digest = memory.head().hash
        for bad in (Head(2**70, digest), Head(-1, digest), Head(True, digest),  # type: ignore[arg-type]
                    Head(3, digest.upper()), Head(3, 7)):  # type: ignore[arg-type]
            with pytest.raises(BadHeadAnchor):
                memory.verify(expect_head=bad)
        with pytest.raises(BadHeadAnchor):
            memory.verify(expect_head=12345)  # type: ignore[arg-type]
    result = run_cli("events", "verify", "--expect-head", f"{2**70}:{digest}", home=home)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "POSITION:HASH" in result.stderr


def test_a_head_that_cannot_be_written_is_one_warning_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    home = tmp_path / "home"
    fill(home, 3)
    monkeypatch.setattr(durable_file.os, "fsync", full)
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                              content="one more")
    [record] = [r for r in caplog.records if "log head" in r.getMessage()]
    assert record.exc_info is None and "No space left" in record.getMessage()
    assert "\n" not in record.getMessage()
    assert (home / "head").read_text(encoding="ascii").startswith("3:")  # the old head, whole
    assert not list(home.glob(".head.*"))


def _join_background_head_writes() -> None:
    for thread in threading.enumerate():
        if thread.name == "fermix-head-anchor":
            thread.join()


def test_the_head_file_is_written_off_the_committing_thread_and_never_goes_backwards(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writers: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        writers.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(durable_file.os, "fsync", fsync)
    heads = {n: Head(n, f"{n:x}".rjust(64, "a")) for n in (5, 7, 9, 2000)}
    anchor = HeadFile(tmp_path / "head")
    anchor.advanced(heads[5], 5)  # the first head of a home: written before the commit returns
    assert parse_head((tmp_path / "head").read_text(encoding="ascii")) == heads[5]
    assert set(writers) == {threading.current_thread().name}
    writers.clear()
    anchor.advanced(heads[9], WRITE_EVERY_EVENTS)  # due: written in the background
    anchor.advanced(heads[7], 1)  # an older head reported late (another thread's commit): ignored
    _join_background_head_writes()
    assert parse_head((tmp_path / "head").read_text(encoding="ascii")) == heads[9]
    assert writers and threading.current_thread().name not in writers
    anchor.flush()
    assert parse_head((tmp_path / "head").read_text(encoding="ascii")) == heads[9]  # still not 7
    anchor.advanced(heads[2000], 1)
    anchor.flush()  # on close: the newest head, at once
    assert parse_head((tmp_path / "head").read_text(encoding="ascii")) == heads[2000]


def test_a_busy_home_keeps_its_head_file_on_a_head_the_log_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(head_module, "WRITE_EVERY_EVENTS", 3)
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        for i in range(20):
            memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                                  content=f"message {i}")
            _join_background_head_writes()
            written = parse_head((home / "head").read_text(encoding="ascii"))
            assert written.position > i - 3 and memory.verify(expect_head=written).ok
        last = memory.head()
    assert parse_head((home / "head").read_text(encoding="ascii")) == last  # on close
