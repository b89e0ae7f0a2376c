"""``IndexUpkeep``: which commits queue a merge of the search index, and how far one job goes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fermix_memory.application.index_upkeep import MAX_STEPS, IndexUpkeep
from fermix_memory.application.store_ports import BULK_EVENTS, RecordedEvent
from fermix_memory.domain.conversation_events import ConversationWindowCleared, MessageAppended
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.values import ConversationKey, Role
from tests.waits import HANG_GUARD_S

AT = datetime(2026, 3, 1, tzinfo=UTC)
KEY = ConversationKey.parse("chat:a")


class Steps:
    """A search index with ``left`` merge steps to do."""

    def __init__(self, left: int) -> None:
        self.left = left
        self.taken = 0
        self.whole: list[bool | None] = []  # what each step was told
        self.meanwhile: Callable[[int], object] = lambda taken: None  # what happens during a step
        self.marked = 0  # catch-ups of message marks asked for

    def mark_messages(self, most: int | None = None) -> int:
        self.marked += 1
        return 0

    def merge_step(self, *, whole: bool | None = None) -> bool:
        self.whole.append(whole)
        if self.left == 0:
            return False
        self.left -= 1
        self.taken += 1
        self.meanwhile(self.taken)
        return True


class Queue:
    """A background worker that only records what it was given."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Any, Callable[[], Any]]] = []

    def submit(self, key: Any, job: Callable[[], Any]) -> None:
        self.jobs.append((key, job))


def appended(position: int) -> RecordedEvent:
    event = MessageAppended(at=AT, agent_id="a", owner_id="o", conversation=KEY, sender="o", role=Role.USER,
                            content="hi", created_at=AT)
    return RecordedEvent(position=position, stream="conversation:a", version=position, event=event)


def cleared(position: int) -> RecordedEvent:
    event = ConversationWindowCleared(at=AT, agent_id="a", conversation=KEY, up_to_message_id=1,
                                      provenance=Provenance(agent_id="a", owner_id="o"))
    return RecordedEvent(position=position, stream="conversation:a", version=position, event=event)


def test_a_commit_that_appended_messages_queues_one_job_under_one_key() -> None:
    queue = Queue()
    upkeep = IndexUpkeep(Steps(0), queue, quiet_s=0, max_wait_s=0)
    upkeep.on_commit([appended(1), appended(2)])
    upkeep.on_commit([cleared(3), appended(4)])  # the job queued has not started: nothing more to queue
    assert [key for key, _ in queue.jobs] == [("search-index-upkeep",)]
    queue.jobs[0][1]()  # the job starts: later appends need a job of their own
    upkeep.on_commit([appended(5)])
    assert [key for key, _ in queue.jobs] == [("search-index-upkeep",)] * 2


def test_at_open_one_job_is_queued_a_moment_later_and_merges_what_a_previous_process_left() -> None:
    queue = Queue()
    index = Steps(3)
    upkeep = IndexUpkeep(index, queue, quiet_s=0, max_wait_s=0)
    upkeep.start(delay_s=0.05)
    assert queue.jobs == []  # a short-lived process has closed by then
    deadline = time.monotonic() + HANG_GUARD_S
    while not queue.jobs:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    upkeep.on_commit([appended(1)])  # the job queued has not started: it sees this append too
    assert [key for key, _ in queue.jobs] == [("search-index-upkeep",)]
    assert queue.jobs[0][1]() == 3 and index.left == 0
    assert index.whole[0] is None  # as the index's size and growth say


def test_a_memory_closed_before_the_moment_queues_nothing_at_open() -> None:
    queue = Queue()
    upkeep = IndexUpkeep(Steps(3), queue, quiet_s=0, max_wait_s=0)
    upkeep.start(delay_s=0.05)
    upkeep.stop()
    time.sleep(0.15)
    assert queue.jobs == []


def test_a_commit_without_messages_queues_nothing() -> None:
    queue = Queue()
    IndexUpkeep(Steps(0), queue).on_commit([cleared(1)])
    IndexUpkeep(Steps(0), queue).on_commit([])
    assert queue.jobs == []


def test_a_job_merges_until_nothing_is_left() -> None:
    index = Steps(5)
    assert IndexUpkeep(index, Queue()).tidy() == 5
    assert index.left == 0


def test_a_job_stops_after_its_step_budget_and_queues_the_next_one_which_goes_on() -> None:
    index, queue = Steps(MAX_STEPS + 3), Queue()
    upkeep = IndexUpkeep(index, queue)
    assert upkeep.tidy() == MAX_STEPS
    assert [key for key, _ in queue.jobs] == [("search-index-upkeep",)]  # no append needed for the rest
    assert queue.jobs[0][1]() == 3
    assert len(queue.jobs) == 1 and index.left == 0  # it ended with the work: nothing more queued
    assert IndexUpkeep(Steps(10), Queue(), max_steps=4).tidy() == 4


def test_a_job_that_merged_everything_within_its_budget_queues_nothing() -> None:
    for left in (0, 1, MAX_STEPS - 1):
        queue = Queue()
        assert IndexUpkeep(Steps(left), queue).tidy() == left
        assert queue.jobs == []


class Clock:
    """A monotonic clock that only moves when slept on (or told to)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_a_job_waits_for_a_pause_in_the_appends_before_merging() -> None:
    clock = Clock()
    index = Steps(2)
    upkeep = IndexUpkeep(index, Queue(), quiet_s=0.05, max_wait_s=1.0, monotonic=clock.monotonic, sleep=clock.sleep)
    upkeep.on_commit([appended(1)])
    clock.now += 0.02  # the job starts 20 ms after the last append
    assert upkeep.tidy() == 2
    assert clock.slept == [0.03]
    clock.now += 5.0  # long after: no wait
    index.left = 1
    assert upkeep.tidy() == 1 and clock.slept == [0.03]


def test_under_a_steady_stream_of_appends_a_job_merges_after_its_longest_wait() -> None:
    clock = Clock()
    index = Steps(1)

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        upkeep.on_commit([appended(2)])  # another message arrived meanwhile

    upkeep = IndexUpkeep(index, Queue(), quiet_s=0.05, max_wait_s=0.2, monotonic=clock.monotonic, sleep=sleep)
    upkeep.on_commit([appended(1)])
    assert upkeep.tidy() == 1
    assert round(sum(clock.slept), 6) == 0.2


def test_after_a_bulk_append_a_pause_merges_the_whole_index_once_and_appends_meanwhile_put_it_off() -> None:
    index, queue = Steps(2), Queue()
    upkeep = IndexUpkeep(index, queue, quiet_s=0, max_wait_s=0)
    upkeep.on_commit([appended(1)])
    assert upkeep.tidy() == 2 and index.whole == [None, None, None]  # no bulk: as size and growth say
    upkeep.on_commit([appended(p) for p in range(2, 2 + BULK_EVENTS)])  # an import
    index.left, index.whole, index.taken = 3, [], 0
    index.meanwhile = lambda taken: upkeep.on_commit([appended(500)]) if taken == 1 else None
    assert upkeep.tidy() == 3
    assert index.whole == [True, False, False, False]  # an append came: the whole merge waits
    index.left, index.whole, index.meanwhile = 1, [], lambda taken: None
    assert upkeep.tidy() == 1 and index.whole == [True, True]  # the next pause: whole, to the end
    index.left, index.whole = 1, []
    assert upkeep.tidy() == 1 and index.whole == [None, None]  # done once: as before


def test_after_a_bulk_append_a_job_that_found_no_pause_merges_levels_only() -> None:
    clock = Clock()
    index = Steps(1)

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        upkeep.on_commit([appended(p) for p in range(BULK_EVENTS)])  # the import's next part

    upkeep = IndexUpkeep(index, Queue(), quiet_s=0.05, max_wait_s=0.2, monotonic=clock.monotonic, sleep=sleep)
    upkeep.on_commit([appended(p) for p in range(BULK_EVENTS)])
    assert upkeep.tidy() == 1
    assert index.whole == [False, False]


def test_while_appends_go_on_a_job_merges_levels_only_and_in_a_pause_as_the_index_says() -> None:
    index = Steps(3)
    upkeep = IndexUpkeep(index, Queue(), quiet_s=0, max_wait_s=0)
    upkeep.on_commit([appended(1)])
    index.meanwhile = lambda taken: upkeep.on_commit([appended(10 + taken)]) if taken == 2 else None
    assert upkeep.tidy() == 3
    assert index.whole == [None, None, False, False]  # in the pause, then once an append came


def test_stop_ends_a_waiting_job_at_once_and_no_merge_starts_after_it() -> None:
    index = Steps(3)
    upkeep = IndexUpkeep(index, Queue(), quiet_s=30.0, max_wait_s=60.0)  # it would wait half a minute
    upkeep.on_commit([appended(1)])
    timer = threading.Timer(0.05, upkeep.stop)
    timer.start()
    started = time.monotonic()
    assert upkeep.tidy() == 0
    assert time.monotonic() - started < 10 and index.left == 3
    timer.join()
