"""What one wake-up of the change feed brings is coalesced (ADR-0064): one set of streams, each
chain's last position, and a note only for the eager writes."""

from __future__ import annotations

import pytest

from fermix_memory.adapters.postgres.change_feed import Heard, payload


def rest(text: str) -> str:
    return text.partition(" ")[2]  # after the writer token


def test_notes_of_one_wake_up_are_heard_as_one_set_of_streams_and_each_chains_last_position() -> None:
    heard = Heard()
    heard.add(rest(payload("w1", 5, 5, [3], eager=False, streams={"conversation/ada/telegram:1"})))
    heard.add(rest(payload("w2", 7, 9, [3, 4], eager=False, streams={"conversation/ada/telegram:1",
                                                                      "memory/ada/alice"})))
    heard.add(rest(payload("w1", 6, 6, [3], eager=False, streams={"conversation/ada/telegram:2"})))
    assert heard.streams == {"conversation/ada/telegram:1", "conversation/ada/telegram:2", "memory/ada/alice"}
    assert heard.last == {3: 9, 4: 9}
    assert heard.eager == [] and heard


def test_a_log_of_one_chain_is_chain_zero_and_only_eager_writes_become_notes() -> None:
    heard = Heard()
    heard.add(rest(payload("w", 4, 4, eager=False, streams={"conversation/ada/telegram:1"})))
    heard.add(rest(payload("w", 5, 6, eager=True, streams={"memory/ada/alice"})))
    assert heard.last == {0: 6}
    [note] = heard.eager
    assert (note.first, note.last, note.chains, note.streams) == (5, 6, frozenset(), frozenset({"memory/ada/alice"}))
    assert heard.streams == {"conversation/ada/telegram:1", "memory/ada/alice"}


def test_a_write_too_many_to_name_makes_the_whole_wake_up_many() -> None:
    heard = Heard()
    heard.add(rest(payload("w", 1, 1, eager=False, streams={"conversation/ada/telegram:1"})))
    heard.add(rest(payload("w", 2, 9000, eager=False, streams=None)))
    heard.add(rest(payload("w", 9001, 9001, eager=False, streams={"conversation/ada/telegram:2"})))
    assert heard.streams is None and heard.last == {0: 9001}


@pytest.mark.parametrize("text", ["1 2", "1 2 - x conversation/a/b", "a 2 - - s", "1 2 - -", "1 2 3,x - s"])
def test_a_malformed_notification_is_refused_and_nothing_of_it_is_kept(text: str) -> None:
    heard = Heard()
    with pytest.raises(ValueError):
        heard.add(text)
    assert not heard and heard.streams == set()
