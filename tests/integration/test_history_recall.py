"""History recall (ADR-0019): the speaker is searchable, a matching question brings its reply,
and a scope's ranking depends only on the scope's own text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite import schema
from fermix_memory.application.query_ports import MemoryHit, MessageHit
from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT = "ada"
CHAT = "telegram:100"
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)

pytestmark = pytest.mark.usefixtures("every_store")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    system = MemorySystem.open(tmp_path / "home")
    yield system
    system.close()


def say(memory: MemorySystem, turns: list[tuple[str, str]], *, owner: str = "alice", chat: str = CHAT,
        minute: int = 0) -> list[int]:
    ids = []
    for i, (sender, text) in enumerate(turns):
        ids.append(memory.append_message(agent_id=AGENT, owner_id=owner, conversation=chat, role="user",
                                         sender=sender, content=text,
                                         created_at=START + timedelta(minutes=minute + i)))
    return ids


def history(memory: MemorySystem, query: str, *, owner: str = "alice", limit: int = 10,
            scope: str = "current") -> list[MessageHit]:
    return memory.recall(query, agent_id=AGENT, owner_id=owner, conversation=CHAT, scope=scope,
                         source="history", limit=limit).messages


SMALL_TALK = [
    ("Caroline", "Morning! The weather is grim again."),
    ("Kwame", "Bouldering, honestly. Two hours of that and work just disappears."),
    ("Caroline", "I tried the new bakery near the station, the bread was great."),
    ("Kwame", "My sister visits next week, we will see a film."),
    ("Caroline", "Bouldering looks scary to me, the walls are so high."),
    ("Kwame", "Work has been busy with the quarterly report."),
]


def test_the_speaker_is_searchable(memory: MemorySystem) -> None:
    ids = say(memory, SMALL_TALK)
    kwame = {ids[1], ids[3], ids[5]}
    found = history(memory, "What does Kwame say?")
    assert found and {h.message.id for h in found} == kwame


def test_a_name_does_not_outrank_a_content_word(memory: MemorySystem) -> None:
    ids = say(memory, SMALL_TALK)
    found = [h.message.id for h in history(memory, "Kwame bakery")]
    # Caroline's bakery turn (a content word) first; Kwame's turns (his name only) after it.
    assert found[0] == ids[2]
    assert set(found[1:]) == {ids[1], ids[3], ids[5]}


def test_a_matching_question_brings_the_reply(memory: MemorySystem) -> None:
    ids = say(memory, [
        ("Caroline", "You seem so relaxed lately, Kwame. What's the secret?"),
        ("Kwame", "Two hours on the wall and work just disappears."),
        ("Caroline", "Nice. Anyway, see you Friday."),
    ])
    found = history(memory, "How does Kwame relax?")
    matched = [h for h in found if h.context_of is None]
    assert matched[0].message.id == ids[0]
    position = [h.message.id for h in found].index(ids[1])
    assert found[position].context_of == ids[0], "the reply says which turn matched"
    assert found[position - 1].message.id == ids[0], "right after its question"
    # Within the limit only: one result is the question alone.
    assert [h.message.id for h in history(memory, "How does Kwame relax?", limit=1)] == [ids[0]]


def test_a_reply_of_another_owner_is_not_brought(memory: MemorySystem) -> None:
    [question] = say(memory, [("Caroline", "Which colour did you choose for the bedroom?")])
    say(memory, [("Bob", "Duck-egg blue, secretly.")], owner="bob", minute=1)
    found = history(memory, "bedroom colour")
    assert [h.message.id for h in found] == [question]


def test_the_reply_is_the_next_turn_of_the_same_conversation_only(memory: MemorySystem) -> None:
    """A question that is its conversation's last turn brings nothing, even when a later turn of
    another chat or thread of the same owner exists; in the order of time, not of recording."""
    [last] = say(memory, [("Caroline", "Where did you park the campervan?")], minute=5)
    say(memory, [("Kwame", "Behind the old mill.")], chat="telegram:200", minute=6)
    say(memory, [("Kwame", "By the harbour wall.")], chat="telegram:100:thread-2", minute=7)
    say(memory, [("Kwame", "Too early to tell.")], minute=1)  # recorded later, said earlier
    found = history(memory, "campervan park")
    assert [h.message.id for h in found] == [last]


def test_unreadable_turns_ranked_first_leave_the_list_full(memory: MemorySystem) -> None:
    """Checkpoints whose sources are unknown match the query but are never shown; ranked above
    every readable turn, they do not shorten a short list: it is the head of the long one."""
    for i in range(3):
        memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="system", sender="compactor",
                              kind="checkpoint", content="kiln kiln kiln kiln, the kiln again",
                              created_at=START + timedelta(minutes=i))
    seen = say(memory, [("Sam", "the kiln broke"), ("alice", "a new kiln then")], minute=10)
    everything = [h.message.id for h in history(memory, "kiln")]
    assert sorted(everything) == seen
    assert [h.message.id for h in history(memory, "kiln", limit=2)] == everything
    assert [h.message.id for h in history(memory, "kiln", limit=1)] == everything[:1]


def test_the_tool_says_which_turn_matched(memory: MemorySystem) -> None:
    ids = say(memory, [("Caroline", "What is your favourite dish, Kwame?"), ("Kwame", "Jollof, every time.")])
    result = tool(memory, "memory_recall", {"query": "favourite dish", "source": "history"})
    assert result["ok"], result
    rows = [(m["id"], m["matched"], m["reply_to"]) for m in result["messages"]]
    assert rows == [(ids[0], True, None), (ids[1], False, ids[0])]


def tool(memory: MemorySystem, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return memory.dispatch_tool(name, arguments, agent_id=AGENT, owner_id="alice", trust="operator",
                                conversation=CHAT)


def ranking(memory: MemorySystem, query: str, scope: str) -> list[tuple[int, float]]:
    return [(h.message.id, h.rank) for h in history(memory, query, scope=scope, limit=50)]


@pytest.mark.parametrize("scope", ["current", "all"])
def test_another_owners_writes_leave_the_ranking_unchanged(memory: MemorySystem, scope: str) -> None:
    say(memory, [
        ("alice", "I love pottery and green tea."),
        ("Sam", "Tea with friends on Sunday, then more tea."),
        ("alice", "Pottery class moved to Thursday."),
        ("Sam", "The kiln at the pottery studio broke, no tea either."),
        ("alice", "Nothing new, just work."),
    ])
    queries = ("pottery tea", "alice tea", "kiln Thursday", "What does Sam like?")
    before = {q: ranking(memory, q, scope) for q in queries}
    assert all(before.values())
    # Bob's words make "pottery" and "sam" common and "tea" rare in the database as a whole.
    say(memory, [("Sam", f"pottery pottery sam {i}") for i in range(60)], owner="bob", chat="telegram:200")
    say(memory, [("bob", "pottery Thursday kiln")], owner="bob")
    assert {q: ranking(memory, q, scope) for q in queries} == before


def test_a_short_list_is_the_head_of_a_long_one_and_ignores_other_owners(memory: MemorySystem) -> None:
    """With a small limit only the matches of the scope's rarest words are scored; the list is
    still the head of the full ranking, and other owners' words change neither."""
    say(memory, [("Sam", f"we talked about the weather again, day {i}") for i in range(40)])
    say(memory, [("alice", "the kiln at the studio broke"), ("Sam", "a kiln is expensive, the weather too"),
                 ("alice", "the weather was fine for the market")], minute=100)
    query = "the kiln weather"

    def heads() -> list[list[tuple[int, float]]]:
        return [[(h.message.id, h.rank) for h in history(memory, query, limit=k)] for k in (1, 2, 3, 50)]

    before = heads()
    assert [len(h) for h in before] == [1, 2, 3, 43]
    assert all(head == before[-1][:len(head)] for head in before[:-1])
    # Bob makes "kiln" common and "weather" rare in the database as a whole.
    say(memory, [("bob", f"kiln kiln kiln {i}") for i in range(60)], owner="bob", chat="telegram:200")
    assert heads() == before


HOSTILE = [
    '"', '""', "'", "pottery\"", '"pottery" AND "tea"', "pottery AND tea", "pottery OR", "NOT tea",
    "NEAR(pottery tea, 2)", "NEAR(", "pottery*", "^pottery", "-tea", "sender: Sam", "{content sender}: tea",
    "scope_tokens : o1234", "content : pottery", "(", ")", "\U0001f600\U0001f389 tea \u2615",
    "\u6211\u559c\u6b22 tea", "x" * 10_000, "pottery " * 1_500, "\x00tea", "tea\u200b", "?",
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_any_text_is_a_safe_history_query(memory: MemorySystem, query: str) -> None:
    say(memory, [("Sam", "Pottery and tea on Thursday?"), ("alice", "Yes, tea at four.")])
    for scope in ("current", "owner", "all"):
        for source in ("history", "all"):
            result = memory.recall(query, agent_id=AGENT, owner_id="alice", conversation=CHAT, scope=scope,
                                   source=source, limit=10)
            assert all(h.message.owner_id == "alice" for h in result.messages)


def test_all_fuses_memories_and_history_into_one_list(memory: MemorySystem) -> None:
    ids = say(memory, [("alice", "The pottery class is on Thursday."), ("Sam", "Pottery again, fine.")])
    stored = tool(memory, "memory_store", {"key": "hobby", "value": "pottery on Thursdays"})
    assert stored["ok"], stored
    result = memory.recall("pottery", agent_id=AGENT, owner_id="alice", conversation=CHAT, scope="current",
                           source="all", limit=10)
    kinds: list[Any] = [type(h) for h in result.ranked]
    assert kinds[:3] == [MemoryHit, MessageHit, MessageHit]
    assert {h.message.id for h in result.ranked if isinstance(h, MessageHit)} == set(ids)
    assert len(memory.recall("pottery", agent_id=AGENT, owner_id="alice", conversation=CHAT, source="all",
                             limit=2).ranked) == 2


# Migrations 9 and 8 (vectors) and 4 (the scope sizes and the triggers that keep them) undone.
V4_UNDONE = ("DROP TABLE vector_changes;"  # 9's
             " DROP TABLE message_vectors; DROP TABLE memory_vectors; DROP TABLE vector_queue;"  # and 8's
             " DROP TABLE vector_marks; DROP TRIGGER IF EXISTS memories_vectors_insert;"
             + "".join(f" DROP TRIGGER {t}_vectors_{w};" for t in ("messages", "memories")
                       for w in ("update", "delete"))
             + "DROP TRIGGER messages_fts_sizes_insert; DROP TRIGGER messages_fts_sizes_delete;"
             " DROP TRIGGER messages_fts_sizes_update; DROP TABLE scope_sizes;")


@pytest.mark.sqlite_only("the SQLite file's own schema versions")
def test_a_database_of_version_3_counts_its_scopes_when_opened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        say(memory, SMALL_TALK)
        before = [h.message.id for h in history(memory, "Kwame bouldering")]
    conn = apsw.Connection(str(home / "memory.db"))
    conn.execute(V4_UNDONE + "PRAGMA user_version = 3;")
    conn.close()
    with MemorySystem.open(home) as memory:
        assert [h.message.id for h in history(memory, "Kwame bouldering")] == before
    conn = apsw.Connection(str(home / "memory.db"))
    sizes = conn.execute("SELECT messages, chars FROM scope_sizes ORDER BY token").fetchall()
    conn.close()
    chars = sum(len(text) for _, text in SMALL_TALK)
    assert sizes == [(len(SMALL_TALK), chars), (len(SMALL_TALK), chars)]  # the owner's and the conversation's


@pytest.mark.sqlite_only("the SQLite file's own schema versions")
def test_a_database_of_the_previous_version_gains_sender_search(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        ids = say(memory, SMALL_TALK)
    # Put the file back to version 2: the full-text index without the sender.
    v1 = schema.MIGRATIONS[0]
    old_index = v1[v1.index("CREATE VIRTUAL TABLE messages_fts"):v1.index("CREATE TABLE memories(")]
    conn = apsw.Connection(str(home / "memory.db"))
    conn.execute(V4_UNDONE + "DROP TRIGGER IF EXISTS messages_fts_insert; DROP TRIGGER messages_fts_delete;"
                 " DROP TRIGGER messages_fts_update; DROP TABLE messages_fts;" + old_index
                 + "INSERT INTO messages_fts(messages_fts) VALUES('rebuild'); PRAGMA user_version = 2;")
    conn.close()
    with MemorySystem.open(home) as memory:
        assert {h.message.id for h in history(memory, "Kwame")} == {ids[1], ids[3], ids[5]}
        assert memory.recall("bouldering", agent_id=AGENT, owner_id="alice", conversation=CHAT,
                             source="history").messages
    conn = apsw.Connection(str(home / "memory.db"))
    assert conn.execute("PRAGMA user_version").fetchall() == [(schema.SCHEMA_VERSION,)]
    conn.close()


def test_fermix_memory_search_shows_replies_and_the_fused_list(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        ids = say(memory, [("Caroline", "What is your favourite dish, Kwame?"), ("Kwame", "Jollof, every time.")])
        assert tool(memory, "memory_store", {"key": "dish", "value": "favourite dish: jollof"})["ok"]
    base = ("memory", "search", "favourite dish", "--agent", AGENT, "--owner", "alice",
            "--conversation", CHAT, "--source", "all")
    human = run_cli(*base, home=home)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0].startswith("memory ") and lines[1].startswith(f"message {ids[0]} ")
    assert lines[2].startswith(f"message {ids[1]} ") and f"reply to {ids[0]}" in lines[2]
    as_json = run_cli("--json", *base, home=home)
    assert as_json.returncode == 0, as_json.stderr
    ranked = json.loads(as_json.stdout)["ranked"]
    assert [row.get("context_of") for row in ranked] == [None, None, ids[0]]


LONG_FILLER = ("so anyway I was walking home after work and thinking about the whole week and how everything"
               " seemed to happen at once which is just how it goes sometimes and honestly I would not change"
               " a thing about it even if I could")


@pytest.mark.sqlite_only("SQLite's own history ranking (PostgreSQL ranks with ts_rank)")
def test_in_a_chat_of_long_turns_a_long_turn_is_measured_against_the_chats_own_average_turn(tmp_path: Path) -> None:
    # Every turn here runs to about 45 words: against a fixed short-chat turn the answer's length
    # would outweigh its second matching word, and the short turn with one word would win.
    answer = f"{LONG_FILLER} and the violin recital went well"
    short = "the recital, finally"
    with MemorySystem.open(tmp_path / "home") as memory:
        say(memory, [("Ben", f"{LONG_FILLER} number {k}") for k in range(30)])
        ids = say(memory, [("Ada", answer), ("Ben", short)], minute=40)
        hits = history(memory, "violin recital", limit=2)
    assert [h.message.id for h in hits] == ids


@pytest.mark.sqlite_only("SQLite's own history ranking (PostgreSQL ranks with ts_rank)")
def test_in_a_chat_of_short_turns_the_ranking_is_as_before(tmp_path: Path) -> None:
    from fermix_memory.adapters.sqlite.history_rank import REFERENCE_LENGTH, reference_length

    # Chats of short turns are measured against a typical chat turn, as before (a floor).
    assert reference_length(10, 60) == REFERENCE_LENGTH
    assert reference_length(10, 10 * 40 * 5.1) == pytest.approx(40.0)
    assert reference_length(0, 0) == REFERENCE_LENGTH
