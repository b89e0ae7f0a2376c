"""The memory as of a moment agrees with a full replay of the log stopped at that moment
(ADR-0033): random histories of adds, replaces, archives, restores and prompt-file rollbacks by
several owners (the operator's standing rules among them, which every owner's MEMORY.md shows);
then, at every moment the history has and before its first, the rows and both prompt files of
each owner are compared with those of a fresh SQLite database into which the log's events up to
that moment were projected one by one, as ``events replay`` does."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from itertools import groupby
from pathlib import Path
from typing import Any

import apsw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.event_log import read_log
from fermix_memory.adapters.sql.projections import project
from fermix_memory.adapters.sql.rows import MEMORY_COLUMNS, memory_from_row
from fermix_memory.adapters.sqlite.schema import migrate
from fermix_memory.domain.memory import Memory
from tests.manual_clock import START, TestClock

AGENT = "ada"
OWNERS = ("alice", "bob", "olga")
KEYS = ("city", "tone")  # few keys: the same row is replaced, archived and restored often
CATEGORIES = ("identity", "preference", "context", "directive")

steps = st.lists(st.tuples(
    st.sampled_from(OWNERS),
    st.sampled_from(("add", "replace", "archive", "restore", "rollback")),
    st.sampled_from(KEYS),
    st.sampled_from(CATEGORIES),
    st.sampled_from(("Paris", "Lyon", "tea", "coffee", "brief", "")),
    st.sampled_from((0, 0, 1, 60)),  # seconds the clock moves first: equal times happen too
), min_size=1, max_size=16)


def run_history(m: MemorySystem, clock: TestClock, history: list[tuple[Any, ...]]) -> None:
    for owner, op, key, category, value, wait in history:
        clock.advance(seconds=wait)
        rows = {r.key: r for r in m.memories(agent_id=AGENT, owner_id=owner)}
        row = rows.get(key)
        if op == "rollback":  # the operator brings back the file's first rendering
            current = m.resources(agent_id=AGENT, owner_id=owner)
            if any(r.name == "user_md" and r.revision > 1 for r in current):
                m.resource_rollback("user_md", 1, agent_id=AGENT, owner_id=owner)
        elif op == "add" or row is None:
            m.write_memory({"op": "add", "category": category, "key": key, "value": value or "x"},
                           agent_id=AGENT, owner_id=owner, trust="operator")
        elif op == "replace":
            m.write_memory({"op": "replace", "id": row.id, "value": value or "y"}, agent_id=AGENT, owner_id=owner,
                           trust="operator")
        elif op == "archive":
            m.write_memory({"op": "archive", "id": row.id}, agent_id=AGENT, owner_id=owner, trust="operator")
        elif row.archived:
            m.restore(row.id)


class Replay:
    """A fresh database that the log's events are projected into, in log order."""

    def __init__(self, folder: Path) -> None:
        self.db = apsw.Connection(str(folder / "replay.db"))
        migrate(self.db, "replay.db")

    def project(self, position: int, event: Any) -> None:
        with self.db:
            project(self.db.cursor(), position, event)

    def memories(self, owner: str) -> list[Memory]:
        rows = self.db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? AND owner_id = ?"
                               " ORDER BY id", (AGENT, owner)).fetchall()
        return [memory_from_row(tuple(r)) for r in rows]

    def file(self, owner: str, name: str) -> str | None:
        rows = self.db.execute(
            "SELECT v.content FROM resources r JOIN resource_revisions v ON v.agent_id = r.agent_id"
            " AND v.owner_id = r.owner_id AND v.name = r.name AND v.revision = r.current_revision"
            " WHERE r.agent_id = ? AND r.owner_id = ? AND r.name = ?", (AGENT, owner, name)).fetchall()
        return rows[0][0] if rows else None


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=steps)
def test_as_of_agrees_with_a_replay_stopped_at_the_same_moment(history: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder, clock = Path(tmp), TestClock(START)
        with MemorySystem.open(folder / "home", clock=clock) as m:
            run_history(m, clock, history)
            log = apsw.Connection(str(folder / "home" / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
            events = list(read_log(log.cursor()))
            log.close()
            replay = Replay(folder)

            def agree(moment: Any) -> None:
                for owner in OWNERS:
                    assert m.memories(agent_id=AGENT, owner_id=owner, as_of=moment) == replay.memories(owner)
                    for name in ("user_md", "memory_md"):
                        found = m.resource_as_of(name, moment, agent_id=AGENT, owner_id=owner)
                        assert (found.content if found else None) == replay.file(owner, name)

            agree(START - timedelta(seconds=1))  # before the first event: nothing
            for moment, recorded in groupby(events, key=lambda item: item.event.at):
                for item in recorded:
                    replay.project(item.position, item.event)
                agree(moment)
            replay.db.close()
