"""``events import``: what is appended is what was checked, whatever the file does between the
check and the append: the whole checked log goes in, never a first batch and then an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application import log_transfer
from fermix_memory.application.errors import EventFileError

pytestmark = pytest.mark.usefixtures("every_store")


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The event file of a home of 120 messages (always a SQLite home: the test's store is the target)."""
    with monkeypatch.context() as m:
        m.delenv("FERMIX_DATABASE_URL", raising=False)
        with MemorySystem.open(tmp_path / "source") as memory:
            for n in range(120):
                memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                                      sender="alice", content=f"message {n}\nwith a second line")
            return [line.rstrip("\n") for line in memory.export_events()]


def tampered(lines: list[str]) -> list[str]:
    """The same file with the 60th event's chain hash changed: it no longer links."""
    changed = list(lines)
    event = json.loads(changed[60])
    event["hash"] = "0" * len(event["hash"])
    changed[60] = json.dumps(event, sort_keys=True, separators=(",", ":"))
    return changed


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_transfer, "BATCH", 40)


def test_a_file_that_changes_after_its_check_is_imported_as_it_was_checked(exported: list[str],
                                                                         tmp_path: Path) -> None:
    opened: list[int] = []

    def lines() -> list[str]:
        opened.append(1)
        return exported if len(opened) == 1 else tampered(exported)

    with MemorySystem.open(tmp_path / "home") as memory:
        report = memory.import_events(lines)
        assert report.appended == report.events == len(exported) - 1
        assert [line.rstrip("\n") for line in memory.export_events()] == exported
        assert memory.verify().ok
    assert len(opened) == 1


def test_a_file_rewritten_while_it_is_checked_is_imported_as_it_was_checked(exported: list[str],
                                                                          tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(exported) + "\n", encoding="utf-8")

    def rewrite(done: int, total: int) -> None:
        path.write_text("\n".join(tampered(exported)) + "\n", encoding="utf-8")

    with MemorySystem.open(tmp_path / "home") as memory:
        report = memory.import_events(lambda: path.read_text(encoding="utf-8").split("\n")[:-1], checked=rewrite)
        assert report.appended == len(exported) - 1
        assert [line.rstrip("\n") for line in memory.export_events()] == exported


@pytest.mark.sqlite_only("no store is involved: the copy of the lines alone")
def test_held_lines_give_back_every_line_as_read_and_refuse_a_second_read_before_the_end(tmp_path: Path) -> None:
    from fermix_memory.entrypoints.api.held_lines import HeldLines

    odd = ["plain", "two\nlines", "\x00starts with the mark", "lone \udc80 surrogate", "", "\u2028 \r end"]
    with HeldLines(lambda: iter(odd), tmp_path) as held:
        first = held()
        assert next(first) == "plain"
        with pytest.raises(EventFileError, match="before it had been read to its end"):
            held()
        assert [*first] == odd[1:]
        assert list(held()) == odd and list(held()) == odd
    with HeldLines(lambda: 42, tmp_path) as held, pytest.raises(EventFileError, match="must give its lines"):  # type: ignore[arg-type, return-value]
        next(iter(held()))
