"""The history index is kept in few segments by background merge steps after appends (ADR-0020)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from fermix_memory import BackgroundTimeout, MemorySystem
from fermix_memory.adapters.sqlite import search_index
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.search_index import SqliteSearchIndex, is_small, segment_pages
from fermix_memory.application import index_upkeep
from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.index_upkeep import IndexUpkeep
from fermix_memory.application.store_ports import BULK_EVENTS
from fermix_memory.entrypoints.bootstrap import bootstrap
from fermix_memory.entrypoints.home import open_store

AGENT = "companion"
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
WORDS = ["pottery", "climbing", "bakery", "quarterly", "report", "sister", "film", "weather", "bread", "walls",
         "station"]


def chat(memory: MemorySystem, count: int, *, first: int = 0) -> None:
    """``count`` messages, one append (one transaction) each, as a chat host stores them."""
    for i in range(first, first + count):
        memory.append_message(agent_id=AGENT, owner_id="alice", conversation="chat:a", role="user", sender="alice",
                              content=f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} turn {i}",
                              created_at=START + timedelta(minutes=i))


def chat_in_segments(memory: MemorySystem, count: int) -> None:
    """``count`` messages, each tenth followed by a search: each search's catch-up writes the
    entries waiting as one segment (ADR-0091), as a host that searches between turns."""
    for first in range(0, count, 10):
        chat(memory, min(10, count - first), first=first)
        found(memory, "pottery")


def segments(home: Path) -> int:
    """How many segments ``messages_fts`` is made of (each has rows in its ``_idx`` table)."""
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        return int(conn.execute("SELECT count(DISTINCT segid) FROM messages_fts_idx").fetchall()[0][0])
    finally:
        conn.close()


def found_in(home: Path, query: str) -> list[int]:
    with MemorySystem.open(home) as memory:
        return found(memory, query)


def found(memory: MemorySystem, query: str) -> list[int]:
    return [h.message.id for h in memory.recall(query, agent_id=AGENT, owner_id="alice", conversation="chat:a",
                                                source="history", limit=50).messages]


def test_appends_leave_the_merging_to_the_background_which_makes_a_small_index_one_segment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    gate = threading.Event()
    worker = BackgroundWorker("test-upkeep")
    with MemorySystem(bootstrap(home, background=worker)) as memory:
        # The worker is busy: appends still return at once, the index grows segments meanwhile.
        held = worker.submit(("held",), gate.wait)
        chat_in_segments(memory, 120)
        assert segments(home) > 3
        before = found(memory, "pottery bakery")
        gate.set()
        held.result(10)
        memory.wait_for_background()
        assert segments(home) == 1
        assert found(memory, "pottery bakery") == before  # merging changes nothing a search returns


def test_waiting_for_the_background_waits_for_the_work_that_work_queued_within_one_timeout(tmp_path: Path) -> None:
    worker = BackgroundWorker("test-chain")
    done: list[int] = []
    endless = threading.Event()

    def job(n: int) -> None:
        time.sleep(0.005)
        done.append(n)
        if n < 3 or endless.is_set():  # a long merge goes on in jobs that queue one another
            worker.submit(("chain",), lambda: job(n + 1))

    with MemorySystem(bootstrap(tmp_path / "home", background=worker)) as memory:
        worker.submit(("chain",), lambda: job(0))
        memory.wait_for_background()
        assert done == [0, 1, 2, 3]
        endless.set()
        worker.submit(("chain",), lambda: job(100))
        started = time.monotonic()
        with pytest.raises(BackgroundTimeout):
            memory.wait_for_background(timeout=0.2)  # bounds the whole wait, not each job's
        assert time.monotonic() - started < 10
        endless.clear()
        memory.wait_for_background()
    assert done[-1] > 100


def test_without_the_background_the_index_stays_as_fts5_leaves_it(tmp_path: Path) -> None:
    shut_down = BackgroundWorker("test-shut-down")
    shut_down.close()  # work submitted to it never runs
    home = tmp_path / "home"
    with MemorySystem(bootstrap(home, background=shut_down)) as memory:
        chat_in_segments(memory, 120)
    assert segments(home) > 3


def test_an_index_a_process_left_in_segments_is_merged_when_the_memory_next_opens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shut_down = BackgroundWorker("test-shut-down")
    shut_down.close()  # as a process that ended before its background ran (an import from the command line)
    home = tmp_path / "home"
    with MemorySystem(bootstrap(home, background=shut_down)) as memory:
        chat_in_segments(memory, 120)
        before = found(memory, "pottery bakery")
    assert segments(home) > 3
    monkeypatch.setattr(index_upkeep, "OPEN_DELAY_S", 0.0)
    with MemorySystem.open(home) as memory:  # no append: the opening alone queues the merge
        time.sleep(0.1)  # the moment after opening
        memory.wait_for_background()
        assert segments(home) == 1
        assert found(memory, "pottery bakery") == before


def test_a_large_index_is_merged_level_by_level_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shut_down = BackgroundWorker("test-shut-down")
    shut_down.close()
    home = tmp_path / "home"
    with MemorySystem(bootstrap(home, background=shut_down)) as memory:
        chat_in_segments(memory, 300)
        before = found(memory, "pottery bakery")
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        assert is_small(conn)
        monkeypatch.setattr(search_index, "SMALL_INDEX_PAGES", 2)
        assert not is_small(conn)  # too large to be rewritten whole at every append
    finally:
        conn.close()
    store = open_store(home)
    try:
        steps = 0
        while SqliteSearchIndex(store).merge_step():
            steps += 1
    finally:
        store.close()
    # Levels of two or more segments merged, in cascade (a chat this small ends in one segment).
    assert steps >= 1 and segments(home) < 3
    with MemorySystem.open(home) as memory:
        assert found(memory, "pottery bakery") == before


def test_a_large_index_is_merged_whole_once_its_other_segments_reach_an_eighth_of_its_largest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shut_down = BackgroundWorker("test-shut-down")
    shut_down.close()  # only the steps below merge
    home = tmp_path / "home"

    def talk(first: int, count: int) -> None:
        with MemorySystem(bootstrap(home, background=shut_down)) as memory:
            for i in range(first, first + count):
                words = (f"{WORDS[(i * 7 + j) % len(WORDS)]}{(i * 31 + j * 17) % 997}" for j in range(40))
                memory.append_message(agent_id=AGENT, owner_id="alice", conversation="chat:a", role="user",
                                      sender="alice", content=" ".join(words), created_at=START + timedelta(minutes=i))
                found(memory, "pottery")  # the catch-up writes a segment per turn (ADR-0091)

    def merged() -> list[int]:
        """Merge until nothing is left; the leaf pages of each segment then."""
        store = open_store(home)
        try:
            while SqliteSearchIndex(store).merge_step():
                pass
        finally:
            store.close()
        conn = apsw.Connection(str(home / "memory.db"))
        try:
            return segment_pages(conn)
        finally:
            conn.close()

    talk(0, 300)
    [largest] = merged()  # small: one segment
    monkeypatch.setattr(search_index, "SMALL_INDEX_PAGES", 2)  # from now on the index is large
    monkeypatch.setattr(search_index, "GROWTH_BEFORE_WHOLE", 0)  # no growth is ever enough
    for first in range(300, 340, 5):  # turns, merged as they come
        talk(first, 5)
        pages = merged()
        assert len(pages) >= 2 and max(pages) == largest  # levels only: the largest was not rewritten
    before = found_in(home, "climbing")
    monkeypatch.setattr(search_index, "GROWTH_BEFORE_WHOLE", 8)
    assert (sum(pages) - largest) * 8 >= largest  # the others hold an eighth of it: merged whole
    assert len(merged()) == 1
    assert found_in(home, "climbing") == before


def test_after_an_import_the_next_pause_merges_even_a_large_index_into_one_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_index, "SMALL_INDEX_PAGES", 2)  # every index here is large
    monkeypatch.setattr(search_index, "GROWTH_BEFORE_WHOLE", 0)  # and no growth merges it whole
    home = tmp_path / "home"

    def lines(first: int, count: int) -> list[str]:
        return [json.dumps({"agent_id": AGENT, "owner_id": "alice", "channel": "chat", "chat_id": "b",
                            "role": "user", "sender": "alice", "message_id": f"m{i}", "content": " ".join(
                                f"{WORDS[(i * 7 + j) % len(WORDS)]}{(i * 31 + j * 17) % 997}" for j in range(40))})
                for i in range(first, first + count)]

    with MemorySystem.open(home) as memory:
        chat(memory, 3)
        memory.import_history(lines(0, 3 * BULK_EVENTS))  # written as several segments, by levels two
        memory.wait_for_background()
        assert segments(home) == 1
        chat(memory, 3, first=3)
        before = found(memory, "pottery bakery")
        asked: list[bool | None] = []  # how each merge step after it was asked to merge
        merge_step = SqliteSearchIndex.merge_step

        def recorded(index: SqliteSearchIndex, *, whole: bool | None = None) -> bool:
            asked.append(whole)
            return merge_step(index, whole=whole)

        monkeypatch.setattr(SqliteSearchIndex, "merge_step", recorded)
        memory.import_history(lines(1000, BULK_EVENTS // 2))  # not a bulk append: levels only
        memory.wait_for_background()
        # One catch-up segment (ADR-0091) may merge by levels alone into the large one; what
        # matters is that the pause never asked for the whole index to be rewritten.
        assert asked and True not in asked
        assert found(memory, "pottery bakery") == before  # the import was in another conversation


def test_merge_steps_write_no_event_and_keep_the_log_and_indexes_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        chat(memory, 60)
        memory.wait_for_background()
        head = memory.head()
    store = open_store(home)
    try:
        assert SqliteSearchIndex(store).merge_step() is False  # nothing was left to merge
    finally:
        store.close()
    with MemorySystem.open(home) as memory:
        assert memory.head() == head
        assert memory.verify().ok


def test_a_merge_on_a_full_disk_is_one_warning_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    shut_down = BackgroundWorker("test-shut-down")
    shut_down.close()  # no merge yet: the index is many segments
    with MemorySystem(bootstrap(home, background=shut_down)) as memory:
        chat_in_segments(memory, 60)
    worker = BackgroundWorker("test-upkeep")
    store = open_store(home)
    try:
        # SQLite's own "database or disk is full": the file may not grow by a page.
        store.write(lambda tx: tx.cursor.execute("PRAGMA max_page_count = 1"))  # at most what it has
        upkeep = IndexUpkeep(SqliteSearchIndex(store), worker, quiet_s=0, max_wait_s=0)
        assert upkeep.tidy() == 0
    finally:
        store.close()
        worker.close()
    [record] = [r for r in caplog.records if "search index" in r.getMessage()]
    assert record.levelname == "WARNING" and record.exc_info is None and "full" in record.getMessage()
    assert "\n" not in record.getMessage()



def _batched_together(store: SqliteEventStore, writes: list[Callable[[], object]]) -> None:
    """Run ``writes`` (each in its own thread) as ONE batch: they queue while the writer is held."""
    threads = [threading.Thread(target=w) for w in writes]
    with store.exclusive("held"):
        for t in threads:
            t.start()
        while store.queued_writes() < len(writes):  # each thread queued its write behind the held writer
            time.sleep(0)
    for t in threads:
        t.join()


def test_a_lone_writer_after_a_batch_shared_with_a_merge_does_not_wait_for_more_writers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        chat(memory, 40)  # the index has segments to merge
    store = open_store(home)
    index = SqliteSearchIndex(store)
    append = store.write
    try:
        note = "INSERT INTO messages_fts(messages_fts, rank) VALUES ('automerge', 8)"
        # A host write shares its batch with a merge step: the next lone write commits at once.
        _batched_together(store, [lambda: append(lambda tx: tx.cursor.execute(note)), index.merge_step])
        append(lambda tx: tx.cursor.execute(note))
        assert store.gathers == 0
        # Two host writes shared a batch: the next one gives others a moment to join it (group commit).
        _batched_together(store, [lambda: append(lambda tx: tx.cursor.execute(note))] * 2)
        append(lambda tx: tx.cursor.execute(note))
        assert store.gathers == 1
    finally:
        store.close()
    with MemorySystem.open(home) as memory:
        assert memory.verify().ok
