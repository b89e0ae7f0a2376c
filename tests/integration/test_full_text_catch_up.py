"""SQLite writes a new message's or memory row's full-text entries after the write, by a catch-up
(ADR-0091): the rows above each index's mark wait for theirs; a full-text read indexes them first,
so a search right after a write finds it; a row changed, archived, retracted or forgotten while it
waits leaves the index whole; verify and replay hold while rows wait; the upkeep and a clean close
index them; a process killed mid catch-up loses nothing; schema 16 files are migrated (and a file
set back is migrated again without harm); a read-only reader reads what the last writer left.
Most tests open the store without the background upkeep, so what waits stays waiting."""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw

from fermix_memory import MemorySystem
from fermix_memory.adapters.clock import SystemClock
from fermix_memory.adapters.sqlite.audit import replay_into, verify_database
from fermix_memory.adapters.sqlite.full_text_catch_up import FULL_TEXT, indexed_up_to
from fermix_memory.adapters.sqlite.migrations import AFTER_MIGRATION, MIGRATIONS
from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.history import HistoryService
from fermix_memory.application.memory_writes import MemoryWriter
from fermix_memory.domain import events as ev
from fermix_memory.domain.admission import WriteContext
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, ReplaceOperation
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter, Reader, WriterKind
from fermix_memory.domain.values import ConversationKey, ScopeType, Trust
from fermix_memory.entrypoints.home import open_store
from fermix_memory.entrypoints.storage import Storage, sqlite_storage
from tests.child_process import kill_when

AGENT, OWNER = "ada", "alice"
CHAT = ConversationKey("telegram", "alice")
HISTORY = HistoryFilter(agent_id=AGENT, owner_id=OWNER)
ROWS = MemoryFilter(agent_id=AGENT, owner_id=OWNER, scopes=tuple((t, None) for t in ScopeType))
CTX = WriteContext(writer=WriterKind.REVIEWER, reader=Reader(agent_id=AGENT, owner_id=OWNER),
                   provenance=ev.Provenance(agent_id=AGENT, owner_id=OWNER, trust=Trust.OPERATOR,
                                            source_type="review"))
START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
WORDS = ("lighthouse", "harbour", "zebra", "quince", "marble", "violet", "anchor", "tundra")


def append(storage: Storage, *texts: str) -> list[int]:
    return HistoryService(storage.store, SystemClock()).append_many([
        AppendMessage(agent_id=AGENT, owner_id=OWNER, conversation=CHAT, role="user", sender="alice", content=t,
                      created_at=START + timedelta(seconds=i)) for i, t in enumerate(texts)])


def add_row(storage: Storage, key: str, value: str) -> int:
    [out] = MemoryWriter(storage.store, SystemClock()).apply([AddOperation(category="context", key=key, value=value)],
                                                              CTX)
    assert out.memory_id is not None
    return out.memory_id


def change(storage: Storage, op: ReplaceOperation | ArchiveOperation) -> None:
    [out] = MemoryWriter(storage.store, SystemClock()).apply([op], CTX)
    assert out.status in ("replaced", "archived"), out


def found_messages(storage: Storage, word: str) -> set[int]:
    return {hit.message.id for hit in storage.queries.search_history(word, HISTORY, 50)}


def found_rows(storage: Storage, word: str) -> set[int]:
    return {hit.memory.id for hit in storage.queries.search_memories(word, ROWS, 50)}


def connect(home: Path, *, readonly: bool = True) -> apsw.Connection:
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    return apsw.Connection(str(home / "memory.db"), flags=flags)


def marks(home: Path) -> dict[str, int]:
    conn = connect(home)
    try:
        return {index: int(conn.execute(f"SELECT {indexed_up_to(index)}").fetchall()[0][0]) for index in FULL_TEXT}
    finally:
        conn.close()


def assert_whole(home: Path) -> None:
    """Each index passes FTS5's integrity check against all of its content table once the rows
    waiting are indexed (in a transaction rolled back), and holds no row above its mark."""
    conn = connect(home, readonly=False)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for index, (table, columns) in FULL_TEXT.items():
                conn.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 0)")
                mark = f"{indexed_up_to(index)}"
                names = ", ".join(columns)
                conn.execute(f"INSERT INTO {index}(rowid, {names}) SELECT id, {names} FROM {table} WHERE id > {mark}")
                conn.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 1)")
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


def test_a_search_right_after_a_write_finds_it_and_indexes_what_waited(storage: Storage, home: Path) -> None:
    ids = append(storage, "the lighthouse keeper", "a quiet harbour")
    row = add_row(storage, "boat", "a zebra painted on the lighthouse")
    before = marks(home)
    assert before["messages_fts"] < min(ids) and before["memories_fts"] < row, "the entries wait"
    assert found_messages(storage, "lighthouse") == {ids[0]}
    assert found_rows(storage, "zebra") == {row}
    assert marks(home) == {"messages_fts": max(ids), "memories_fts": row}
    assert_whole(home)
    more = append(storage, "lighthouse again")
    assert found_messages(storage, "lighthouse") == {ids[0], more[0]}


def test_rows_changed_archived_or_retracted_while_they_wait_leave_the_index_whole(storage: Storage,
                                                                                  home: Path) -> None:
    ids = append(storage, "the lighthouse keeper", "a marble harbour")
    first = add_row(storage, "boat", "a violet zebra")
    second = add_row(storage, "home", "a tundra cabin")
    change(storage, ReplaceOperation(id=first, value="a quince anchor"))  # above the mark: nothing written
    change(storage, ArchiveOperation(id=second))
    retracted = HistoryService(storage.store, SystemClock()).retract_newest(
        AGENT, CHAT, ev.Provenance(agent_id=AGENT, owner_id=OWNER, trust=Trust.OPERATOR))
    assert retracted is not None and retracted.id == ids[-1]
    assert marks(home)["memories_fts"] < first
    assert_whole(home)
    assert found_rows(storage, "zebra") == set() and found_rows(storage, "quince") == {first}
    assert found_rows(storage, "tundra") == set()  # archived rows are not searched
    assert found_messages(storage, "marble") == set() and found_messages(storage, "lighthouse") == {ids[0]}
    assert_whole(home)
    change(storage, ReplaceOperation(id=first, value="a marble anchor"))  # at the mark: re-indexed at once
    change(storage, ReplaceOperation(id=first, key="ship"))
    assert found_rows(storage, "quince") == set() and found_rows(storage, "marble") == {first}
    assert_whole(home)


def test_verify_and_replay_hold_while_entries_wait(storage: Storage, home: Path, tmp_path: Path) -> None:
    append(storage, "the lighthouse keeper")
    add_row(storage, "boat", "a violet zebra")
    found_messages(storage, "lighthouse")  # these are indexed, the next ones wait
    waiting = append(storage, "a marble harbour")
    add_row(storage, "home", "a tundra cabin")
    assert marks(home)["messages_fts"] < waiting[0]
    for readonly in (True, False):
        report = verify_database(home / "memory.db", readonly=readonly)
        assert report.ok, report.problem
    assert marks(home)["messages_fts"] < waiting[0], "verify writes nothing"
    rebuilt = replay_into(home / "memory.db", tmp_path / "rebuilt")
    assert rebuilt["identical"], rebuilt["differing_tables"]
    assert marks(tmp_path / "rebuilt") == marks_after_catch_up(home)
    assert_whole(tmp_path / "rebuilt")


def marks_after_catch_up(home: Path) -> dict[str, int]:
    conn = connect(home)
    try:
        return {index: int(conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchall()[0][0])
                for index, (table, _) in FULL_TEXT.items()}
    finally:
        conn.close()


def test_forgetting_before_the_catch_up_leaves_no_bytes_and_a_whole_index(tmp_path: Path) -> None:
    secret = "xylophonequartz"
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.append_message(agent_id=AGENT, owner_id="bob", conversation="telegram:bob", role="user",
                              sender="bob", content=f"my code word is {secret}")
        [out] = memory.write_memory({"op": "add", "category": "context", "key": "code", "value": f"is {secret}"},
                                    agent_id=AGENT, owner_id="carol", trust="operator")
        assert out.memory_id is not None
        memory.forget_memory(out.memory_id)
        memory.forget_owner("bob")
    files = [p for p in (tmp_path / "home").iterdir() if p.name.startswith("memory.db")]
    assert not any(secret.encode() in p.read_bytes() for p in files)
    assert_whole(tmp_path / "home")
    assert verify_database(tmp_path / "home" / "memory.db").ok


def test_the_upkeep_and_a_clean_close_index_the_waiting_rows(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="telegram:alice", role="user",
                              sender="alice", content="the lighthouse keeper")
        memory.wait_for_background()
        assert marks(home) == marks_after_catch_up(home)
        memory.write_memory({"op": "add", "category": "context", "key": "boat", "value": "a violet zebra"},
                            agent_id=AGENT, owner_id=OWNER, trust="operator")
    assert marks(home) == marks_after_catch_up(home)
    assert_whole(home)


def test_random_operations_answer_as_an_index_rebuilt_from_the_rows(home: Path, tmp_path: Path) -> None:
    rng = random.Random(91)
    storage = sqlite_storage(open_store(home))
    try:
        rows: list[int] = []
        for _ in range(150):
            step = rng.random()
            text = " ".join(rng.choice(WORDS) for _ in range(3))
            if step < 0.3:
                append(storage, text)
            elif step < 0.55 or not rows:
                rows.append(add_row(storage, f"k{len(rows)}", text))
            elif step < 0.75:
                change(storage, ReplaceOperation(id=rng.choice(rows), value=text))
            elif step < 0.8:
                change(storage, ReplaceOperation(id=rng.choice(rows), key=f"k{rng.random()}"))
            elif step < 0.85:
                HistoryService(storage.store, SystemClock()).retract_newest(
                    AGENT, CHAT, ev.Provenance(agent_id=AGENT, owner_id=OWNER, trust=Trust.OPERATOR))
            elif step < 0.95:
                found_rows(storage, rng.choice(WORDS))  # a catch-up here and there
            else:
                found_messages(storage, rng.choice(WORDS))
            assert_whole(home)
        answers = {(index, word): matches(home, index, word) for index in FULL_TEXT for word in WORDS}
    finally:
        storage.store.close()  # a clean close of a store without upkeep indexes nothing more
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    source, copy = connect(home), apsw.Connection(str(rebuilt / "memory.db"))
    with copy.backup("main", source, "main") as backup:
        backup.step()
    source.close()
    for index in FULL_TEXT:
        copy.execute(f"INSERT INTO {index}({index}) VALUES ('rebuild')")
    copy.close()
    assert answers == {(index, word): matches(rebuilt, index, word) for index in FULL_TEXT for word in WORDS}


def matches(home: Path, index: str, word: str) -> list[int]:
    """The rows ``word`` matches in ``index`` after the rows waiting are indexed (rolled back)."""
    conn = connect(home, readonly=False)
    try:
        conn.execute("BEGIN IMMEDIATE")
        table, columns = FULL_TEXT[index]
        names = ", ".join(columns)
        conn.execute(f"INSERT INTO {index}(rowid, {names}) SELECT id, {names} FROM {table}"
                     f" WHERE id > {indexed_up_to(index)}")
        found = [int(r[0]) for r in conn.execute(f"SELECT rowid FROM {index} WHERE {index} MATCH ? ORDER BY rowid",
                                                 (word,))]
        conn.execute("ROLLBACK")
        return found
    finally:
        conn.close()


CHILD = r"""
import sys
from fermix_memory.adapters.sqlite import full_text_catch_up
from fermix_memory.entrypoints.home import open_store
from fermix_memory.entrypoints.storage import sqlite_storage

index_new = full_text_catch_up.index_new
def announced(cur, most=full_text_catch_up.BATCH):
    sys.stdout.write("indexing\n")
    sys.stdout.flush()
    return index_new(cur, most)
import fermix_memory.adapters.sqlite.search_index as search_index
search_index.index_new = announced

from pathlib import Path
storage = sqlite_storage(open_store(Path(sys.argv[1])))
storage.index.index_text()
"""


def test_a_process_killed_mid_catch_up_leaves_the_index_whole(storage: Storage, home: Path) -> None:
    ids = append(storage, *(f"message {i} {WORDS[i % len(WORDS)]}" for i in range(6000)))
    row = add_row(storage, "boat", "a violet zebra")
    storage.store.close()
    kill_when([sys.executable, "-c", CHILD, str(home)], lambda out: b"indexing" in out, "indexing")
    assert_whole(home)
    reopened = sqlite_storage(open_store(home))
    try:
        assert len(found_messages(reopened, WORDS[1])) == 50  # the search's limit: at least as many match
        assert found_rows(reopened, "zebra") == {row}
        assert marks(home) == {"messages_fts": max(ids), "memories_fts": row}
    finally:
        reopened.store.close()
    assert_whole(home)


def at_schema_16(path: Path) -> None:
    """A database made by the code of schema 16, with a message and a row (indexed by its triggers)."""
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN IMMEDIATE")
    for number, ddl in enumerate(MIGRATIONS[:16], 1):
        conn.execute(ddl)
        if number in AFTER_MIGRATION:
            AFTER_MIGRATION[number](conn.cursor())
    conn.execute("PRAGMA user_version = 16")
    conn.execute("COMMIT")
    conn.close()


def test_a_file_of_schema_16_is_migrated_and_a_file_set_back_is_migrated_again(home: Path) -> None:
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="telegram:alice", role="user",
                              sender="alice", content="the lighthouse keeper")
        memory.write_memory({"op": "add", "category": "context", "key": "boat", "value": "a violet zebra"},
                            agent_id=AGENT, owner_id=OWNER, trust="operator")
    old = home.parent / "old.db"
    at_schema_16(old)
    conn = apsw.Connection(str(old))
    conn.execute(f"ATTACH '{home / 'memory.db'}' AS new")
    tables = [str(r[0]) for r in conn.execute(
        "SELECT name FROM new.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
        " AND name NOT LIKE '%fts%' AND name <> 'scope_sizes'")]  # counted by 16's triggers
    for table in tables:  # messages and rows indexed by 16's insert triggers
        conn.execute(f"INSERT OR REPLACE INTO main.{table} SELECT * FROM new.{table}")
    conn.execute("DELETE FROM main.vector_marks WHERE kind LIKE '%fts'")
    conn.execute("PRAGMA main.application_id = 0x46524D58")
    conn.execute("DETACH new")
    conn.close()
    (home / "memory.db").unlink()
    for leftover in home.glob("memory.db-*"):
        leftover.unlink()
    old.rename(home / "memory.db")
    storage = sqlite_storage(open_store(home))
    try:
        assert marks(home) == marks_after_catch_up(home)
        assert_whole(home)
        waiting = append(storage, "a marble harbour lighthouse")
        assert marks(home)["messages_fts"] < waiting[0]
    finally:
        storage.store.close()
    conn = connect(home, readonly=False)
    conn.execute("PRAGMA user_version = 16")  # set back while a message waits
    conn.close()
    storage = sqlite_storage(open_store(home))
    try:
        assert marks(home) == marks_after_catch_up(home)
        assert_whole(home)
        assert len(found_messages(storage, "lighthouse")) == 2
        assert found_rows(storage, "zebra") != set()
    finally:
        storage.store.close()


def test_a_read_only_reader_reads_the_index_as_the_last_writer_left_it(storage: Storage, home: Path) -> None:
    indexed = append(storage, "the lighthouse keeper")
    found_messages(storage, "lighthouse")
    append(storage, "another lighthouse")
    reader = sqlite_storage(open_store(home, readonly=True))
    try:
        assert found_messages(reader, "lighthouse") == set(indexed)
    finally:
        reader.store.close()
    assert len(found_messages(storage, "lighthouse")) == 2


class _WriterAfterEachStep:
    """The store, with a host's write landing right after each upkeep write (a steady stream of
    puts beside the catch-up); at most ``most`` of them."""

    def __init__(self, storage: Storage, most: int, *, messages: bool = False) -> None:
        self._storage, self._left, self._messages = storage, most, messages
        self.steps = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._storage.store, name)

    def write(self, work: object, **options: object) -> object:
        done = self._storage.store.write(work, **options)  # type: ignore[arg-type]
        self.steps += 1
        if self._left > 0:
            self._left -= 1
            text = f"{WORDS[self._left % len(WORDS)]} arriving on day {self._left}"
            if self._messages:
                append(self._storage, text)
            else:
                add_row(self._storage, f"stream_{self._left}", text)
        return done


def test_a_catch_up_indexes_what_waited_when_it_ran_and_leaves_later_rows_to_the_next(storage: Storage,
                                                                                      home: Path) -> None:
    from fermix_memory.adapters.sqlite.search_index import SqliteSearchIndex

    add_row(storage, "first", "a lighthouse")
    append(storage, "the harbour at dawn")
    store = _WriterAfterEachStep(storage, most=50)
    index = SqliteSearchIndex(store)  # type: ignore[arg-type]
    assert index.index_text() == 2  # the two rows that waited, in one write
    assert store.steps == 1  # not chasing the row that came after it, one commit at a time
    assert marks(home) != marks_after_catch_up(home)  # that row waits for the next catch-up
    assert SqliteSearchIndex(storage.store).index_text() == 1
    assert marks(home) == marks_after_catch_up(home)
    assert_whole(home)


def test_marking_messages_marks_what_waited_when_it_ran_and_leaves_later_messages_to_the_next(
        storage: Storage) -> None:
    from fermix_memory.adapters.sqlite.search_index import SqliteSearchIndex

    append(storage, "the harbour at dawn", "a zebra on Tuesday")
    store = _WriterAfterEachStep(storage, most=50, messages=True)
    marked = SqliteSearchIndex(store).mark_messages()  # type: ignore[arg-type]
    assert store.steps == 2  # one write of full-text entries, one of marks; no chase after new messages
    assert marked == 3  # the two that waited and the one that came after the entries' write
    assert SqliteSearchIndex(storage.store).mark_messages() == 1  # the one after the marks' write
