"""The caches' reads of the log's position: once per prompt, at each call otherwise."""

from __future__ import annotations

import threading

from fermix_memory.application.log_position import PositionReads


def counting() -> tuple[PositionReads, list[int]]:
    reads: list[int] = []

    def last_position() -> int:
        reads.append(len(reads) + 1)
        return len(reads) * 10

    return PositionReads(last_position), reads


def test_outside_a_scope_every_call_reads_the_log() -> None:
    positions, reads = counting()
    assert [positions(), positions(), positions()] == [10, 20, 30] and len(reads) == 3


def test_inside_a_scope_the_first_call_reads_and_the_others_get_the_same_position() -> None:
    positions, reads = counting()
    with positions:
        assert len(reads) == 0  # nothing read until a cache asks
        assert [positions(), positions(), positions()] == [10, 10, 10]
    assert len(reads) == 1
    assert positions() == 20  # after the scope, read again
    with positions:
        assert positions() == 30  # a new scope reads anew


def test_a_scope_holds_only_for_its_own_thread() -> None:
    positions, reads = counting()
    seen: list[int] = []
    with positions:
        first = positions()
        other = threading.Thread(target=lambda: seen.extend([positions(), positions()]))
        other.start()
        other.join()
        assert positions() == first
    assert seen == [20, 30] and len(reads) == 3
