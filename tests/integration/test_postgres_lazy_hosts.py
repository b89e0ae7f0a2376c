"""Hosts on one PostgreSQL database hear each other lazily (ADR-0064): a foreign write is heard
as the streams it changed and nothing of it is read until a cache needs it; prompt-file
revisions and erasures are still read at once. And a write is two round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from tests.waits import until


@pytest.mark.parametrize("chains", [16, 1])
def test_an_append_is_two_round_trips(postgres_url: str, tmp_path: Path, chains: int) -> None:
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.adapters.postgres.protocol_trace import round_trips, traced
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store = PostgresEventStore(postgres_url, pool_max=1, chains=chains, feed=False)
    assert store.chains == chains
    trace = tmp_path / "trace.txt"
    with MemorySystem(bootstrap(tmp_path / "home", store=store)) as memory:
        def append(i: int) -> int:
            return memory.append_message(agent_id="ada", owner_id=f"o{i % 3}", conversation=f"telegram:{i % 3}",
                                         role="user", content=f"hello {i}")

        for i in range(3):
            append(i)
        with traced(store, trace):
            ids = [append(10 + i) for i in range(10)]
    assert round_trips(trace) == 2 * len(ids)
    assert len(set(ids)) == 10


def test_a_foreign_message_is_heard_as_its_stream_and_read_only_when_a_prompt_needs_it(
        postgres_url: str, tmp_path: Path) -> None:
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store_b = PostgresEventStore(postgres_url)
    reads: list[str] = []
    read = store_b.rows
    store_b.rows = lambda sql, params=(), **kw: (reads.append(sql), read(sql, params, **kw))[1]  # type: ignore[method-assign]
    heard: list[frozenset[str]] = []
    store_b.add_stale_listener(heard.append)
    config: dict[str, Any] = {"fermix_core": {"storage": {"url": postgres_url}}}
    with MemorySystem.open(tmp_path / "host-a", config=config) as a, \
            MemorySystem(bootstrap(tmp_path / "host-b", store=store_b)) as b:
        until(lambda: store_b.listening, "host b listens")
        on_b = b.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        assert on_b.compose_prompt() == []
        reads.clear()
        mid = a.session(agent_id="ada", owner_id="alice", conversation="telegram:42").append("user", "I live in Paris")
        until(lambda: store_b.known_position() >= mid, "host b hears a's write")
        assert any(any(s.startswith("conversation/ada/") for s in streams) for streams in heard)
        assert not any("FROM events" in q for q in reads), "a foreign message is not read from the log"
        assert on_b.compose_prompt()[-1] == {"role": "user", "content": "I live in Paris"}  # read when needed

        # A prompt-file revision is eager: host b writes alice's USER.md as soon as it hears of it.
        a.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Lives in Paris"},
                       agent_id="ada", owner_id="alice", writer="reviewer", trust="operator", source_message_id=mid)
        user_md = tmp_path / "host-b" / "memory" / "ada" / "alice" / "USER.md"
        until(lambda: user_md.exists() and "Lives in Paris" in user_md.read_text(encoding="utf-8"),
               "host b renders alice's USER.md")
        assert "home_city: Lives in Paris" in on_b.compose_prompt(system="You are Ada.")[0]["content"]


def test_a_note_names_streams_or_says_many_when_they_would_not_fit() -> None:
    from fermix_memory.adapters.postgres.change_feed import MANY, PAYLOAD_MAX, parse_note, payload

    note = payload("t", 5, 7, [1, 3], eager=False, streams={"conversation/ada/x", "memory/ada/alice"})
    assert len(note.encode()) < 8000
    parsed = parse_note(note.partition(" ")[2])
    assert (parsed.first, parsed.last, parsed.chains, parsed.eager) == (5, 7, frozenset({1, 3}), False)
    assert parsed.streams == frozenset({"conversation/ada/x", "memory/ada/alice"})
    many = payload("t", 1, 9000, range(16), streams={f"conversation/ada/chat-{i}" for i in range(2000)})
    assert len(many.encode()) <= PAYLOAD_MAX and many.endswith(f" {MANY}")
    assert parse_note(many.partition(" ")[2]).streams is None
    assert parse_note(payload("t", 1, 1).partition(" ")[2]).chains == frozenset()
    with pytest.raises(ValueError):
        parse_note("1 2")  # a notification of another shape is refused (and logged by the feed)
