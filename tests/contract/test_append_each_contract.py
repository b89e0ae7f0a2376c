"""``append_each`` (the set-based append a history import uses) records exactly what appending
the same events one by one records: the same log rows, chain hashes, versions and projections,
on every store (PostgreSQL with one chain and with several)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.transaction import BULK_CACHE_KIB, DEFAULT_CACHE_KIB
from fermix_memory.application.errors import ConcurrencyConflict
from fermix_memory.application.store_ports import BULK_EVENTS, EventStore, WriteTransaction
from fermix_memory.domain import events as ev
from fermix_memory.domain.values import ConversationKey
from tests.contract.conftest import added, message

Opener = Callable[[], EventStore]

# Every projected table an appended message or row touches, in a stable order.
PROJECTED = (
    "SELECT id, agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind, content, metadata_json,"
    " created_at, trust, scope_tokens FROM messages ORDER BY id",
    "SELECT id, agent_id, owner_id, key, value FROM memories ORDER BY id",
)


@pytest.fixture(params=["apsw", "postgres", "postgres-16-chains"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """A function opening a new, empty store of one kind each time it is called."""
    opened: list[EventStore] = []
    urls: list[str] = []
    if request.param == "apsw":
        def open_one() -> EventStore:
            opened.append(SqliteEventStore(tmp_path / f"memory-{len(opened)}.db"))
            return opened[-1]
    else:
        from fermix_memory.adapters.postgres.event_store import PostgresEventStore

        server = request.getfixturevalue("postgres_server")
        chains = 16 if request.param.endswith("chains") else None

        def open_one() -> EventStore:
            urls.append(server.fresh_database())
            opened.append(PostgresEventStore(urls[-1], chains=chains))
            return opened[-1]
    try:
        yield open_one
    finally:
        for store in opened:
            store.close()  # type: ignore[attr-defined]
        for url in urls:
            request.getfixturevalue("postgres_server").drop_database(url)


def conversation(n: int) -> tuple[str, ev.DomainEvent]:
    chat = ConversationKey("telegram", str(n % 3))
    return f"conversation/ada/{chat.scope_id}", message(f"message {n}", conversation=chat)


def appends() -> list[tuple[str, ev.DomainEvent]]:
    """Messages of three conversations interleaved, one with metadata and quoted owners, and a
    memory row between them (a projection other than a message's in the middle of the set)."""
    events = [conversation(n) for n in range(7)]
    events.insert(3, ("memory/ada/alice", added()))
    quoted = message("about bob", quoted=("bob",))
    events.append((f"conversation/ada/{ConversationKey('telegram', '9').scope_id}", ev.MessageAppended(
        at=quoted.at, agent_id="ada", owner_id="alice", conversation=ConversationKey("telegram", "9"),
        sender="alice", role=quoted.role, content="with metadata", created_at=quoted.at,
        metadata={"fermix_import_key": "k-1", "zeta": [1, "ü"]}, quoted_owners=("bob",))))
    return events


def everything(store: EventStore) -> list[Any]:
    log = [attrs.astuple(row) for row in store.read_log()]  # type: ignore[attr-defined]
    reader = store.reader()  # type: ignore[attr-defined]
    return [log, *[[tuple(r) for r in reader.execute(sql).fetchall()] for sql in PROJECTED]]


def before(tx: WriteTransaction) -> None:
    """What both logs hold before the set: the streams' earlier versions, a chain to continue."""
    stream, _ = conversation(1)
    tx.append(stream, [message("earlier", conversation=ConversationKey("telegram", "1"))])


def test_append_each_records_what_appending_one_by_one_records(open_store: Opener) -> None:
    one_by_one, at_once = open_store(), open_store()
    for store in (one_by_one, at_once):
        store.write(before)
    singles = one_by_one.write(lambda tx: [tx.append(stream, [event])[0] for stream, event in appends()])
    positions = at_once.write(lambda tx: tx.append_each(appends()))
    assert positions == singles and len(positions) == len(appends())
    expected = everything(one_by_one)
    assert everything(at_once) == expected and len(expected[0]) == len(appends()) + 1 and expected[1]
    # And the log goes on from there as it would.
    for store in (one_by_one, at_once):
        store.write(lambda tx: tx.append_each([conversation(8)]))
    assert everything(at_once) == everything(one_by_one)


def test_a_large_append_each_records_the_same_and_the_file_store_gives_its_page_cache_back(open_store: Opener
                                                                                              ) -> None:
    """An import's batch widens the SQLite writer's page cache for its transaction (and only
    then); the commit gives it back. The rows are the same as appended one by one."""
    one_by_one, at_once = open_store(), open_store()
    many = [conversation(n) for n in range(BULK_EVENTS + 20)]
    singles = one_by_one.write(lambda tx: [tx.append(stream, [event])[0] for stream, event in many])
    widened: list[Any] = []

    def work(tx: WriteTransaction) -> list[int]:
        positions = tx.append_each(many)
        if isinstance(at_once, SqliteEventStore):
            widened.extend(tx.cursor.execute("PRAGMA cache_size").fetchall())  # type: ignore[attr-defined]
        return positions

    assert at_once.write(work) == singles
    assert everything(at_once) == everything(one_by_one)
    if isinstance(at_once, SqliteEventStore):
        assert widened == [(-BULK_CACHE_KIB,)]
        with at_once.exclusive("read") as writer:  # the writer connection, between transactions
            assert writer.execute("PRAGMA cache_size").fetchall() == [(-DEFAULT_CACHE_KIB,)]
        # A small set leaves the cache as it is.
        assert at_once.write(lambda tx: tx.append_each(many[:2]) and tx.cursor.execute(  # type: ignore[attr-defined]
            "PRAGMA cache_size").fetchall()) == [(-DEFAULT_CACHE_KIB,)]


def test_append_each_of_nothing_records_nothing(open_store: Opener) -> None:
    store = open_store()
    assert store.write(lambda tx: tx.append_each([])) == []
    assert store.last_position() == 0


def test_a_version_clash_inside_append_each_is_a_conflict_and_writes_nothing(open_store: Opener) -> None:
    store = open_store()
    store.write(before)

    def clash(tx: WriteTransaction) -> None:
        stream, _ = conversation(1)
        tx.append_each([conversation(1)])
        tx.versions[stream] = 0  # type: ignore[attr-defined]  # as if another writer came first
        tx.append_each([conversation(4)])

    with pytest.raises(ConcurrencyConflict):
        store.write(clash)
    assert store.last_position() == 1
