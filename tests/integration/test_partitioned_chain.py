"""The partitioned log on PostgreSQL (ADR-0031): writes of different owners and conversations
extend different chains side by side, writes of one chain run one after the other (so the
decisions they read stay true), a write that meets its chains out of order runs again instead
of waiting in a circle, and the checkpoint over every chain's head anchors the whole log:
``verify`` walks each chain, and a chain cut short or rewritten under the anchor is named."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.adapters.sql.head import parse_head
from fermix_memory.application.streams import chain_for, memory_stream
from fermix_memory.domain.log_chain import GENESIS_HASH, ChainCheck, Head, checkpoint_hash
from fermix_memory.domain.values import Scope, ScopeType
from tests.contract.conftest import added, message, replaced
from tests.integration.test_postgres_store import config, sql
from tests.waits import HANG_GUARD_S

CHAINS = 16


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresEventStore]:
    pg = PostgresEventStore(postgres_url)
    try:
        yield pg
    finally:
        pg.close()


def threads(*works: Callable[[], None]) -> None:
    """Run ``works`` at once; re-raise the first failure."""
    failures: list[BaseException] = []
    start = threading.Barrier(len(works))

    def run(work: Callable[[], None]) -> None:
        start.wait()
        try:
            work()
        except BaseException as exc:  # re-raised below, in the test's thread
            failures.append(exc)

    pool = [threading.Thread(target=run, args=(w,)) for w in works]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if failures:
        raise failures[0]


def owners_on_different_chains(count: int) -> list[str]:
    found: dict[int, str] = {}
    for n in range(1000):
        found.setdefault(chain_for(memory_stream("ada", f"owner{n}"), CHAINS), f"owner{n}")
        if len(found) == count:
            return list(found.values())
    raise AssertionError("not enough chains")


def test_a_new_database_has_the_configured_chains_and_each_event_links_to_its_own_chain(
        store: PostgresEventStore) -> None:
    assert store.chains == CHAINS
    alice, bob = owners_on_different_chains(2)
    store.write(lambda tx: tx.append(memory_stream("ada", alice), [added(owner=alice)]))
    store.write(lambda tx: tx.append(memory_stream("ada", bob), [added(owner=bob)]))
    store.write(lambda tx: tx.append("conversation/ada/x", [message("hello")]))
    rows = list(store.read_log())
    check = ChainCheck(chains=CHAINS, chain_of=lambda s: chain_for(s, CHAINS))
    assert [check.problem(r) for r in rows] == ["", "", ""]
    assert all(r.hash != GENESIS_HASH for r in rows)
    head = store.head()
    assert head == check.head and len(head.chains) == CHAINS and head.position == rows[-1].position
    assert parse_head(str(head)) == head  # the anchor's text: P0,P1,...:CHECKPOINT
    assert head.hash == checkpoint_hash([(p, next((r.hash for r in rows if r.position == p), GENESIS_HASH))
                                         for p in head.chains])


def test_writers_of_different_owners_commit_side_by_side_and_every_chain_verifies(
        postgres_url: str, tmp_path: Path) -> None:
    owners = owners_on_different_chains(4)
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        def writer(owner: str) -> Callable[[], None]:
            def work() -> None:
                s = memory.session(agent_id="ada", owner_id=owner, conversation=f"telegram:{owner}")
                for n in range(15):
                    s.append("user", f"{owner} says {n}")
                    memory.write_memory({"op": "add", "category": "identity", "key": f"fact_{n}",
                                         "value": f"{owner} fact {n}"}, agent_id="ada", owner_id=owner,
                                        writer="reviewer", trust="operator")
            return work

        threads(*(writer(o) for o in owners))
        report = memory.verify()
        assert report.ok and report.events >= 4 * 30, report.problem
        head = memory.head()
        assert sum(1 for p in head.chains if p) >= 4  # the owners' and their conversations' chains
        for owner in owners:
            s = memory.session(agent_id="ada", owner_id=owner, conversation=f"telegram:{owner}")
            assert [m.content for m in s.history()][-1] == f"{owner} says 14"
            assert len(memory.memories(agent_id="ada", owner_id=owner)) == 15


def test_writes_of_one_owner_run_one_after_the_other_so_latest_statement_wins(store: PostgresEventStore) -> None:
    """Eight writers decide "add or replace" on the same key at once: one row, one add, seven
    replaces; without the chain's lock two would each see no row and both add."""
    stream = memory_stream("ada", "alice")

    def decide(n: int) -> Callable[[], None]:
        def work(tx: Any) -> None:
            row = tx.by_key("ada", "alice", Scope(ScopeType.OWNER, "alice"), "home")
            event = added(value=f"v{n}") if row is None else replaced(row.id, f"v{n}")
            tx.append(stream, [event])

        return lambda: store.write(work)

    threads(*(decide(n) for n in range(8)))
    rows = store.write(lambda tx: tx.memories_of("ada", "alice"))
    assert len(rows) == 1
    kinds = [r.event.kind for r in store.read_events(stream=stream)]
    assert kinds == ["memory.added"] + ["memory.replaced"] * 7


def test_writes_that_take_two_chains_in_opposite_orders_never_wait_in_a_circle(store: PostgresEventStore) -> None:
    low, high = "low", "high"
    conversation = {"low": "conversation/ada/c0"}
    conversation["high"] = next(s for n in range(1, 100) if chain_for(s := f"conversation/ada/c{n}", CHAINS)
                                != chain_for(conversation["low"], CHAINS))

    def both(first: str, second: str, n: int) -> Callable[[], None]:
        def work() -> None:
            for i in range(n):
                store.write(lambda tx, i=i: (tx.append(conversation[first], [message(f"{first} {i}")]),
                                             tx.append(conversation[second], [message(f"{second} {i}")])))
        return work

    threads(both(low, high, 20), both(high, low, 20), both(low, high, 20), both(high, low, 20))
    rows = list(store.read_log())
    assert len(rows) == 160
    check = ChainCheck(chains=CHAINS, chain_of=lambda s: chain_for(s, CHAINS))
    assert [p for r in rows if (p := check.problem(r))] == []
    assert check.head == store.head()


def test_the_anchor_names_a_chain_cut_short_or_rewritten(postgres_url: str, tmp_path: Path) -> None:
    alice, bob = owners_on_different_chains(2)
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        for owner in (alice, bob):
            s = memory.session(agent_id="ada", owner_id=owner, conversation=f"telegram:{owner}")
            s.append("user", "one")
            s.append("user", "two")
        anchor = memory.head()
        assert memory.verify(expect_head=str(anchor)).ok
        s.append("user", "three")  # the log grows: the anchor still holds (it is a prefix)
        assert memory.verify(expect_head=anchor).ok
        assert not memory.verify(expect_head=Head(anchor.position, "f" * 64, anchor.chains)).ok

        # Cut the last two events off bob's conversation chain and make its head row agree: the chain
        # still links, but the anchor names an event that is gone.
        sql(postgres_url, "ALTER TABLE events DISABLE TRIGGER USER")
        bob_rows = sql(postgres_url, "SELECT e.position, e.stream FROM events e JOIN messages m ON m.id = e.position"
                                     f" WHERE m.owner_id = '{bob}' ORDER BY e.position")
        assert len(bob_rows) == 3
        stream = bob_rows[0][1]
        chain = chain_for(stream, CHAINS)
        sql(postgres_url, f"DELETE FROM events WHERE position >= {bob_rows[1][0]} AND stream = '{stream}'")
        sql(postgres_url, f"DELETE FROM messages WHERE id >= {bob_rows[1][0]} AND owner_id = '{bob}'")
        first = sql(postgres_url, f"SELECT position, hash FROM events WHERE position = {bob_rows[0][0]}")[0]
        sql(postgres_url, f"UPDATE chain_heads SET position = {first[0]}, hash = '{first[1]}' WHERE chain = {chain}")
        sql(postgres_url, "ALTER TABLE events ENABLE TRIGGER USER")
        assert memory.verify().ok  # nothing inside the database tells
        report = memory.verify(expect_head=anchor)
        assert not report.ok and "cut off" in report.problem and f"chain {chain}" in report.problem

        # A chain's head row that does not match the chain is named by verify itself.
        sql(postgres_url, f"UPDATE chain_heads SET hash = '{'e' * 64}' WHERE chain = {chain}")
        report = memory.verify()
        assert not report.ok and f"chain {chain} ends at event" in report.problem


def test_a_database_written_before_chains_keeps_its_one_chain(postgres_url: str, tmp_path: Path) -> None:
    with _opened(postgres_url, 1) as pg:
        for n in range(3):
            pg.write(lambda tx, n=n: tx.append(f"conversation/ada/{n}", [message(f"m{n}")]))
        before = pg.head()
    assert before.chains == () and before.position == 3
    # As a database of the first schema version was: no chain rows, no sequence, no import keys
    # (migration 3), no vectors (migration 4), version 1 recorded.
    sql(postgres_url, "DROP TABLE vector_changes, message_vectors, memory_vectors, vector_queue;"
                      " DROP FUNCTION message_vectors_changes();"
                      " DROP TRIGGER messages_vectors ON messages; DROP TRIGGER memories_vectors ON memories;"
                      " DROP FUNCTION messages_vectors(); DROP FUNCTION memories_vectors();"
                      " DROP TABLE chain_heads; DROP SEQUENCE events_position; DROP INDEX events_import_keys;"
                      " ALTER TABLE events DROP COLUMN import_key_type, DROP COLUMN import_key;"
                      " DELETE FROM fermix_migrations WHERE version >= 2")
    with _opened(postgres_url, None) as pg:
        assert pg.chains == 1 and pg.head() == before
        [position] = pg.write(lambda tx: tx.append("conversation/ada/9", [message("after")]))
        assert position == 4  # one chain: positions run on without gaps
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        assert memory.verify(expect_head=before).ok


class _opened:  # a context manager named for how it reads
    def __init__(self, url: str, chains: int | None) -> None:
        self.store = PostgresEventStore(url, chains=chains)

    def __enter__(self) -> PostgresEventStore:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def test_each_host_keeps_the_last_head_it_saw_and_a_log_cut_under_it_fails_verify(postgres_url: str,
                                                                                    tmp_path: Path) -> None:
    home = tmp_path / "host"
    with MemorySystem.open(home, config=config(postgres_url)) as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:1")
        for n in range(3):
            s.append("user", f"message {n}")
        head = memory.head()
    assert parse_head((home / "head").read_text(encoding="ascii")) == head  # written when the host closed
    with MemorySystem.open(home, config=config(postgres_url)) as memory:
        assert memory.verify().ok
    # The last message cut off the log (its chain's head row made to agree): only the host's file tells.
    last = head.position
    chain = head.chains.index(last)
    sql(postgres_url, "ALTER TABLE events DISABLE TRIGGER USER")
    sql(postgres_url, f"DELETE FROM events WHERE position = {last}; DELETE FROM messages WHERE id = {last}")
    before = sql(postgres_url, f"SELECT position, hash FROM events WHERE position < {last} ORDER BY position DESC"
                               " LIMIT 1")[0]
    sql(postgres_url, f"UPDATE chain_heads SET position = {before[0]}, hash = '{before[1]}' WHERE chain = {chain}")
    sql(postgres_url, "ALTER TABLE events ENABLE TRIGGER USER")
    with MemorySystem.open(home, config=config(postgres_url)) as memory:
        report = memory.verify()
        assert not report.ok and "this home's last-seen head" in report.problem and "cut off" in report.problem
    with MemorySystem.open(tmp_path / "other-host", config=config(postgres_url)) as memory:
        assert memory.verify().ok  # a host that never saw the cut events cannot tell


def test_a_forget_while_the_owner_writes_in_other_chains_leaves_no_byte_and_verify_holds(
        postgres_url: str, tmp_path: Path) -> None:
    """The erasure holds every chain: each of the owner's messages is either before it (erased)
    or after it (kept, the owner came back), never in between."""
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        sessions = [memory.session(agent_id="ada", owner_id="alice", conversation=f"telegram:{n}") for n in range(6)]
        for s in sessions:
            s.append("user", "secret before")
        stop = threading.Event()

        def chatter() -> None:
            i = 0
            while not stop.is_set():
                sessions[i % len(sessions)].append("user", f"secret {i}")
                i += 1

        def forget() -> None:
            try:
                memory.forget_owner("alice", agent_id="ada")
            finally:
                stop.set()

        threads(chatter, forget)
        forgotten = sql(postgres_url, "SELECT position FROM events WHERE kind = 'owner.forgotten'")[0][0]
        left = sql(postgres_url, f"SELECT count(*) FROM events WHERE position < {forgotten}"
                                 " AND payload LIKE '%secret%'")
        assert left == [(0,)]  # every message before the erasure is redacted
        kept = sql(postgres_url, f"SELECT count(*) FROM events WHERE position > {forgotten}"
                                 " AND kind = 'message.appended'")[0][0]
        assert sql(postgres_url, "SELECT count(*) FROM messages")[0][0] == kept
        report = memory.verify()
        assert report.ok, report.problem


def test_a_write_whose_notification_was_lost_still_reaches_the_other_process(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A foreign write is heard as the streams it changed (its events are not read); one whose
    notification never came is found by the check of the chains' heads, and then everything the
    host's caches keep is dropped (the position they check moves)."""
    from fermix_memory.adapters.postgres import change_feed, event_store

    monkeypatch.setattr(change_feed, "WAIT_S", 60.0)  # b checks the chains' heads only when it starts
    with _opened(postgres_url, None) as a, _opened(postgres_url, None) as b:
        stale: dict[str, list[frozenset[str]]] = {"b": [], "c": []}
        b.add_stale_listener(stale["b"].append)
        _until(lambda: b.listening, "b listens")
        [announced] = a.write(lambda tx: tx.append("conversation/ada/x", [message("heard")]))
        _until(lambda: frozenset({"conversation/ada/x"}) in stale["b"], "b hears which stream a's write changed")
        assert b.known_position() == announced

        monkeypatch.setattr(event_store, "ANNOUNCE_SQL", "SELECT %s, %s")  # a's notifications go nowhere
        monkeypatch.setattr(change_feed, "WAIT_S", 0.1)  # c checks the chains' heads every 0.1 s
        with _opened(postgres_url, None) as c:
            c.add_stale_listener(stale["c"].append)
            _until(lambda: c.listening, "c listens")
            before = c.cache_position()
            [lost] = a.write(lambda tx: tx.append("conversation/ada/y", [message("not announced")]))
            _until(lambda: c.known_position() == lost, "c finds the write no notification told it of")
            assert c.cache_position() != before  # what c's caches keep is dropped
            assert not any("conversation/ada/y" in streams for streams in stale["b"] + stale["c"])


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"not within 10 s: {what}"
        time.sleep(0.01)
