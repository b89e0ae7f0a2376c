"""A search by meaning whose scopes' vectors are read before the query's vector is there
(``near_soon``, ADR-0086) gives what the two searches asked after it give: the same rows and turns,
in the same order, with the same similarities, for every scope, limit and query."""

from __future__ import annotations

from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter
from fermix_memory.domain.values import ConversationKey, ScopeType
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.integration.fake_embedder import ConceptEmbedder

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT = "ada"
TEXTS = ("I live in Berlin", "my flat has a leaky kitchen tap", "I drink green tea every morning",
         "the piano lesson moved to Friday", "we talked about the kitchen repairs", "tea or coffee?",
         "Berlin is cold in March", "ok")
QUERIES = ("where does the user live", "what does the user drink", "kitchen repairs", "piano", "nothing at all")


def test_the_scopes_read_before_the_vector_rank_as_the_searches_after_it(tmp_path: Path) -> None:
    embedder = ConceptEmbedder()
    application = bootstrap(tmp_path / "home", embedder=embedder)
    with MemorySystem(application) as memory:
        for owner in ("alice", "bob"):
            for n, text in enumerate(TEXTS):
                memory.append_message(agent_id=AGENT, owner_id=owner, conversation=f"telegram:{owner}-{n % 2}",
                                      role="user" if n % 3 else "assistant", sender=owner, content=text)
                memory.write_memory({"op": "add", "category": "preference", "key": f"fact_{n}", "value": text},
                                    agent_id=AGENT, owner_id=owner, trust="operator")
        memory.fill_vectors()
        search = application.semantic
        assert search is not None
        rows = [MemoryFilter(agent_id=AGENT, owner_id=owner, scopes=((ScopeType.OWNER, None),))
                for owner in ("alice", "bob", "carol")]
        turns = [HistoryFilter(agent_id=AGENT, owner_id="alice"),
                 HistoryFilter(agent_id=AGENT, owner_id="alice", conversation=ConversationKey("telegram", "alice-1")),
                 HistoryFilter(agent_id="max", owner_id="alice")]
        compared = 0
        for query in QUERIES:
            vector = embedder.vector(query)
            for where in (None, *rows):
                for history in (None, *turns):
                    for limit in (0, 1, 3, 10):
                        soon = search.near_soon(where, history, limit)(vector)
                        after = (search.memories(vector, where, limit) if where is not None else [],
                                 search.history(vector, history, limit) if history is not None else [])
                        assert soon == after, (query, where, history, limit)
                        compared += bool(after[0] or after[1])
        assert compared > 100  # most comparisons found something
