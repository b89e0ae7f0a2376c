"""The change feed's count of what a store handed to its listeners: what a (re)started feed must
still hand over is exactly what no commit, notification or earlier catch-up brought."""

from __future__ import annotations

import itertools
import random

from hypothesis import given
from hypothesis import strategies as st

from fermix_memory.adapters.postgres.change_feed import Heard


def test_writes_heard_out_of_order_leave_exactly_the_unheard_ones_missing() -> None:
    heard = Heard(10)
    assert heard.missing(1, 10) == [] and heard.missing(11, 20) == [(11, 20)]
    heard.add(14, 15)  # an own commit after a foreign write (11..13) not heard yet
    heard.add(18, 18)
    assert heard.through == 10
    assert heard.missing(11, 20) == [(11, 13), (16, 17), (19, 20)]
    assert heard.missing(14, 15) == [] and heard.missing(15, 17) == [(16, 17)]
    heard.add(11, 13)
    assert heard.through == 15 and heard.missing(11, 20) == [(16, 17), (19, 20)]
    heard.add(16, 17)
    assert heard.through == 18 and heard.missing(1, 20) == [(19, 20)]
    heard.add(12, 19)  # heard again: nothing changes but what was missing
    assert heard.through == 19 and heard.missing(1, 19) == []


@given(st.lists(st.integers(1, 30), min_size=1, max_size=15), st.randoms())
def test_any_order_of_writes_gives_the_same_count(sizes: list[int], rng: random.Random) -> None:
    writes, position = [], 0
    for size in sizes:
        writes.append((position + 1, position + size))
        position += size
    heard_ones = rng.sample(writes, rng.randint(0, len(writes)))
    heard = Heard(0)
    for first, last in heard_ones:
        heard.add(first, last)
    unheard = {p for first, last in writes if (first, last) not in heard_ones for p in range(first, last + 1)}
    gaps = heard.missing(1, position)
    assert {p for first, last in gaps for p in range(first, last + 1)} == unheard
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(gaps))  # ordered, apart
    assert heard.through == (min(unheard) - 1 if unheard else position)
