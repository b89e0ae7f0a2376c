"""``verify`` reports progress through the whole check, not only the hash-chain walk: the index
check (SQLite's FTS5 integrity check and scope sizes) and the replay into a scratch database
report too, as one count that only rises to its total (ADR-0038)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.audit_chain import Stages
from fermix_memory.adapters.sqlite.schema import PROJECTION_TABLES

pytestmark = pytest.mark.usefixtures("every_store")

MESSAGES = 3000


def _lines(count: int) -> list[str]:
    return [json.dumps({"agent_id": "a", "owner_id": f"o{k % 7}", "channel": "test", "chat_id": f"c{k % 11}",
                        "role": "user", "sender": "u", "content": f"message {k} about tea and boats",
                        "created_at": "2024-03-01T10:00:00+00:00"}) for k in range(count)]


def test_verify_reports_progress_during_the_index_check_and_the_replay(tmp_path: Path, every_store: str) -> None:
    calls: list[tuple[int, int]] = []
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.import_history(_lines(MESSAGES))
        memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "tea"},
                            agent_id="a", owner_id="o1", writer="operator", trust="operator", source_type="test")
        events = sum(1 for _ in memory.events())
        report = memory.verify(lambda done, total: calls.append((done, total)))
    assert report.ok, report.problem
    assert report.events == events >= MESSAGES
    totals = {total for _, total in calls}
    assert len(totals) == 1, calls  # one count over the whole check
    total = totals.pop()
    dones = [done for done, _ in calls]
    assert dones == sorted(dones), calls
    assert dones[-1] == total
    # The chain walk and the replay each read every event: the replay alone is at least half.
    assert total >= 2 * events
    # Before the replay began, something was reported: the chain walk's end is not the check's end.
    assert any(0 < done <= total - events for done in dones), calls
    # SQLite's index check reports each step (both full-text indexes, the scope sizes), before
    # the chain walk (PostgreSQL's search index is the server's own: no such phase); then the
    # chain walk, the replay, and each table checksummed on both sides.
    steps = 3 if every_store == "sqlite" else 0
    assert len(set(dones)) >= steps + 2 + 2 * len(PROJECTION_TABLES), calls


def test_replay_reports_progress_through_the_index_builds_and_the_checksums(tmp_path: Path,
                                                                            every_store: str) -> None:
    calls: list[tuple[int, int]] = []
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.import_history(_lines(MESSAGES))
        result = memory.replay_into(tmp_path / "copy", lambda done, total: calls.append((done, total)))
    assert result["identical"], result
    totals = {total for _, total in calls}
    assert len(totals) == 1, calls
    total = totals.pop()
    dones = [done for done, _ in calls]
    assert dones == sorted(dones) and dones[-1] == total, calls
    # After the rows are copied, the index builds (at least both full-text rebuilds and the scope
    # sizes) and each table checksummed on both sides still report, and on SQLite the copy's
    # index check (both full-text indexes, the scope sizes).
    index_check = 3 if every_store == "sqlite" else 0
    assert len(set(dones)) >= 1 + 3 + 2 * len(PROJECTION_TABLES) + index_check, calls


@pytest.mark.sqlite_only("the stages helper needs no store")
def test_stages_scale_each_stage_into_its_share_and_only_rise() -> None:
    seen: list[tuple[int, int]] = []
    stages = Stages(lambda done, total: seen.append((done, total)), [10, 30, 60])
    first, second, third = stages.stage(), stages.stage(), stages.stage()
    assert first is not None and second is not None and third is not None
    first(1, 2)
    first(2, 2)
    second(5, 0)  # a stage with nothing to do is complete
    third(30, 60)
    third(90, 60)  # more than it expected never passes its share
    assert seen == [(5, 100), (10, 100), (40, 100), (70, 100), (100, 100)]
    quiet = Stages(None, [1, 2])
    assert quiet.stage() is None and quiet.stage() is None
