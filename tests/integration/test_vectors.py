"""Vectors as a projection (ADR-0043): every message and row gets one in the background, a changed
text or model re-embeds, forget and verify see them, replay queues them again; recall by meaning
and hybrid recall, scoped as keyword recall is."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem, SemanticRecallUnavailable
from fermix_memory.adapters.sqlite.audit import replay_into
from fermix_memory.application.embedder import similarity
from fermix_memory.entrypoints.recall_by_meaning import RECALL_BY_MEANING_ENV
from tests.cli_runner import run_cli as fermix
from tests.integration.fake_embedder import ConceptEmbedder
from tests.integration.test_postgres_store import sql as sql_on_postgres

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT, CONV = "ada", "telegram:alice"


def read(memory: MemorySystem, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read from the memory's own store (PostgreSQL when the test runs there, else
    the home's SQLite file), on a connection of the test's own."""
    url = os.environ.get("FERMIX_DATABASE_URL")
    if url:
        return sql_on_postgres(url, sql)
    conn = apsw.Connection(str(memory.home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute(sql).fetchall())
    finally:
        conn.close()


def vectors_of(memory: MemorySystem) -> dict[tuple[str, int], str]:
    """(kind, id) -> label of every stored vector."""
    return {(kind, int(r[0])): str(r[1]) for kind in ("message", "memory")
            for r in read(memory, f"SELECT {kind}_id, label FROM {kind}_vectors")}


def queued(memory: MemorySystem) -> set[tuple[str, int]]:
    return {(str(r[0]), int(r[1])) for r in read(memory, "SELECT kind, id FROM vector_queue")}


def write_alice(memory: MemorySystem, secret: str = "Quetzalcoatlus") -> int:
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="user", sender="alice",
                          content=f"I moved to a new flat near {secret} last week")
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="assistant", sender=AGENT,
                          content="Nice, how do you like it?")
    [row] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Berlin"},
                                agent_id=AGENT, owner_id="alice", trust="operator")
    assert row.memory_id is not None
    return row.memory_id


@pytest.fixture
def embedder() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def memory(home: Path, embedder: ConceptEmbedder) -> Iterator[MemorySystem]:
    with MemorySystem.open(home, embedder=embedder) as memory:
        yield memory


def test_every_message_and_row_gets_a_labelled_vector_off_the_appending_thread(memory: MemorySystem, home: Path,
                                                                             embedder: ConceptEmbedder) -> None:
    calling = threading.get_ident()
    seen: list[int] = []
    embed = embedder.embed
    embedder.embed = lambda texts: (seen.append(threading.get_ident()), embed(texts))[1]  # type: ignore[method-assign]
    row = write_alice(memory)
    assert calling not in seen  # the append never waited for the model
    memory.fill_vectors()
    stored = vectors_of(memory)
    assert queued(memory) == set()
    assert ("memory", row) in stored and sum(kind == "message" for kind, _ in stored) == 2
    assert set(stored.values()) == {"fake-concepts@1"}
    assert any("home city: Berlin" in text for call in embedder.calls for text in call)  # the row's text
    report = memory.verify()
    assert report.ok and report.vectors_waiting == 0, report.problem


def test_verify_counts_what_waits(home: Path) -> None:
    with MemorySystem.open(home) as memory:  # no embedder: everything waits
        write_alice(memory)
        report = memory.verify()
        assert report.ok and report.vectors_waiting == 3


def write_behind_the_stores_back(memory: MemorySystem, statement: str) -> None:
    """``statement`` run on the memory's database (PostgreSQL or the home's SQLite file) on a
    connection of the test's own, as a tool or a person with the file would."""
    url = os.environ.get("FERMIX_DATABASE_URL")
    if url:
        sql_on_postgres(url, statement)
        return
    conn = apsw.Connection(str(memory.home / "memory.db"))
    conn.set_busy_timeout(30_000)  # the memory's background upkeep may be writing
    try:
        conn.execute(statement)
    finally:
        conn.close()


@pytest.mark.parametrize("statement", [
    "INSERT INTO message_vectors VALUES (999999, 'x@1', x'00000000')",
    "INSERT INTO memory_vectors VALUES (999999, 'x@1', x'00000000')",
])
def test_verify_fails_on_a_vector_of_nothing(home: Path, statement: str) -> None:
    with MemorySystem.open(home) as memory:
        write_alice(memory)
        if os.environ.get("FERMIX_DATABASE_URL"):
            statement = statement.replace("x'00000000'", "'\\x00000000'::bytea")
        write_behind_the_stores_back(memory, statement)
    with MemorySystem.open(home) as memory:
        report = memory.verify()
        assert not report.ok and "point at no message or row" in report.problem


def test_a_changed_text_is_embedded_again(memory: MemorySystem, embedder: ConceptEmbedder) -> None:
    row = write_alice(memory)
    memory.fill_vectors()
    memory.write_memory({"op": "replace", "id": row, "value": "Hamburg"}, agent_id=AGENT, owner_id="alice",
                        trust="operator")
    memory.fill_vectors()
    [replaced] = [m.id for m in memory.memories(owner_id="alice")]
    [(vector,)] = read(memory, f"SELECT vector FROM memory_vectors WHERE memory_id = {replaced}")
    assert bytes(vector) == embedder.vector("home city: Hamburg") and queued(memory) == set()
    assert len([k for k in vectors_of(memory) if k[0] == "memory"]) == 1  # the old text's vector went


def test_another_model_re_embeds_instead_of_mixing_spaces(home: Path) -> None:
    with MemorySystem.open(home, embedder=ConceptEmbedder("1")) as memory:
        write_alice(memory)
        memory.fill_vectors()
    with MemorySystem.open(home, embedder=ConceptEmbedder("2")) as memory:
        memory.fill_vectors()
        hits = memory.recall("where does the user live", agent_id=AGENT, owner_id="alice", mode="semantic")
        assert [h.memory.key for h in hits.memories][:1] == ["home_city"]
        assert set(vectors_of(memory).values()) == {"fake-concepts@2"}


def test_forget_takes_the_vectors_of_what_it_erases(memory: MemorySystem) -> None:
    write_alice(memory)
    memory.append_message(agent_id=AGENT, owner_id="bob", conversation="telegram:bob", role="user", sender="bob",
                          content="I keep bees")
    memory.fill_vectors()
    assert len(vectors_of(memory)) == 4
    memory.forget_owner("alice")
    [(kind, kept)] = vectors_of(memory)
    assert kind == "message" and read(memory, f"SELECT owner_id FROM messages WHERE id = {kept}") == [("bob",)]
    assert queued(memory) == set() and memory.verify().ok
    assert memory.recall("where does the user live", agent_id=AGENT, owner_id="alice", source="all",
                         mode="semantic").ranked == []


@pytest.mark.sqlite_only("reads the bytes of memory.db and its WAL")
def test_forget_leaves_no_vector_of_the_erased_text_on_disk(memory: MemorySystem, home: Path,
                                                           embedder: ConceptEmbedder) -> None:
    write_alice(memory, "Quetzalcoatlus")
    memory.append_message(agent_id=AGENT, owner_id="bob", conversation="telegram:bob", role="user", sender="bob",
                          content="I keep bees")
    memory.fill_vectors()
    erased = embedder.vector("alice: I moved to a new flat near Quetzalcoatlus last week")
    kept = embedder.vector("bob: I keep bees")

    def on_disk(vector: bytes) -> bool:
        return any(vector in p.read_bytes() for p in home.rglob("*") if p.is_file())

    assert on_disk(erased) and on_disk(kept)  # the scan can see a vector at all
    report = memory.forget_owner("alice")
    assert report.wal_truncated
    assert not on_disk(erased)
    assert on_disk(kept)


@pytest.mark.sqlite_only("replays the SQLite file into a new folder")
def test_replay_queues_every_text_again_and_keeps_vectors_out_of_the_checksums(memory: MemorySystem, home: Path,
                                                                               tmp_path: Path) -> None:
    write_alice(memory)
    memory.fill_vectors()
    replayed = replay_into(home / "memory.db", tmp_path / "replayed")
    assert replayed["identical"], replayed["differing_tables"]
    assert not any("vector" in table for table in replayed["checksums"])
    with MemorySystem.open(tmp_path / "replayed") as copy:
        # Messages and rows wait above their marks (ADR-0084): every text waits again.
        assert queued(copy) == set()
        assert copy.verify().vectors_waiting == len(vectors_of(memory))
    with MemorySystem.open(tmp_path / "replayed", embedder=ConceptEmbedder()) as copy:
        copy.fill_vectors()
        assert vectors_of(copy) == vectors_of(memory)


# --- recall by meaning -------------------------------------------------------------------------


def test_the_demo_question_finds_the_home_city_by_meaning_and_hybrid(memory: MemorySystem) -> None:
    write_alice(memory)
    memory.fill_vectors()
    ask = dict(agent_id=AGENT, owner_id="alice", conversation=CONV, source="all")
    assert memory.recall("where does the user live", mode="keyword", **ask).memories == []  # type: ignore[arg-type]
    for mode in ("semantic", "hybrid", None):
        hits = memory.recall("where does the user live", mode=mode, **ask)  # type: ignore[arg-type]
        assert hits.memories and hits.memories[0].memory.value == "Berlin", mode
    # Hybrid keeps what keyword search does best: an exact rare word still comes first.
    hits = memory.recall("Quetzalcoatlus", mode="hybrid", **ask)  # type: ignore[arg-type]
    assert "Quetzalcoatlus" in hits.messages[0].message.content


def test_a_search_by_meaning_ranks_by_closeness_and_gives_ties_to_the_newer_message(
        memory: MemorySystem, embedder: ConceptEmbedder) -> None:
    """Messages of the same text tie: the newer comes first; a limit cuts inside a tie exactly as
    a full sort of the scope would; a text less similar than the floor is no hit."""
    said = ["the kitchen tap drips again", "I live in Berlin", "my home city is Berlin"]
    closeness = {}
    query = embedder.embed(["where does the user live"])[0]
    for text in said:
        closeness[text] = similarity(query, embedder.embed([f"alice: {text}"])[0])
    assert len(set(closeness.values())) == 3  # three distinct levels, many messages on each
    written = []
    for n in range(40):
        text = said[(n * 7) % 3]
        appended = memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="user",
                                         sender="alice", content=text)
        written.append((appended, text))
    memory.fill_vectors()
    floor = memory.settings.memory.recall_min_similarity
    assert closeness[said[0]] < floor <= closeness[said[1]]  # the kitchen tap is no hit
    expected = [i for i, text in sorted(written, key=lambda w: (-closeness[w[1]], -w[0])) if closeness[text] >= floor]
    for limit in (1, 5, 13, 14, 26, 30, 40):
        hits = memory.recall("where does the user live", limit=limit, agent_id=AGENT, owner_id="alice",
                             conversation=CONV, source="history", mode="semantic")
        assert [h.message.id for h in hits.messages] == expected[:limit], limit


def test_without_an_embedder_recall_is_keyword_and_meaning_is_one_typed_error(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        write_alice(memory)
        ask = dict(agent_id=AGENT, owner_id="alice", conversation=CONV, source="all")
        default = memory.recall("flat Berlin", **ask)  # type: ignore[arg-type]
        assert default == memory.recall("flat Berlin", mode="keyword", **ask)  # type: ignore[arg-type]
        for mode in ("semantic", "hybrid"):
            with pytest.raises(SemanticRecallUnavailable, match=r"fermix-memory\[semantic\]"):
                memory.recall("where", mode=mode, **ask)  # type: ignore[arg-type]


@pytest.mark.sqlite_only("SQLite queues messages and rows above a mark; PostgreSQL's triggers queue them as written")
def test_appending_a_message_does_no_vector_work_and_the_upkeep_queues_it_later(home: Path) -> None:
    with MemorySystem.open(home) as memory:  # a core install: no embedder
        write_alice(memory)
        assert queued(memory) == set()  # neither the messages nor the row (ADR-0084)
        # No vector mark moved ('message_marks' is the marks' own catch-up, ADR-0085, not vector work).
        assert read(memory, "SELECT count(*) FROM vector_marks WHERE kind <> 'message_marks'") == [(0,)]
        assert memory.verify().vectors_waiting == 3  # two messages and one row above the marks
        assert memory.verify().ok
    with MemorySystem.open(home, embedder=ConceptEmbedder()) as memory:
        memory.fill_vectors()
        assert len(vectors_of(memory)) == 3 and queued(memory) == set()
        assert memory.verify().vectors_waiting == 0
        memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="user", sender="alice",
                              content="and the balcony faces the river")
        memory.fill_vectors()
        assert len(vectors_of(memory)) == 4 and memory.verify().vectors_waiting == 0


def test_the_memory_recall_tool_takes_a_mode(memory: MemorySystem, home: Path) -> None:
    write_alice(memory)
    memory.fill_vectors()
    call = dict(agent_id=AGENT, owner_id="alice", conversation=CONV)
    answer = memory.dispatch_tool("memory_recall", {"query": "where does the user live", "mode": "semantic"}, **call)
    assert answer["ok"] and answer["memories"][0]["value"] == "Berlin", answer
    assert memory.dispatch_tool("memory_recall", {"query": "where does the user live", "mode": "keyword"},
                                **call)["memories"] == []
    with MemorySystem.open(tmp := home.parent / "plain") as plain:
        answer = plain.dispatch_tool("memory_recall", {"query": "x", "mode": "hybrid"}, **call)
        assert answer["ok"] is False and answer["code"] == "semantic_unavailable", answer
    assert tmp.exists()


@pytest.mark.sqlite_only("the model is the same on every store; one run is enough")
def test_the_demo_question_finds_the_home_city_with_the_real_model(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end with the [semantic] extra's model (skipped where the extra is not installed),
    through the API and through ``fermix memory search --mode``."""
    pytest.importorskip("onnxruntime")
    from fermix_memory import load_embedder

    with MemorySystem.open(home, embedder=load_embedder()) as memory:
        memory.write_memory([{"op": "add", "category": "identity", "key": "home_city", "value": "Berlin"},
                             {"op": "add", "category": "preference", "key": "drink", "value": "green tea"},
                             {"op": "add", "category": "interest", "key": "sport", "value": "bouldering"}],
                            agent_id=AGENT, owner_id="alice", trust="operator")
        memory.fill_vectors()
        ask = dict(agent_id=AGENT, owner_id="alice", conversation=CONV)
        assert memory.recall("where does the user live", mode="keyword", **ask).memories == []  # type: ignore[arg-type]
        hits = memory.recall("where does the user live", **ask)  # type: ignore[arg-type]
        assert hits.memories[0].memory.value == "Berlin"
    search = ("memory", "search", "where does the user live", "--agent", AGENT, "--owner", "alice")
    assert "nothing found" in fermix(*search, home=home).stdout
    found = fermix(*search, "--mode", "hybrid", home=home)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0].startswith("memory 1 (owner:alice): home_city = Berlin  [similarity 0.")
    # As a host's memory chooses it (the run turns it off): with the extra installed, recall by meaning
    # is the default of the API and the CLI, unless the home's settings turn it off.
    monkeypatch.delenv(RECALL_BY_MEANING_ENV)
    with MemorySystem.open(home) as memory:
        assert memory.recalls_by_meaning
        assert memory.recall("where does the user live", **ask).memories[0].memory.value == "Berlin"  # type: ignore[arg-type]
    found = fermix(*search, home=home)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0].startswith("memory 1 (owner:alice): home_city = Berlin  [similarity 0.")
    (home / "config.toml").write_text("[fermix_core.memory]\nrecall_by_meaning = false\n", encoding="utf-8")
    assert "nothing found" in fermix(*search, home=home).stdout


def test_a_memory_that_keeps_searching_sees_what_a_fresh_one_sees_as_messages_come_and_go(
        memory: MemorySystem, home: Path, embedder: ConceptEmbedder) -> None:
    """Searches of one long-lived memory (which keeps each scope's vectors between searches, on
    SQLite) against a memory opened afresh on the same home after every step: appends, a
    retraction, a forgotten conversation, another memory's writes and a new model."""
    texts = ["I live in Berlin", "my home city is Berlin", "the kitchen tap drips", "tea is my drink",
             "we moved house last spring", "the town is quiet at night"]
    other = "telegram:alice-work"
    queries = ["where does the user live", "what does the user drink", "kitchen"]

    def say(where: MemorySystem, n: int, conversation: str = CONV) -> None:
        where.append_message(agent_id=AGENT, owner_id="alice", conversation=conversation, role="user",
                             sender="alice", content=texts[n % len(texts)])

    def same_as_fresh(step: str) -> None:
        memory.fill_vectors()
        with MemorySystem.open(home, embedder=embedder) as fresh:
            for query in queries:
                for conversation in (CONV, other):
                    for scope in ("current", "owner"):
                        ask = dict(agent_id=AGENT, owner_id="alice", conversation=conversation, scope=scope,
                                   source="history", mode="semantic", limit=7)
                        kept = [h.message.id for h in memory.recall(query, **ask).messages]  # type: ignore[arg-type]
                        afresh = [h.message.id for h in fresh.recall(query, **ask).messages]  # type: ignore[arg-type]
                        assert kept == afresh, (step, query, conversation, scope)

    for n in range(12):
        say(memory, n, CONV if n % 3 else other)
    same_as_fresh("first")
    for n in range(12, 20):  # in order: only these are read again
        say(memory, n)
    same_as_fresh("appended")
    memory.retract_newest_message(agent_id=AGENT, owner_id="alice", conversation=CONV)
    same_as_fresh("retracted")
    with MemorySystem.open(home, embedder=embedder) as elsewhere:  # another writer of the same home
        for n in range(20, 26):
            say(elsewhere, n, other)
        elsewhere.fill_vectors()
    same_as_fresh("written elsewhere")
    # A text that changes (as a repair tool would change it) loses its vector and gets a new one
    # under the same id: the kept vector must not stand in for it.
    [(changed,)] = read(memory, "SELECT min(id) FROM messages WHERE content = 'the kitchen tap drips'")
    write_behind_the_stores_back(memory, f"UPDATE messages SET content = 'I live in Berlin' WHERE id = {changed}")
    same_as_fresh("changed")
    memory.forget_conversation(AGENT, other)
    same_as_fresh("forgotten")
    for n in range(26, 30):
        say(memory, n, other)
    same_as_fresh("after the forget")


def test_the_change_count_moves_when_a_vector_goes_changes_or_comes_in_behind_a_later_one(
        memory: MemorySystem, home: Path) -> None:
    write_alice(memory)
    memory.fill_vectors()
    changes = lambda: read(memory, "SELECT changes FROM vector_changes")[0][0]  # noqa: E731
    [(first, last)] = read(memory, "SELECT min(message_id), max(message_id) FROM message_vectors")
    before = changes()
    blob = "'\\x00'::bytea" if os.environ.get("FERMIX_DATABASE_URL") else "x'00'"
    write_behind_the_stores_back(memory, f"INSERT INTO message_vectors VALUES ({last + 10}, 'x@1', {blob})")
    assert changes() == before  # in order: nothing a kept scope could miss
    write_behind_the_stores_back(memory, f"DELETE FROM message_vectors WHERE message_id = {first}")
    assert changes() == before + 1
    write_behind_the_stores_back(memory, f"INSERT INTO message_vectors VALUES ({first}, 'x@1', {blob})")
    assert changes() == before + 2  # behind a later one
    write_behind_the_stores_back(memory, f"UPDATE message_vectors SET label = 'y@1' WHERE message_id = {first}")
    assert changes() == before + 3


@pytest.mark.parametrize("kind", ["message", "memory"])
def test_verify_fails_on_a_text_that_has_no_vector_and_waits_for_none(home: Path, embedder: ConceptEmbedder,
                                                                      kind: str) -> None:
    with MemorySystem.open(home, embedder=embedder) as memory:
        write_alice(memory)
        memory.fill_vectors()
        assert memory.verify().ok
        write_behind_the_stores_back(memory, f"DELETE FROM {kind}_vectors WHERE {kind}_id ="
                                             f" (SELECT min({kind}_id) FROM {kind}_vectors)")
    with MemorySystem.open(home) as memory:  # no embedder: nothing queues it again behind verify's back
        report = memory.verify()
        assert not report.ok and "1 message(s) or row(s) have no vector and wait for none" in report.problem


def test_rows_by_meaning_are_the_readers_live_rows_only(memory: MemorySystem) -> None:
    """The best rows by meaning are read whole by id (ADR-0086): another owner's row and an archived
    row never come back, however close; the reader's live row does."""
    alice = write_alice(memory)
    [bob] = memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Berlin"},
                                agent_id=AGENT, owner_id="bob", trust="operator")
    [old] = memory.write_memory({"op": "add", "category": "identity", "key": "home_town", "value": "Berlin city"},
                                agent_id=AGENT, owner_id="alice", trust="operator")
    memory.write_memory({"op": "archive", "id": old.memory_id, "reason": "moved"}, agent_id=AGENT,
                        owner_id="alice", trust="operator")
    memory.fill_vectors()
    hits = memory.recall("where does the user live", agent_id=AGENT, owner_id="alice", conversation=CONV,
                         source="memories", mode="semantic")
    assert [h.memory.id for h in hits.memories] == [alice]
    assert bob.memory_id is not None and old.memory_id is not None


def test_a_search_over_many_vectors_ranks_as_a_full_sort_does(memory: MemorySystem, embedder: ConceptEmbedder) -> None:
    """More vectors than one block of the dot product (ADR-0086): the same order as sorting them all."""
    said = ["I live in Berlin", "my home city is Berlin", "Berlin is home, the city I live in", "a city walk"]
    query = embedder.embed(["where does the user live"])[0]
    closeness = {text: similarity(query, embedder.embed([f"alice: {text}"])[0]) for text in said}
    texts = [said[(n * 5) % 4] for n in range(600)]
    written = [(memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CONV, role="user",
                                      sender="alice", content=text), text) for text in texts]
    memory.fill_vectors()
    floor = memory.settings.memory.recall_min_similarity
    expected = [i for i, text in sorted(written, key=lambda w: (-closeness[w[1]], -w[0])) if closeness[text] >= floor]
    assert len(expected) > 256 and len(set(closeness.values())) > 2
    hits = memory.recall("where does the user live", limit=50, agent_id=AGENT, owner_id="alice",
                         conversation=CONV, source="history", mode="semantic")
    assert [h.message.id for h in hits.messages] == expected[:50]
