"""The log as stored (``EventStore.read_log``) and a copy of another log appended as it is
(``EventStore.append_logged``): what moving a home between stores stands on (ADR-0030)."""

from __future__ import annotations

import attrs
import pytest

from fermix_memory.application.errors import ConcurrencyConflict, IntegrityError
from fermix_memory.domain.log_chain import GENESIS_HASH, ChainCheck, LoggedEvent
from tests.contract.conftest import Ports, added, message, replaced, revised
from tests.contract.fake_store import FakeEventStore


def a_log() -> list[LoggedEvent]:
    """Rows of a small log with a redacted event, from the in-memory store."""
    source = FakeEventStore()
    source.write(lambda tx: tx.append("conversation/a", [message("one"), message("secret"), message("three")]))
    [row] = source.write(lambda tx: tx.append("memory/ada/alice", [added()]))
    source.write(lambda tx: tx.append("memory/ada/alice", [replaced(row, "Lives in Rome")]))
    source.write(lambda tx: tx.append("resource/ada/alice/user_md", [revised(1, "# alice\nLives in Rome")]))
    source.erase(lambda tx, e: e.redact([2]))
    return list(source.read_log())


def test_read_log_gives_every_row_with_its_chain_redacted_ones_included(ports: Ports) -> None:
    assert list(ports.store.read_log()) == []
    _, secret, _ = ports.append("conversation/a", message("one"), message("secret"), message("three"))
    ports.append("memory/ada/alice", added())
    before = list(ports.store.read_log())
    ports.erase(lambda tx, e: e.redact([secret]))

    rows = list(ports.store.read_log())
    assert [r.position for r in rows] == [1, 2, 3, 4]
    check = ChainCheck()
    assert [check.problem(r) for r in rows] == ["", "", "", ""]  # the chain recomputes from the rows alone
    assert rows[1].payload is None and before[1].payload is not None and "secret" in before[1].payload
    assert rows[1] == attrs.evolve(before[1], payload=None)  # its digest and hash stay
    assert rows[2:] == before[2:]
    assert rows[0].payload is not None and "one" in rows[0].payload
    head = ports.store.head()
    assert (head.position, head.hash) == (4, rows[-1].hash)
    assert [r.position for r in ports.store.read_log(after=2)] == [3, 4]


def test_append_logged_copies_another_log_as_it_is(ports: Ports) -> None:
    rows = a_log()
    head = ports.store.append_logged(rows[:2])
    assert (head.position, head.hash) == (2, rows[1].hash)
    head = ports.store.append_logged(rows[2:])
    assert (head.position, head.hash) == (len(rows), rows[-1].hash)

    assert list(ports.store.read_log()) == rows
    assert (ports.store.head().position, ports.store.head().hash) == (head.position, head.hash)
    # The projections are written as live appends write them; the redacted event is skipped.
    assert [r.position for r in ports.store.read_events()] == [1, 3, 4, 5, 6]
    [row] = ports.load("memories_of", "ada", "alice")
    assert (row.id, row.value) == (4, "Lives in Rome")
    assert ports.load("current_resource", "ada", "alice", "user_md") == (1, "# alice\nLives in Rome")
    assert ports.store.last_positions("memory/") == {"memory/ada/alice": 5}
    # The copy goes on as a live log: the next append links to the copied head.
    [position] = ports.append("conversation/a", message("four"))
    assert position == len(rows) + 1
    assert ports.load("read_stream", "conversation/a").version == 4


def test_append_logged_of_nothing_changes_nothing(ports: Ports) -> None:
    head = ports.store.append_logged([])
    assert (head.position, head.hash) == (0, GENESIS_HASH)


@pytest.mark.parametrize("case", ["gap", "not_after_the_head", "tampered_hash", "tampered_payload"])
def test_rows_that_do_not_continue_the_log_are_refused_and_nothing_is_appended(ports: Ports, case: str) -> None:
    rows = a_log()
    if case == "gap":
        batch, error = [rows[0], rows[2]], ConcurrencyConflict
    elif case == "not_after_the_head":
        ports.append("conversation/b", message("mine"))
        batch, error = rows[:2], ConcurrencyConflict
    elif case == "tampered_hash":
        batch, error = [rows[0], attrs.evolve(rows[1], hash=rows[2].hash), rows[2]], IntegrityError
    else:
        payload = str(rows[2].payload).replace("three", "3")  # the digest and hash no longer match it
        batch, error = [rows[0], rows[1], attrs.evolve(rows[2], payload=payload)], IntegrityError
    before = ports.store.head()
    with pytest.raises(error):
        ports.store.append_logged(batch)
    assert ports.store.head() == before
    assert len(list(ports.store.read_log())) == before.position
