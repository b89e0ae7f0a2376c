"""A new query's pass through the model runs beside the search by words (ADR-0071, ADR-0086):
the query is tokenised on the caller's thread and its pass handed to a thread kept waiting for
it. What recall returns is what the query's vector computed first gives; what either side raises
reaches the caller typed; no thread outlives the memory; a repeated query costs no pass."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from fermix_memory import AsyncMemorySystem, MemorySystem, SemanticRecallUnavailable
from fermix_memory.adapters.postgres.queries import PostgresQueries
from fermix_memory.adapters.sqlite.queries import SqliteQueries
from fermix_memory.application.errors import StorageBusy
from fermix_memory.application.query_ports import VectorIndex
from fermix_memory.application.semantic import SemanticSearch
from tests.integration.fake_embedder import ConceptEmbedder
from tests.waits import HANG_GUARD_S, until

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT, OWNER, CONV = "ada", "alice", "telegram:alice"
ASK: dict[str, Any] = dict(agent_id=AGENT, owner_id=OWNER, conversation=CONV, source="all", limit=5)
QUERIES = ["where does the user live", "tea or coffee", "Quetzalcoatlus", "what did we talk about yesterday",
           "which beverage does she drink at home", "the landlord and the flat", "   "]
PASS_THREAD = "fermix-query-vector"


class SplitEmbedder(ConceptEmbedder):
    """Embeds a query in two steps, as the real model does, saying on which thread each ran; its
    pass waits for ``gate``, and either step may fail."""

    def __init__(self, *, prepare_fails: Exception | None = None, pass_fails: Exception | None = None) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.prepare_fails, self.pass_fails = prepare_fails, pass_fails
        self.prepared_on: list[int] = []
        self.passed_on: list[int] = []
        self.passes_ended = 0

    def prepare_query(self, text: str) -> Callable[[], bytes]:
        self.prepared_on.append(threading.get_ident())
        if self.prepare_fails is not None:
            raise self.prepare_fails

        def run() -> bytes:
            self.passed_on.append(threading.get_ident())
            assert self.gate.wait(timeout=HANG_GUARD_S), "the gate was never opened"
            try:
                if self.pass_fails is not None:
                    raise self.pass_fails
                return self.vector(text)
            finally:
                self.passes_ended += 1
        return run


def pass_threads() -> list[threading.Thread]:
    """The threads of queries' passes started since the test began (a search another test left
    open keeps its own)."""
    return [t for t in threading.enumerate() if t.name.startswith(PASS_THREAD) and t not in BEFORE]


BEFORE: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def threads_before() -> None:
    BEFORE.clear()
    BEFORE.update(threading.enumerate())


def queries_class() -> type[Any]:
    return PostgresQueries if os.environ.get("FERMIX_DATABASE_URL") else SqliteQueries


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    with MemorySystem.open(home, embedder=ConceptEmbedder()) as memory:
        lines = ["I moved to a new flat near Quetzalcoatlus park last week", "Nice, how do you like it?",
                 "The landlord wants the rent by Friday", "I drink green tea every morning at home",
                 "Coffee keeps me awake at night", "We talked about the flat yesterday"]
        for n, content in enumerate(lines):
            memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV,
                                  role="user" if n % 2 == 0 else "assistant", sender=OWNER if n % 2 == 0 else AGENT,
                                  content=content)
        memory.write_memory([{"op": "add", "category": "identity", "key": "home_city", "value": "Berlin"},
                             {"op": "add", "category": "preference", "key": "drink", "value": "green tea, no coffee"}],
                            agent_id=AGENT, owner_id=OWNER, trust="operator")
        memory.fill_vectors()
        assert memory.vectors_waiting() == 0
    return home


def answers(memory: MemorySystem) -> list[Any]:
    """Every hybrid answer to :data:`QUERIES`, whole: hits, order, ranks and similarities."""
    found = []
    for query in QUERIES:
        result = memory.recall(query, mode="hybrid", **ASK)
        found.append((result.memories, result.messages, result.ranked, result.vectors_waiting))
    return found


def test_hybrid_answers_are_those_of_the_vector_computed_first(home: Path) -> None:
    split = SplitEmbedder()
    with MemorySystem.open(home, embedder=split) as memory:
        overlapped = answers(memory)
    assert overlapped[0][0] and overlapped[0][0][0].memory.value == "Berlin"  # found by meaning alone
    caller = threading.get_ident()
    assert split.prepared_on and set(split.prepared_on) == {caller}  # tokenised on the caller's thread
    assert split.passed_on and caller not in split.passed_on  # the pass on another
    assert pass_threads() == []  # closed with the memory
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SemanticSearch, "embed_query_soon",
                      lambda self, query: (lambda vector: lambda: vector)(self.embed_query(query)))
        plain = ConceptEmbedder()  # no two steps: one embed([query]) per new query
        with MemorySystem.open(home, embedder=plain) as memory:
            assert answers(memory) == overlapped


def test_a_repeated_query_costs_no_pass(home: Path) -> None:
    split = SplitEmbedder()
    with MemorySystem.open(home, embedder=split) as memory:
        first = memory.recall("tea or coffee", mode="hybrid", **ASK)
        assert len(split.prepared_on) == len(split.passed_on) == 1
        assert memory.recall("tea or coffee", mode="hybrid", **ASK) == first
        assert memory.recall("tea or coffee", mode="semantic", **ASK).ranked
        assert len(split.prepared_on) == len(split.passed_on) == 1


@pytest.mark.parametrize("where", ["prepare", "pass"])
def test_what_embedding_raises_reaches_the_caller_typed(home: Path, where: str) -> None:
    error = SemanticRecallUnavailable("the model cannot be loaded")
    split = SplitEmbedder(**{f"{where}_fails": error})
    with MemorySystem.open(home, embedder=split) as memory:
        for _ in range(2):  # a failed query keeps no vector: asked again, it fails again
            with pytest.raises(SemanticRecallUnavailable, match="cannot be loaded"):
                memory.recall("tea or coffee", mode="hybrid", **ASK)
        assert memory.recall("tea or coffee", mode="keyword", **ASK).ranked  # words alone need no model
    assert pass_threads() == []


def test_what_the_search_by_words_raises_reaches_the_caller_and_the_pass_ends(home: Path) -> None:
    split = SplitEmbedder()
    split.gate.clear()  # the pass is still running when the search by words fails
    busy = StorageBusy("reading: database stayed locked")

    def locked(*args: Any, **kwargs: Any) -> Any:
        raise busy
    with MemorySystem.open(home, embedder=split) as memory:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(queries_class(), "search_history", locked)
            with pytest.raises(StorageBusy, match="stayed locked"):
                memory.recall("tea or coffee", mode="hybrid", **ASK)
        split.gate.set()
        until(lambda: split.passes_ended == 1, "the pass under way when the words failed ends")
        assert memory.recall("tea or coffee", mode="hybrid", **ASK).ranked
    assert pass_threads() == []


def test_a_cancelled_call_leaves_no_thread_once_the_memory_closes(home: Path) -> None:
    split = SplitEmbedder()
    split.gate.clear()

    async def scenario() -> None:
        memory = await AsyncMemorySystem.open(home, embedder=split)
        call = asyncio.ensure_future(memory.recall("tea or coffee", mode="hybrid", **ASK))
        while not split.passed_on:  # the pass under way
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        split.gate.set()
        await memory.close()

    asyncio.run(scenario())
    until(lambda: not pass_threads(), "the threads of queries' passes end")


@pytest.mark.sqlite_only("the search alone: no store is asked")
def test_a_closed_search_starts_no_thread_and_embeds_on_the_callers_thread() -> None:
    split = SplitEmbedder()
    search = SemanticSearch(cast(VectorIndex, None), split)
    assert search.embed_query_soon("tea or coffee")() == split.vector("tea or coffee")
    assert pass_threads() != []  # kept waiting for the next new query
    search.close()
    assert pass_threads() == []
    assert search.embed_query_soon("where does she live")() == split.vector("where does she live")
    assert split.passed_on[-1] == threading.get_ident()
    assert pass_threads() == []
    search.close()  # a second close does nothing


@pytest.mark.sqlite_only("the model alone: no store is asked")
def test_the_real_models_two_steps_give_its_query_vector() -> None:
    pytest.importorskip("onnxruntime")
    from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder

    model = MiniLmOnnxEmbedder()
    for text in ("where do I live", "what did my sister say about the flat in Berlin? (7)", "x " * 300):
        run = model.prepare_query(text)
        vector = run()
        assert vector == model.embed_query(text) == model.embed([text])[0]
        got: list[bytes] = []
        thread = threading.Thread(target=lambda run=run, got=got: got.append(run()))  # on another thread
        thread.start()
        thread.join()
        assert got == [vector]


@pytest.mark.sqlite_only("the search alone: no store is asked")
def test_the_caller_goes_on_once_the_pass_has_begun(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller leaves Python's lock to the pass's thread until it starts the pass (ADR-0096),
    rather than search by words while that thread waits for the lock."""
    from fermix_memory.application import semantic

    monkeypatch.setattr(semantic, "PASS_START_WAIT_S", HANG_GUARD_S)  # only the pass's start ends the wait
    split = SplitEmbedder()
    split.gate.clear()
    search = SemanticSearch(cast(VectorIndex, None), split)
    try:
        vector = search.embed_query_soon("tea or coffee")
        assert len(split.passed_on) == 1 and split.passed_on[0] != threading.get_ident()  # begun, elsewhere
        split.gate.set()
        assert vector() == split.vector("tea or coffee")
    finally:
        split.gate.set()
        search.close()
