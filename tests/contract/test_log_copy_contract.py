"""The log as stored (``EventStore.read_log``) and a copy of another log appended as it is
(``EventStore.append_logged``): what moving a home between stores stands on (ADR-0030)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.application.errors import ConcurrencyConflict, IntegrityError
from fermix_memory.application.streams import chain_for
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
    ports.store.adopt_chains(1)  # one chain through every event, the shape this test reads
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
    ports.store.adopt_chains(1)  # an empty log takes the chains of the log it receives
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
    before = ports.store.head()
    head = ports.store.append_logged([])
    assert (head.position, head.hash) == (before.position, before.hash) and head.position == 0
    ports.store.adopt_chains(1)
    head = ports.store.append_logged([])
    assert (head.position, head.hash) == (0, GENESIS_HASH)


@pytest.mark.parametrize("case", ["gap", "not_after_the_head", "tampered_hash", "tampered_payload"])
def test_rows_that_do_not_continue_the_log_are_refused_and_nothing_is_appended(ports: Ports, case: str) -> None:
    rows = a_log()
    ports.store.adopt_chains(1)
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


def several_chains(ports: Ports, chains: int) -> None:
    try:
        ports.store.adopt_chains(chains)
    except IntegrityError:
        pytest.skip("this store keeps one chain")


def test_a_log_of_several_chains_links_each_event_to_the_last_of_its_chain(ports: Ports) -> None:
    several_chains(ports, 4)
    streams = ["conversation/a", "memory/ada/alice", "memory/ada/bob", "conversation/b", "resource/ada/bob/user_md"]
    assert len({chain_for(s, 4) for s in streams}) > 1  # the test spans chains
    ports.append("conversation/a", message("one"), message("two"))
    [row] = ports.append("memory/ada/alice", added())
    ports.append("memory/ada/bob", added(owner="bob"))
    ports.append("conversation/b", message("three"))
    ports.write(lambda tx: (tx.append("memory/ada/alice", [replaced(row, "Lives in Rome")]),
                            tx.append("conversation/a", [message("four")])))

    rows = list(ports.store.read_log())
    positions = [r.position for r in rows]
    assert positions == sorted(set(positions)) and len(rows) == 7  # increasing; gaps allowed
    check = ChainCheck(chains=4, chain_of=lambda s: chain_for(s, 4))
    assert [check.problem(r) for r in rows] == [""] * 7
    one_chain = ChainCheck()  # linked as one chain they do not hold: each links to its own chain
    assert any(one_chain.problem(r) for r in rows)
    head = ports.store.head()
    assert (head.position, head.hash, tuple(getattr(head, "chains", ()))) == (
        check.head.position, check.head.hash, check.head.chains)
    assert len(check.head.chains) == 4

    # Copied into another empty log of the same chains, the log and its head are the same.
    rows_again = list(ports.store.read_log())
    assert rows_again == rows
    with pytest.raises(IntegrityError):
        ports.store.adopt_chains(2)  # a log holding events keeps its chains


def test_a_copy_of_a_log_of_several_chains_continues_each_chain(ports: Ports, tmp_path: Path) -> None:
    several_chains(ports, 3)
    source = SqliteEventStore(tmp_path / "source.db")
    try:
        source.adopt_chains(3)
        source.write(lambda tx: tx.append("conversation/a", [message("one")]))
        source.write(lambda tx: tx.append("memory/ada/alice", [added()]))
        source.write(lambda tx: tx.append("conversation/b", [message("two")]))
        rows = list(source.read_log())
        source_head = source.head()
    finally:
        source.close()
    head = ports.store.append_logged(rows)
    assert (head.position, head.hash) == (source_head.position, source_head.hash)
    assert list(ports.store.read_log()) == rows
    [position] = ports.append("memory/ada/alice", replaced(2, "Lives in Rome"))
    assert position > rows[-1].position
    check = ChainCheck(chains=3, chain_of=lambda s: chain_for(s, 3))
    assert [check.problem(r) for r in ports.store.read_log()] == [""] * 4
