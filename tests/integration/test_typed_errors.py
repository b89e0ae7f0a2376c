"""Bad host input through the embedding API: always a typed FermixError, nothing written."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import ConfigError, ConversationKey, FermixError, MemoryClosed, MemorySystem, NotFound, StorageError
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.application.background import BackgroundWorker
from fermix_memory.application.history import HistoryImportError
from fermix_memory.application.message_input import InvalidMessage
from fermix_memory.domain.errors import DomainError, InvalidArgument, InvalidNumber
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.integration.held_store import memory_on_held_store

# The tests whose input reaches the store run on SQLite and on PostgreSQL; the others are refused
# before any store is asked, the same way whichever store the memory lives in.
on_every_store = pytest.mark.usefixtures("every_store")

AGENT, OWNER_ID, CONV = "ada", "alice", "telegram:42"
MESSAGE: dict[str, Any] = {"agent_id": AGENT, "owner_id": OWNER_ID, "conversation": CONV, "role": "user",
                           "sender": OWNER_ID, "content": "I live in Paris"}
HUGE = 2**70


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as system:
        yield system


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"x": value}
    return value


def event_count(memory: MemorySystem) -> int:
    return memory.verify().events


@pytest.mark.parametrize("metadata", [[1], True, 5, "text", [("a", 1)]])
def test_append_message_with_metadata_that_is_not_an_object_is_a_typed_error(
    memory: MemorySystem, metadata: Any
) -> None:
    with pytest.raises(InvalidMessage, match="metadata must be a JSON object"):
        memory.append_message(**MESSAGE, metadata=metadata)
    assert event_count(memory) == 0


@pytest.mark.parametrize("conversation", [("tg", ["x"]), ("tg", {"a": 1}), ("tg", 1), ("tg",), ("tg", "1", "t", "x"),
                                          ("tg", None), (["tg"], "1")])
def test_a_conversation_tuple_with_bad_parts_is_a_typed_error(memory: MemorySystem, conversation: Any) -> None:
    """Keys given as tuples are cached by value; parts that cannot be hashed still get the same
    typed error, and a refused key is never remembered as valid."""
    for _ in range(2):
        with pytest.raises(FermixError, match=r"conversation|chat_id|channel"):
            memory.append_message(**{**MESSAGE, "conversation": conversation})
    assert event_count(memory) == 0


@pytest.mark.parametrize("metadata", [{"note": "a\ud800b"}, {"\udfff": 1}, {"list": ["ok", "\udc80"]}])
def test_metadata_holding_a_lone_surrogate_is_a_typed_error(memory: MemorySystem, metadata: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessage, match="metadata must be JSON-serialisable"):
        memory.append_message(**MESSAGE, metadata=metadata)
    assert event_count(memory) == 0


@on_every_store
def test_metadata_beyond_ascii_is_kept_as_given(memory: MemorySystem) -> None:
    metadata = {"mood": "😀 naïve", "path": "C:\\users\\u0041", "plain": "ascii"}
    memory.append_message(**MESSAGE, metadata=metadata)
    [stored] = memory.history(AGENT, CONV)
    assert stored.metadata == metadata


@pytest.mark.parametrize("depth", [33, 1200, 100_000])
def test_append_message_with_deeply_nested_metadata_is_a_typed_error(memory: MemorySystem, depth: int) -> None:
    with pytest.raises(InvalidMessage, match="nested more than 32 levels"):
        memory.append_message(**MESSAGE, metadata=nested(depth))
    assert event_count(memory) == 0


def test_append_message_with_self_referencing_metadata_is_a_typed_error(memory: MemorySystem) -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(InvalidMessage):
        memory.append_message(**MESSAGE, metadata=loop)


@on_every_store
def test_metadata_nested_32_levels_is_kept(memory: MemorySystem) -> None:
    memory.append_message(**MESSAGE, metadata=nested(31, leaf=[1]))
    assert memory.history(AGENT, CONV)[0].metadata == nested(31, leaf=[1])


def jsonl(**overrides: Any) -> str:
    record = {"agent_id": AGENT, "owner_id": OWNER_ID, "channel": "telegram", "chat_id": "42", "role": "user",
              "sender": OWNER_ID, "content": "hello", **overrides}
    return json.dumps(record)


@pytest.mark.parametrize("line", [
    '{"a":' * 5000 + "1" + "}" * 5000,
    "[" * 100_000 + "]" * 100_000,
    jsonl(metadata=nested(500)),
])
def test_import_of_a_deeply_nested_jsonl_line_is_a_typed_error(memory: MemorySystem, line: str) -> None:
    with pytest.raises(HistoryImportError, match=r"^line 2: ") as caught:
        memory.import_history([jsonl(), line])
    assert "nested" in str(caught.value)
    assert event_count(memory) == 0


@pytest.mark.parametrize("lines", [[1], [None], [b"{}"], 5, None])
def test_import_of_lines_that_are_not_text_is_a_typed_error(memory: MemorySystem, lines: Any) -> None:
    with pytest.raises(DomainError):
        memory.import_history(lines)
    assert event_count(memory) == 0


@on_every_store
def test_import_of_one_jsonl_string_reads_its_lines(memory: MemorySystem) -> None:
    assert len(memory.import_history(jsonl() + "\n" + jsonl(content="again") + "\n")) == 2


ID_CALLS: dict[str, Callable[[MemorySystem, Any], Any]] = {
    "memory": lambda m, v: m.memory(v),
    "explain": lambda m, v: m.explain(v),
    "restore": lambda m, v: m.restore(v),
    "resource_revision": lambda m, v: m.resource_revision("user_md", v, agent_id=AGENT, owner_id=OWNER_ID),
    "resource_rollback": lambda m, v: m.resource_rollback("user_md", v, agent_id=AGENT, owner_id=OWNER_ID),
    "resource_diff": lambda m, v: m.resource_diff("user_md", v, 1, agent_id=AGENT, owner_id=OWNER_ID),
    "resource_history": lambda m, v: m.resource_history("user_md", agent_id=AGENT, owner_id=OWNER_ID, limit=v),
    "recall": lambda m, v: m.recall("paris", agent_id=AGENT, owner_id=OWNER_ID, limit=v),
    "history": lambda m, v: m.history(AGENT, CONV, limit=v),
    "after_turn": lambda m, v: m.after_turn(agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV, peak_prompt_tokens=v),
    "before_turn": lambda m, v: m.before_turn(agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV, context_window=v),
    "compact": lambda m, v: m.compact(agent_id=AGENT, conversation=CONV, context_window=v),
    "write_memory": lambda m, v: m.write_memory({"op": "add", "category": "identity", "key": "city",
                                                 "value": "Paris"}, agent_id=AGENT, owner_id=OWNER_ID,
                                                source_message_id=v, trust="operator"),
}


LOOKUPS = {"memory", "explain", "restore", "resource_revision", "resource_rollback", "resource_diff"}


@pytest.mark.parametrize("value", [HUGE, -HUGE, 2**63, "x", "3", "", True, 1.5, float("nan"), None, [1]])
@pytest.mark.parametrize("call", sorted(ID_CALLS))
def test_a_number_argument_that_is_not_a_64_bit_whole_number_is_a_typed_error(
    memory: MemorySystem, call: str, value: Any
) -> None:
    memory.append_message(**MESSAGE)
    before = event_count(memory)
    if value is None and call in ("history", "after_turn", "before_turn", "compact", "write_memory",
                                  "resource_history"):
        return  # None means "not given" there
    with pytest.raises(FermixError) as caught:
        ID_CALLS[call](memory, value)
    if isinstance(value, int) and not isinstance(value, bool) and call in LOOKUPS:
        assert isinstance(caught.value, NotFound), caught.value  # an id beyond 64 bits names no row
    elif value is not None:
        assert isinstance(caught.value, InvalidNumber), caught.value
    assert event_count(memory) == before


def test_memory_of_a_huge_id_is_a_typed_error_not_overflow(memory: MemorySystem) -> None:
    with pytest.raises(NotFound, match="no memory row with that id"):
        memory.memory(HUGE)
    with pytest.raises(InvalidNumber, match="the memory row id must be a whole number, got str"):
        memory.memory("x")


@on_every_store
def test_recall_and_history_limits_must_be_whole_numbers(memory: MemorySystem) -> None:
    with pytest.raises(InvalidNumber, match="limit"):
        memory.recall("x", agent_id=AGENT, owner_id=OWNER_ID, limit="")
    with pytest.raises(InvalidNumber, match="limit"):
        memory.history(AGENT, CONV, limit="3")
    memory.append_message(**MESSAGE)
    assert memory.history(AGENT, CONV, limit=0) == []
    assert len(memory.history(AGENT, CONV, limit=5)) == 1


@on_every_store
@pytest.mark.parametrize("query", [12345, None, b"paris", ["paris"], {"q": "paris"}, 1.5, True])
def test_a_recall_query_or_key_that_is_not_text_is_a_typed_error(memory: MemorySystem, query: Any) -> None:
    """Not an empty result: a host passing a number as the query has a bug worth hearing about."""
    memory.append_message(**MESSAGE)
    with pytest.raises(InvalidArgument, match=r"^query must be text"):
        memory.recall(query, agent_id=AGENT, owner_id=OWNER_ID, source="all")
    with pytest.raises(InvalidArgument, match=r"^query must be text"):
        memory.session(agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV).recall(query)
    if query is not None:  # no key is the default
        with pytest.raises(InvalidArgument, match=r"^key must be text"):
            memory.recall(agent_id=AGENT, owner_id=OWNER_ID, key=query)
    assert memory.recall("12345", agent_id=AGENT, owner_id=OWNER_ID, source="all").messages == []
    assert memory.recall("Paris", agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV, source="all").messages


@pytest.mark.parametrize("text", [12345, None, b"/new", ["/new"]])
def test_a_chat_line_that_is_not_text_is_a_typed_error_not_no_command(memory: MemorySystem, text: Any) -> None:
    """``None`` means "not a command, append it": for a value that is no text at all it was a lie."""
    with pytest.raises(InvalidArgument, match=r"^text must be text"):
        memory.handle_command(text, agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV, trust="operator")
    with pytest.raises(InvalidArgument, match=r"^text must be text"):
        memory.session(agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV).handle_command(text)
    assert memory.handle_command("hello", agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV) is None


LIMIT_CALLS: dict[str, Callable[[MemorySystem, Any], list[Any]]] = {
    "recall": lambda m, v: m.recall("paris", agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV, source="history",
                                    limit=v).messages,
    "session.recall": lambda m, v: m.session(agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV).recall(
        "paris", source="history", limit=v).messages,
    "history": lambda m, v: m.history(AGENT, CONV, limit=v),
    "messages": lambda m, v: m.messages(AGENT, CONV, limit=v),
    "resource_history": lambda m, v: m.resource_history("user_md", agent_id=AGENT, owner_id=OWNER_ID, limit=v),
}


@on_every_store
@pytest.mark.parametrize("call", sorted(LIMIT_CALLS))
def test_every_limit_means_the_same_negative_refused_zero_nothing(memory: MemorySystem, call: str) -> None:
    memory.append_message(**MESSAGE)
    memory.write_memory({"op": "add", "category": "identity", "key": "city", "value": "Paris"}, agent_id=AGENT,
                        owner_id=OWNER_ID)
    for bad in (-1, -(2**63), True, False):
        with pytest.raises(InvalidNumber, match="limit"):
            LIMIT_CALLS[call](memory, bad)
    assert LIMIT_CALLS[call](memory, 0) == []
    assert len(LIMIT_CALLS[call](memory, 1)) == 1
    assert len(LIMIT_CALLS[call](memory, 2**63 - 1)) == 1  # more than there is: all of it


@on_every_store
def test_closing_with_a_review_queued_answers_its_future_with_a_typed_error(tmp_path: Path) -> None:
    """Not a CancelledError: a host waiting on the review's future catches FermixError alone.
    (``close_wait_s = 0``: closing does not run the queued review, it records it.)"""
    worker, started, gate = BackgroundWorker("test-held"), threading.Event(), threading.Event()
    memory = MemorySystem(bootstrap(tmp_path / "home", background=worker,
                                    config={"fermix_core": {"timeouts": {"close_wait_s": 0}}}))
    memory.append_message(**MESSAGE)
    held = worker.submit(("held",), lambda: started.set() or gate.wait())
    assert started.wait(10)  # the worker is busy: the review waits in the queue
    review = memory.after_turn(agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV)
    closing = threading.Thread(target=memory.close)
    closing.start()
    try:
        assert isinstance(review.exception(timeout=10), MemoryClosed)
    finally:
        gate.set()
        closing.join(10)
    assert held.result(0) is True  # the running job was waited for, not dropped
    with pytest.raises(MemoryClosed, match="closed"):
        review.result()
    assert issubclass(MemoryClosed, StorageError) and issubclass(MemoryClosed, FermixError)
    with pytest.raises(MemoryClosed, match="closed"):
        memory.after_turn(agent_id=AGENT, owner_id=OWNER_ID, conversation=CONV)
    with MemorySystem.open(tmp_path / "home") as reopened:  # the review was left, not half done
        assert reopened.awaiting_review() == [(AGENT, OWNER_ID, ConversationKey("telegram", "42"))]
        assert [e.event.reason for e in reopened.events() if e.event.kind == "review.skipped"] == ["left_at_close"]


@on_every_store
def test_events_log_after_a_huge_position_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fermix_memory.entrypoints.cli import main

    home = str(tmp_path / "home")
    MemorySystem.open(home).close()
    assert main(["--home", home, "events", "log", "--after", str(HUGE)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--after" in err and len(err.strip().splitlines()) == 1
    assert main(["--home", home, "events", "log", "--after", str(2**63 - 1)]) == 0


@pytest.mark.sqlite_only("fills the pages of memory.db")
def test_disk_full_during_a_large_import_reports_disk_full_and_writes_nothing(tmp_path: Path) -> None:
    with memory_on_held_store(tmp_path / "home") as (memory, store):
        disk_full_import(memory, store)


def disk_full_import(memory: MemorySystem, store: SqliteEventStore) -> None:
    with store.exclusive("given a small disk") as writer:
        pages = writer.execute("PRAGMA page_count").fetchall()[0][0]
        # Room for a few MB: the import fills SQLite's page cache, which spills before the limit hits.
        writer.execute(f"PRAGMA max_page_count = {pages + 1500}")
    lines = [jsonl(content=f"word {i} " * 60) for i in range(12_000)]
    with pytest.raises(StorageError, match="disk is full") as caught:
        memory.import_history(lines)
    assert "cannot rollback" not in str(caught.value)
    with store.exclusive("given its disk back") as writer:
        writer.execute("PRAGMA max_page_count = 1073741823")
    assert event_count(memory) == 0
    assert memory.append_message(**MESSAGE) == 1
    assert memory.verify().ok


@pytest.mark.parametrize("config", [
    {"fermix_core": {1: 2}},
    {"fermix_core": {"memory": {("a",): 1}}},
    {"fermix_core": {"memory": {"review_max_messages": 2**70}}},
    {"fermix_core": {"memory": {"review_interval_hours": 10**400}}},
    {"fermix_core": {"memory": {"review_interval_hours": 1e300}}},
    {"fermix_core": {"providers": [{"name": "x", "kind": "rules", "context_window": 2**64}]}},
])
def test_a_config_mapping_with_non_text_keys_or_huge_numbers_is_a_config_error(
    tmp_path: Path, config: dict[Any, Any]
) -> None:
    with pytest.raises(ConfigError):
        MemorySystem.open(tmp_path / "home", config=config)


@pytest.mark.parametrize("text", ["\ud800", "a\x00b"])
@pytest.mark.parametrize("field", ["schedule", "prompt", "name", "description"])
def test_job_and_source_text_with_nul_or_lone_surrogates_is_a_typed_error(
    memory: MemorySystem, field: str, text: str
) -> None:
    job = {"job_id": "daily", "agent_id": AGENT, "owner_id": OWNER_ID, "name": "Daily", "schedule": "0 9 * * *",
           "prompt": "Summarise"}
    with pytest.raises(DomainError):
        if field == "description":
            memory.register_memory_source(source_id="notes", agent_id=AGENT, owner_id=OWNER_ID, source_type="notes",
                                          name="Notes", description=text)
        else:
            memory.save_job(**{**job, field: text})
    assert event_count(memory) == 0


@on_every_store
@pytest.mark.parametrize("operation", [
    {"op": "archive", "id": 2**70},
    {"op": "replace", "id": 10**5000, "value": "x"},
    {"op": "add", "category": 10**5000, "key": "k", "value": "v"},
    {"op": "add", "category": "goal", "key": 10**5000, "value": "v"},
])
def test_a_refused_operation_with_huge_numbers_is_recorded_without_them(
    memory: MemorySystem, operation: dict[str, Any]
) -> None:
    [outcome] = memory.write_memory(operation, agent_id=AGENT, owner_id=OWNER_ID, trust="operator")
    assert outcome.status == "refused"
    assert outcome.memory_id is None
    assert memory.verify().ok
