"""SQLite's appends leave a message's marks to a catch-up (ADR-0085): the messages above the mark
wait for theirs; a read of the marks writes them first, so it finds every committed message's
marks; verify and replay hold while some wait; a message retracted while it waited is never marked;
the search index's upkeep and a clean close write them. The store is opened here without the
background upkeep, so what waits stays waiting until a test says otherwise."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import apsw

from fermix_memory import MemorySystem
from fermix_memory.adapters.clock import SystemClock
from fermix_memory.adapters.sql.mark_writes import MARKED_UP_TO
from fermix_memory.adapters.sqlite.audit import replay_into, verify_database
from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.history import HistoryService
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.message_marks import marks_of
from fermix_memory.domain.scopes import HistoryFilter
from fermix_memory.domain.values import ConversationKey, Trust
from fermix_memory.entrypoints.storage import Storage

START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)  # a Monday
TEXTS = ("I met Zebulon Quartermaine in Lisbon last Monday", "plain words", "We fly to Paris on 12 March with Mei",
         "Two weeks ago Oskar lent me his bike")
CHAT = ConversationKey("telegram", "alice")
WHERE = HistoryFilter(agent_id="ada", owner_id="alice")


def append(storage: Storage, texts: tuple[str, ...] = TEXTS, offset: int = 0) -> list[int]:
    history = HistoryService(storage.store, SystemClock())
    return history.append_many([AppendMessage(agent_id="ada", owner_id="alice", conversation=CHAT, role="user",
                                              sender="alice", content=text,
                                              created_at=START + timedelta(hours=i + offset))
                                for i, text in enumerate(texts)])


def stored_marks(home: Path) -> list[tuple[int, str]]:
    conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [(int(i), str(m)) for i, m in conn.execute("SELECT message_id, mark FROM message_marks ORDER BY 1, 2")]
    finally:
        conn.close()


def marked_up_to(home: Path) -> int:
    conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute(f"SELECT {MARKED_UP_TO}").fetchall()[0][0])
    finally:
        conn.close()


def expected(ids: list[int], texts: tuple[str, ...] = TEXTS, offset: int = 0) -> list[tuple[int, str]]:
    return sorted((i, mark) for n, (i, text) in enumerate(zip(ids, texts, strict=True))
                  for mark in marks_of(text, START + timedelta(hours=n + offset)))


def test_an_append_leaves_its_marks_waiting_and_a_read_writes_them_first(storage: Storage, home: Path) -> None:
    ids = append(storage)
    assert expected(ids), "the finders mark these texts"
    assert stored_marks(home) == [] and marked_up_to(home) < min(ids)
    in_march = storage.queries.history_in_days(WHERE, date(2024, 3, 12), date(2024, 3, 12), 10)
    assert [hit.message.id for hit in in_march][:1] == [ids[2]]
    assert stored_marks(home) == expected(ids) and marked_up_to(home) == max(ids)
    more = append(storage, ("Mei said hello",), offset=10)
    assert storage.queries.marks_of(more) == {more[0]: tuple(sorted(marks_of("Mei said hello",
                                                                              START + timedelta(hours=10))))}
    naming = storage.queries.history_naming(WHERE, ["Mei"], 10)
    assert {hit.message.id for hit in naming} == {ids[2], more[0]}


def test_verify_and_replay_hold_while_marks_wait(storage: Storage, home: Path, tmp_path: Path) -> None:
    ids = append(storage)
    storage.queries.marks_of(ids)  # these are marked, the next ones wait
    append(storage, offset=5)
    assert marked_up_to(home) == max(ids)
    report = verify_database(home / "memory.db", readonly=True)
    assert report.ok, report.problem
    rebuilt = replay_into(home / "memory.db", tmp_path / "rebuilt")
    assert rebuilt["identical"], rebuilt["differing_tables"]


def test_a_message_retracted_while_its_marks_wait_is_never_marked(storage: Storage, home: Path) -> None:
    ids = append(storage)
    history = HistoryService(storage.store, SystemClock())
    retracted = history.retract_newest("ada", CHAT, Provenance(agent_id="ada", owner_id="alice", trust=Trust.OPERATOR))
    assert retracted is not None and retracted.id == ids[-1]
    marks = storage.queries.marks_of(ids)
    assert ids[-1] not in marks
    assert stored_marks(home) == expected(ids[:-1], TEXTS[:-1])


def test_the_upkeep_and_a_clean_close_write_the_waiting_marks(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        first = [memory.append_message(agent_id="ada", owner_id="alice", conversation=str(CHAT), role="user",
                                       sender="alice", content=text, created_at=START + timedelta(hours=i))
                 for i, text in enumerate(TEXTS)]
        memory.wait_for_background()
        assert stored_marks(home) == expected(first)
        last = memory.append_message(agent_id="ada", owner_id="alice", conversation=str(CHAT), role="user",
                                     sender="alice", content=TEXTS[0], created_at=START + timedelta(hours=9))
    assert marked_up_to(home) == last
    assert stored_marks(home) == sorted([*expected(first), *((last, m) for m in marks_of(TEXTS[0],
                                                                                         START + timedelta(hours=9)))])
