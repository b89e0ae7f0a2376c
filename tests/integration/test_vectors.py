"""Vectors as a projection (ADR-0043): every message and row gets one in the background, a changed
text or model re-embeds, forget and verify see them, replay queues them again; recall by meaning
and hybrid recall, scoped as keyword recall is."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from fermix_memory import MemorySystem, SemanticRecallUnavailable
from fermix_memory.adapters.sqlite.audit import replay_into
from tests.cli_runner import run_cli as fermix
from tests.integration.fake_embedder import ConceptEmbedder

pytestmark = pytest.mark.sqlite_only("vectors are not yet kept on PostgreSQL")

AGENT, CONV = "ada", "telegram:alice"


def db(home: Path) -> apsw.Connection:
    return apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)


def vectors_of(home: Path) -> dict[tuple[str, int], str]:
    """(kind, id) -> label of every stored vector."""
    conn = db(home)
    try:
        return {(kind, int(r[0])): str(r[1]) for kind in ("message", "memory")
                for r in conn.execute(f"SELECT {kind}_id, label FROM {kind}_vectors")}
    finally:
        conn.close()


def queued(home: Path) -> set[tuple[str, int]]:
    conn = db(home)
    try:
        return {(str(r[0]), int(r[1])) for r in conn.execute("SELECT kind, id FROM vector_queue")}
    finally:
        conn.close()


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
    stored = vectors_of(home)
    assert queued(home) == set()
    assert ("memory", row) in stored and sum(kind == "message" for kind, _ in stored) == 2
    assert set(stored.values()) == {"fake-concepts@1"}
    assert any("home city: Berlin" in text for call in embedder.calls for text in call)  # the row's text
    report = memory.verify()
    assert report.ok and report.vectors_waiting == 0, report.problem


def test_verify_counts_what_waits_and_fails_on_a_vector_of_nothing(home: Path) -> None:
    with MemorySystem.open(home) as memory:  # no embedder: everything waits
        write_alice(memory)
        report = memory.verify()
        assert report.ok and report.vectors_waiting == 3
    conn = apsw.Connection(str(home / "memory.db"))
    conn.execute("INSERT INTO message_vectors VALUES (999999, 'x@1', x'00000000')")
    conn.close()
    with MemorySystem.open(home) as memory:
        report = memory.verify()
        assert not report.ok and "point at no message or row" in report.problem


def test_a_changed_text_loses_its_vector_in_its_own_write_and_is_embedded_again(memory: MemorySystem,
                                                                              home: Path) -> None:
    row = write_alice(memory)
    memory.fill_vectors()
    memory.write_memory({"op": "replace", "id": row, "value": "Hamburg"}, agent_id=AGENT, owner_id="alice",
                        trust="operator")
    replaced = next(m.id for m in memory.memories(owner_id="alice"))
    assert ("memory", row) not in vectors_of(home) or replaced != row
    assert ("memory", replaced) in queued(home) and ("memory", replaced) not in vectors_of(home)
    memory.fill_vectors()
    assert ("memory", replaced) in vectors_of(home) and queued(home) == set()


def test_another_model_re_embeds_instead_of_mixing_spaces(home: Path) -> None:
    with MemorySystem.open(home, embedder=ConceptEmbedder("1")) as memory:
        write_alice(memory)
        memory.fill_vectors()
    with MemorySystem.open(home, embedder=ConceptEmbedder("2")) as memory:
        memory.fill_vectors()
        hits = memory.recall("where does the user live", agent_id=AGENT, owner_id="alice", mode="semantic")
        assert [h.memory.key for h in hits.memories][:1] == ["home_city"]
    assert set(vectors_of(home).values()) == {"fake-concepts@2"}


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
    assert {kind for kind, _ in vectors_of(home)} == {"message"} and queued(home) == set()
    assert memory.verify().ok


def test_replay_queues_every_text_again_and_keeps_vectors_out_of_the_checksums(memory: MemorySystem, home: Path,
                                                                               tmp_path: Path) -> None:
    write_alice(memory)
    memory.fill_vectors()
    replayed = replay_into(home / "memory.db", tmp_path / "replayed")
    assert replayed["identical"], replayed["differing_tables"]
    assert not any("vector" in table for table in replayed["checksums"])
    assert queued(tmp_path / "replayed") == set(vectors_of(home))
    with MemorySystem.open(tmp_path / "replayed", embedder=ConceptEmbedder()) as copy:
        copy.fill_vectors()
    assert vectors_of(tmp_path / "replayed") == vectors_of(home)


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


def test_without_an_embedder_recall_is_keyword_and_meaning_is_one_typed_error(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        write_alice(memory)
        ask = dict(agent_id=AGENT, owner_id="alice", conversation=CONV, source="all")
        default = memory.recall("flat Berlin", **ask)  # type: ignore[arg-type]
        assert default == memory.recall("flat Berlin", mode="keyword", **ask)  # type: ignore[arg-type]
        for mode in ("semantic", "hybrid"):
            with pytest.raises(SemanticRecallUnavailable, match=r"fermix-memory\[semantic\]"):
                memory.recall("where", mode=mode, **ask)  # type: ignore[arg-type]


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


def test_the_demo_question_finds_the_home_city_with_the_real_model(home: Path) -> None:
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
    assert found.stdout.splitlines()[0].endswith("home_city = Berlin")


def test_postgres_says_plainly_that_vectors_are_not_there_yet(tmp_path: Path, postgres_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERMIX_DATABASE_URL", postgres_url)
    with pytest.raises(SemanticRecallUnavailable, match="not yet available on the PostgreSQL store"):
        MemorySystem.open(tmp_path / "pg", embedder=ConceptEmbedder())
