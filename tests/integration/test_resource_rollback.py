"""``fermix resource rollback``: the text of a revision (reference behaviour, said so), or with
``--rows`` the memory rows it was rendered from, restored as memory events that rebuilds keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.domain import events as ev
from tests.cli_runner import run_cli
from tests.e2e.test_resource_cli import AGENT, OWNER, REV1, REV2, as_json, ok, user_md
from tests.e2e.test_resource_cli import home as home  # the fixture: USER.md revisions 1..3 of ada/alice

pytestmark = pytest.mark.usefixtures("every_store")

ROWS_EVENTS = ("memory.replaced", "memory.archived", "memory.restored")


def revision(home: Path) -> int:
    with MemorySystem.open(home) as m:
        return m.resource_history("user_md", agent_id=AGENT, owner_id=OWNER, limit=1)[0].revision


def test_the_text_comes_back_and_the_command_says_the_next_rebuild_overwrites_it(home: Path) -> None:
    out = ok(home, "resource", "rollback", "user_md", "1")
    assert "revision 1 restored as revision 4" in out and "rows are unchanged" in out and "--rows" in out
    assert user_md(home) == REV1
    with MemorySystem.open(home) as m:
        assert m.rebuild_prompt_files(AGENT, OWNER) == ["user_md"]  # the reference behaviour stays
    assert "Speak German fluently" in user_md(home)


def test_rolling_back_to_what_is_there_records_nothing_and_says_so(home: Path) -> None:
    for args in (("3",), ("3", "--rows")):
        data = as_json(home, "resource", "rollback", "user_md", *args)
        assert (data["changed"], data["revision"], data["matches"], data["rows"]) == (False, 3, True, [])
        assert "nothing to do" in data["note"]
    assert "nothing to do" in ok(home, "resource", "rollback", "user_md", "3")
    assert revision(home) == 3


def test_rows_of_a_revision_come_back_as_memory_events_and_survive_rebuilds(home: Path) -> None:
    with MemorySystem.open(home) as m:
        before = max(item.position for item in m.events())
    data = as_json(home, "resource", "rollback", "user_md", "1", "--rows")
    assert (data["restored"], data["changed"], data["revision"], data["matches"]) == ("rows", True, 4, True)
    assert sorted((o["op"], o["status"]) for o in data["rows"]) == [("archive", "archived"), ("replace", "replaced")]
    assert user_md(home) == REV1
    with MemorySystem.open(home) as m:
        assert m.rebuild_prompt_files(AGENT, OWNER) == []  # file and rows agree: nothing to re-render
        rows = {r.key: r.value for r in m.memories(agent_id=AGENT, owner_id=OWNER, include_archived=False)}
        # MEMORY.md's row is not USER.md's to roll back.
        assert rows == {"name": "Alice", "city": "Lives in Paris", "project": "Zeppelin launch"}
        written = [item.event for item in m.events(after=before) if item.event.kind in ROWS_EVENTS]
        assert [e.kind for e in written] == ["memory.replaced", "memory.archived"]
        assert all(e.provenance.source_type == "rollback" and e.provenance.trust.value == "operator"
                   for e in written if isinstance(e, ev.MemoryReplaced | ev.MemoryArchived))
        assert m.verify().ok
    assert user_md(home) == REV1

    # Back to revision 3: the archived goal is restored, the city replaced again.
    out = ok(home, "resource", "rollback", "user_md", "3", "--rows")
    assert "restore the rows of revision 3" in out and "rebuilds keep it" in out
    assert "Speak German fluently" in user_md(home) and "Lives in Berlin" in user_md(home)
    # Revision 5 rendered the rows of 3; a text rollback (6) of revision 1 shows the rendering
    # of 1, so --rows to 6 brings back the rows of 1.
    ok(home, "resource", "rollback", "user_md", "1")
    assert as_json(home, "resource", "rollback", "user_md", "2", "--rows")["matches"] is True
    assert user_md(home) == REV2
    assert as_json(home, "resource", "rollback", "user_md", "6", "--rows")["matches"] is True
    assert user_md(home) == REV1


def test_errors_are_one_line(home: Path) -> None:
    for args in (("user_md", "99", "--rows"), ("user_md", "99"), ("other_md", "1", "--rows")):
        result = run_cli("resource", "rollback", *args, home=home)
        assert result.returncode != 0 and result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fermix: error: ") and "Traceback" not in result.stderr
    help_text = run_cli("resource", "rollback", "--help", home=home).stdout
    assert "--rows" in help_text and "rebuild" in help_text
