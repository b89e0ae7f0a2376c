"""Any user text is a safe query (R-FTS): never an SQL/FTS syntax error, never a crash."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fermix_memory import FermixError, MemorySystem, RecallResult

AGENT = "fts-agent"
OWNER = "fts-owner"
CONV = "test:fts"

_rng = random.Random(7)
_ALPHABET = "abc def\"'*()-^:{}NEAR AND OR NOT \u00e9\u2603\U0001f600\t\n"
RANDOM_10KB = "".join(_rng.choice(_ALPHABET) for _ in range(10_240))

NASTY_QUERIES = [
    '"',
    '""',
    '"""',
    "AND",
    "a OR",
    "OR",
    "NOT",
    "a NOT",
    "(",
    ")",
    "()",
    "((a)",
    "NEAR(",
    "NEAR(a b",
    "NEAR(a b, 2)",
    "NEAR/2",
    "*",
    "a*",
    "*a",
    "-x",
    "x -y",
    "^",
    "^a",
    ":",
    "col:val",
    "content:coffee",
    "scope_tokens:o123",
    "{content}:x",
    "{content scope_tokens}: coffee",
    '- * ^ : ( ) " +',
    "\U0001f600",
    "\U0001f600\u2615 coffee",
    "",
    " ",
    "\t\n  ",
    "\x00",
    "a\x00b",
    "coffee\x00",
    RANDOM_10KB,
    "'; DROP TABLE messages; --",
    '" OR 1=1 --',
    "') OR ('1'='1",
    "coffee' UNION SELECT * FROM events --",
    "a" * 5000,
    "\u0301\u0301",
    "\u200b",
    "\ufeff",
    "e\u0301",
    "\u00e9t\u00e9",
    "_",
    "__init__",
    "a_b",
    "1e10",
    "0x1F",
    "NULL",
    "rank",
    "bm25",
    "MATCH",
    "\\",
    "%",
    "%%",
    "_%",
    "\u0130stanbul",
    "\u00df",
    "\ud7ff",
    "\U0010ffff",
    "\u2028",
    "AND AND AND",
    "OR OR",
    "a AND",
    "AND a",
    "(a OR b) AND NOT c",
]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemorySystem]:
    home = tmp_path_factory.mktemp("fts")
    with MemorySystem.open(home) as memory:
        for i, text in enumerate(
            [
                "I drink coffee every morning",
                "NEAR the station AND the park",
                "col:val is not a column",
                "\U0001f600 emoji day",
                "DROP TABLE messages is a joke",
                "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e",
                "a*b wildcards and -x flags",
                'quote "in" text',
            ]
        ):
            memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", content=text)
            memory.append_message(
                agent_id=AGENT, owner_id=OWNER, conversation="test:other", role="user", content=f"{text} elsewhere {i}"
            )
        memory.write_memory(
            [
                {"op": "add", "category": "preference", "key": "coffee", "value": "Prefers flat whites"},
                {"op": "add", "category": "context", "key": "near and or", "value": "NEAR(AND OR) text"},
                {"op": "add", "category": "interest", "key": "emoji", "value": "\U0001f600 and caf\u00e9"},
            ],
            agent_id=AGENT,
            owner_id=OWNER,
            writer="reviewer", trust="operator"
        )
        memory.write_memory(
            {"op": "add", "category": "context", "key": "drop", "value": "DROP TABLE talk"},
            agent_id=AGENT,
            owner_id=OWNER,
            writer="tool",
            conversation=CONV, trust="operator"
        )
        yield memory


def recall_everywhere(memory: MemorySystem, query: str) -> list[RecallResult]:
    results = []
    for scope in ("current", "owner", "all"):
        for conversation in (CONV, None):
            result = memory.recall(
                query, agent_id=AGENT, owner_id=OWNER, conversation=conversation, scope=scope, source="all", limit=20
            )
            assert isinstance(result, RecallResult)
            for hit in result.messages:
                assert hit.message.owner_id == OWNER and hit.message.agent_id == AGENT
            for mhit in result.memories:
                assert mhit.memory.owner_id == OWNER
            results.append(result)
    return results


def test_the_database_does_answer_plain_queries(memory: MemorySystem) -> None:
    """The safety tests below would be vacuous if nothing ever matched."""
    result = memory.recall("coffee", agent_id=AGENT, owner_id=OWNER, conversation=CONV, scope="current", source="all")
    assert any("coffee" in h.message.content for h in result.messages)
    assert any(h.memory.key == "coffee" for h in result.memories)
    result = memory.recall("caf\u00e9", agent_id=AGENT, owner_id=OWNER, scope="all", source="all")
    assert result.messages and result.memories


@pytest.mark.parametrize("query", NASTY_QUERIES, ids=[repr(q)[:30] for q in NASTY_QUERIES])
def test_a_hostile_query_returns_results_or_nothing(memory: MemorySystem, query: str) -> None:
    recall_everywhere(memory, query)


@pytest.mark.parametrize("query", ["NEAR", "AND", "DROP", "col:val", "a*b", "-x", '"in"'])
def test_operator_words_are_searched_as_plain_words(memory: MemorySystem, query: str) -> None:
    result = memory.recall(query, agent_id=AGENT, owner_id=OWNER, conversation=CONV, scope="current", source="history")
    assert result.messages, f"{query!r} is a word of a stored message and must be found"


def test_the_tables_survive_the_injection_attempts(memory: MemorySystem) -> None:
    recall_everywhere(memory, "'; DROP TABLE messages; --")
    assert len(memory.history(AGENT, CONV)) == 8
    report = memory.verify()
    assert report.ok, report.problem


@pytest.mark.parametrize(
    "key",
    ["", " ", "\x00", "'; DROP TABLE memories; --", "*", "coffee", "COFFEE ", "\U0001f600", "a" * 10_000, "%", "_"],
)
def test_a_hostile_key_lookup_returns_rows_or_nothing(memory: MemorySystem, key: str) -> None:
    for scope in ("current", "owner", "all"):
        result = memory.recall(key=key, agent_id=AGENT, owner_id=OWNER, conversation=CONV, scope=scope, source="all")
        assert isinstance(result, RecallResult)
        assert result.messages == []  # a key lookup never searches history


def test_non_text_queries_are_a_typed_error_not_a_crash_or_silence(memory: MemorySystem) -> None:
    for query in (None, 42, b"coffee", ["coffee"]):
        with pytest.raises(FermixError, match="query must be text"):
            memory.recall(query, agent_id=AGENT, owner_id=OWNER, scope="all", source="all")  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text())
def test_any_text_is_a_safe_query(memory: MemorySystem, query: str) -> None:
    recall_everywhere(memory, query)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300))
def test_any_text_is_stored_and_can_be_searched(memory: MemorySystem, content: str) -> None:
    mid = memory.append_message(
        agent_id=AGENT, owner_id="storage-owner", conversation="test:store", role="user", content=content
    )
    window = memory.history(AGENT, "test:store", limit=1)
    assert [(m.id, m.content) for m in window] == [(mid, content)]
    memory.recall(
        content, agent_id=AGENT, owner_id="storage-owner", conversation="test:store", scope="current", source="all"
    )


def test_a_lone_surrogate_in_content_is_a_typed_error(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "h") as memory, pytest.raises(FermixError):
        memory.append_message(
            agent_id=AGENT, owner_id=OWNER, conversation=CONV, role="user", content="half a pair \ud83d"
        )


def test_a_lone_surrogate_in_a_query_is_safe(memory: MemorySystem) -> None:
    recall_everywhere(memory, "coffee \ud83d \udc00")
