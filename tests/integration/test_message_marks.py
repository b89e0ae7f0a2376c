"""The ``message_marks`` projection on every store: each message holds exactly the marks
``marks_of`` gives its text and time, on every path that writes messages; the marks go with their
message on every path that removes it; the reads by day and by name return only what the reader's
filter selects, in the agreed order; verify and replay cover the table.

Expectations are computed through ``marks_of`` itself, so the tests hold whatever the date and
name heuristics find; a few checks that they find something at all are marked as such."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.mark_writes import fill_marks
from fermix_memory.adapters.sqlite.migrations import MESSAGE_MARKS, MIGRATIONS
from fermix_memory.application.settings_storage import DATABASE_URL_ENV
from fermix_memory.domain.message_marks import marks_of
from fermix_memory.domain.messages import Message
from fermix_memory.domain.scopes import HistoryFilter
from fermix_memory.domain.values import ConversationKey
from fermix_memory.entrypoints.bootstrap import App, bootstrap
from tests.integration.store_reads import store_reads

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)  # a Monday
NAME = "Zebulon Quartermaine"
TEXTS = (
    f"I met {NAME} in Lisbon last Monday",
    "plain words, nothing else",
    "We fly to Paris on 12 March with Mei",
    f"Mei and {NAME} said hello yesterday",
    "Two weeks ago Oskar lent me his bike",
    "Did Lisbon feel warm on 5 March?",
    "ok",
)
ALICE_CHAT, ALICE_WORK, BOB_CHAT = "telegram:alice", "slack:work", "telegram:bob"


def said_at(i: int) -> datetime:
    return START + timedelta(hours=13 * i)


def turns(owner: str, conversation: str, agent: str = "ada", offset: int = 0) -> list[dict[str, Any]]:
    return [{"agent_id": agent, "owner_id": owner, "conversation": conversation, "role": "user", "sender": owner,
             "content": text, "created_at": said_at(i + offset)} for i, text in enumerate(TEXTS)]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    application = bootstrap(tmp_path / "home")
    with MemorySystem(application) as memory:
        for spec in turns("alice", ALICE_CHAT):
            memory.append_message(**spec)
        memory.append_messages(turns("alice", ALICE_WORK, offset=3))  # a batch, one transaction
        memory.append_messages([*turns("bob", BOB_CHAT), *turns("alice", ALICE_CHAT, agent="max")])
        yield application


def everything(app: App) -> list[Message]:
    return list(app.queries.iter_messages())


def expected_marks(messages: list[Message]) -> dict[int, tuple[str, ...]]:
    marks = {m.id: tuple(sorted(marks_of(m.content, m.created_at))) for m in messages}
    return {i: found for i, found in marks.items() if found}


def selected(messages: list[Message], where: HistoryFilter) -> list[Message]:
    return [m for m in messages if m.agent_id == where.agent_id and m.owner_id == where.owner_id
            and (where.conversation is None or m.conversation == where.conversation)]


def newest_first(messages: list[Message]) -> list[int]:
    return [m.id for m in sorted(messages, key=lambda m: (m.created_at, m.id), reverse=True)]


FILTERS = (HistoryFilter(agent_id="ada", owner_id="alice"),
           HistoryFilter(agent_id="ada", owner_id="alice", conversation=ConversationKey("telegram", "alice")),
           HistoryFilter(agent_id="max", owner_id="alice"), HistoryFilter(agent_id="ada", owner_id="bob"))


def test_each_message_holds_the_marks_of_its_text_and_time(app: App) -> None:
    messages = everything(app)
    assert len(messages) == 4 * len(TEXTS)
    assert app.queries.marks_of([m.id for m in messages]) == expected_marks(messages)
    assert app.queries.marks_of([]) == {}


def test_the_heuristics_mark_days_and_names() -> None:
    """End to end with the real date and name finders: a turn naming someone on a relative day."""
    marks = marks_of(TEXTS[0], said_at(0))
    assert f"e:{NAME.casefold()}" in marks
    assert any(m.startswith("d:") for m in marks)
    assert marks_of("ok", said_at(0)) == ()


def test_history_in_days_gives_mentions_then_turns_said_then_newest_first(app: App) -> None:
    messages = everything(app)
    marks = expected_marks(messages)
    days = sorted({date.fromisoformat(m[2:]) for found in marks.values() for m in found if m.startswith("d:")})
    windows = [(d, d) for d in days] + [(START.date(), START.date() + timedelta(days=2)),
                                        (date(2024, 3, 1), date(2024, 3, 31)), (date(1999, 1, 1), date(1999, 1, 2))]
    for where in FILTERS:
        mine = selected(messages, where)
        for first, last in windows:
            span = {f"d:{first + timedelta(days=k)}" for k in range((last - first).days + 1)}
            mention = [m for m in mine if span & set(marks.get(m.id, ()))]
            said = [m for m in mine if first <= m.created_at.astimezone(UTC).date() <= last and m not in mention]
            want = newest_first(mention) + newest_first(said)
            hits = app.queries.history_in_days(where, first, last, 50)
            assert [h.message.id for h in hits] == want, (where, first, last)
            assert all(h.rank == 0.0 and h.snippet == h.message.content for h in hits)
            assert [h.message.id for h in app.queries.history_in_days(where, first, last, 2)] == want[:2]
    assert app.queries.history_in_days(FILTERS[0], START.date(), START.date() - timedelta(days=1), 10) == []


def test_history_naming_gives_most_names_matched_then_newest(app: App) -> None:
    messages = everything(app)
    marks = expected_marks(messages)
    names = sorted({m[2:] for found in marks.values() for m in found if m.startswith("e:")})
    asked = [[n] for n in names] + [names, [NAME, "mei"], [NAME.upper()], ["nobody at all"]]
    for where in FILTERS:
        mine = selected(messages, where)
        for entities in asked:
            wanted = {f"e:{e.casefold()}" for e in entities}
            matched = {m.id: len(wanted & set(marks.get(m.id, ()))) for m in mine}
            ranked = sorted((m for m in mine if matched[m.id]),
                            key=lambda m: (-matched[m.id], -m.created_at.timestamp(), -m.id))
            hits = app.queries.history_naming(where, entities, 50)
            assert [h.message.id for h in hits] == [m.id for m in ranked], (where, entities)
            assert [h.rank for h in hits] == [-float(matched[m.id]) for m in ranked]
    assert app.queries.history_naming(FILTERS[0], [], 10) == []


def test_no_read_returns_another_owners_or_agents_messages(app: App) -> None:
    """Bob's and agent max's turns carry the same marks as Alice's with ada: none of them comes
    back to Alice with ada, whatever she asks."""
    where = FILTERS[0]
    names = [m[2:] for found in expected_marks(everything(app)).values() for m in found if m.startswith("e:")]
    found = [*app.queries.history_naming(where, names, 1000),
             *app.queries.history_in_days(where, date(2000, 1, 1), date(2100, 1, 1), 1000)]
    assert found and {(h.message.agent_id, h.message.owner_id) for h in found} == {("ada", "alice")}
    chat = FILTERS[1]
    assert {h.message.conversation for h in app.queries.history_in_days(
        chat, date(2000, 1, 1), date(2100, 1, 1), 1000)} == {chat.conversation}


def test_newest_message_at(app: App) -> None:
    messages = everything(app)
    for where in FILTERS:
        assert app.queries.newest_message_at(where) == max(m.created_at for m in selected(messages, where))
    assert app.queries.newest_message_at(HistoryFilter(agent_id="ada", owner_id="nobody")) is None


def test_marks_go_with_a_retracted_message_and_a_forgotten_conversation_and_owner(app: App) -> None:
    memory = MemorySystem(app)
    newest = memory.retract_newest_message(agent_id="ada", owner_id="alice", conversation=ALICE_CHAT,
                                           trust="operator")
    assert newest is not None and newest.content == TEXTS[-1]
    memory.append_message(agent_id="ada", owner_id="alice", conversation=ALICE_CHAT, role="user", sender="alice",
                          content=f"{NAME} again on 6 March", created_at=said_at(20))
    retracted = memory.retract_newest_message(agent_id="ada", owner_id="alice", conversation=ALICE_CHAT,
                                              trust="operator")
    assert retracted is not None and retracted.id not in app.queries.marks_of([retracted.id])
    assert app.queries.marks_of([m.id for m in everything(app)]) == expected_marks(everything(app))
    memory.forget_conversation("ada", ALICE_WORK)
    memory.forget_owner("bob")
    left = everything(app)
    assert {(m.owner_id, m.conversation.channel) for m in left} == {("alice", "telegram")}
    with store_reads(app.home) as reads:
        stored = reads.select("SELECT message_id, mark FROM message_marks ORDER BY message_id, mark")
    assert stored == sorted((i, mark) for i, found in expected_marks(left).items() for mark in found)


def test_verify_covers_the_marks_and_a_replay_rebuilds_them(app: App, tmp_path: Path) -> None:
    memory = MemorySystem(app)
    report = memory.verify()
    assert report.ok, report.problem
    some = min(expected_marks(everything(app)))
    tamper(app.home, "INSERT INTO message_marks(message_id, mark) VALUES (?, 'e:somebody else')", (some,))
    report = memory.verify()
    assert not report.ok and "message_marks" in (report.problem or ""), report
    tamper(app.home, "DELETE FROM message_marks WHERE mark = 'e:somebody else'", ())
    assert memory.verify().ok
    if not os.environ.get(DATABASE_URL_ENV):
        rebuilt = memory.replay_into(tmp_path / "rebuilt")
        assert rebuilt["identical"], rebuilt["differing_tables"]


def tamper(home: Path, sql: str, params: tuple[Any, ...]) -> None:
    """Change the table behind the store's back."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params or None)
        return
    import apsw

    conn = apsw.Connection(str(home / "memory.db"))
    conn.set_busy_timeout(30_000)  # the memory's background upkeep may be writing
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def test_imported_history_is_marked(app: App) -> None:
    memory = MemorySystem(app)
    lines = [json.dumps({"agent_id": "ada", "owner_id": "carol", "channel": "telegram", "chat_id": "carol",
                         "role": "user", "sender": "carol", "content": text, "created_at": said_at(i).isoformat(),
                         "message_id": f"m{i}"}) for i, text in enumerate(TEXTS)]
    ids = memory.import_history(lines)
    assert len(ids) == len(TEXTS)
    messages = [m for m in everything(app) if m.owner_id == "carol"]
    assert app.queries.marks_of(ids) == expected_marks(messages)


def test_a_store_from_before_the_marks_gets_them_from_its_messages(app: App) -> None:
    """The migration marks the messages stored already, as their appends would have."""
    want = expected_marks(everything(app))
    app.close()
    url = os.environ.get(DATABASE_URL_ENV)
    if url:  # as a database of schema 7 was
        tamper(app.home, "DROP TABLE message_marks; DELETE FROM fermix_migrations WHERE version >= 8", ())
    else:  # as a file of schema 11 was
        tamper(app.home, "DROP TRIGGER message_marks_delete; DROP TABLE message_marks;"
                         f" PRAGMA user_version = {MIGRATIONS.index(MESSAGE_MARKS)}", ())
    again = bootstrap(app.home)
    with MemorySystem(again) as memory:
        assert again.queries.marks_of([*want, 10_000]) == want
        report = memory.verify()
        assert report.ok, report.problem
        memory.forget_owner("bob")  # the trigger (or cascade) is there again
        assert again.queries.marks_of(list(want)) == expected_marks(everything(again))


@pytest.mark.sqlite_only("fills a SQLite file directly")
def test_the_fill_reads_the_messages_a_batch_at_a_time(app: App) -> None:
    import apsw

    want = expected_marks(everything(app))
    conn = apsw.Connection(str(app.home / "memory.db"))
    try:
        with conn:
            conn.execute("DELETE FROM message_marks")
            assert fill_marks(conn.cursor(), batch=3) == sum(map(len, want.values()))
    finally:
        conn.close()
    assert app.queries.marks_of(list(want)) == want


SAID = datetime(2024, 3, 6, 12, tzinfo=UTC)
ALICE_TEXT = f"I met {NAME} in Lisbon on 12 March"
RETRACTED_TEXT = "Wilhelmina Thistlewood called on 14 March"
CAROL_TEXT = "Ignatius Fairweather arrives on 15 March"
BOB_TEXT = "Bartholomew Nightingale visits on 13 March"


def needles(text: str) -> tuple[str, ...]:
    """The marks of ``text`` that are its own (Alice's Lisbon is Bob's too): the bytes to look for."""
    return tuple(m for m in marks_of(text, SAID) if m != "e:lisbon")


@pytest.mark.parametrize("erasure", ["owner", "conversation"])
def test_no_byte_of_a_forgotten_turns_marks_is_left(erasure: str, request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    """An owner's turns (one of them retracted first), or a conversation, are forgotten: no byte
    of their marks is left in the store's files; another owner's marks stay (two erasures in a
    row on PostgreSQL, statistics and all: tests/integration/test_postgres_forget_bytes.py)."""
    from tests.integration.test_forget import found

    gone = (*needles(ALICE_TEXT), *needles(RETRACTED_TEXT)) if erasure == "owner" else needles(CAROL_TEXT)
    kept = (*needles(BOB_TEXT), *(needles(CAROL_TEXT) if erasure == "owner" else needles(ALICE_TEXT)))
    assert len(gone) == (4 if erasure == "owner" else 2)  # a name and a day each: the finders found them
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        say = {"role": "user", "created_at": SAID}
        for agent in ("ada", "max"):
            memory.append_message(agent_id=agent, owner_id="alice", conversation=ALICE_CHAT, sender="alice",
                                  content=ALICE_TEXT, **say)
        memory.append_message(agent_id="ada", owner_id="alice", conversation=ALICE_CHAT, sender="alice",
                              content=RETRACTED_TEXT, **say)
        assert memory.retract_newest_message(agent_id="ada", owner_id="alice", conversation=ALICE_CHAT,
                                             trust="operator") is not None
        memory.append_message(agent_id="ada", owner_id="carol", conversation="telegram:carol", sender="carol",
                              content=CAROL_TEXT, **say)
        memory.append_message(agent_id="ada", owner_id="bob", conversation=BOB_CHAT, sender="bob", content=BOB_TEXT,
                              **say)
    files = _store_files(request, home)
    assert set(found(files(), (*gone, *kept))) >= {*needles(ALICE_TEXT), *needles(CAROL_TEXT), *needles(BOB_TEXT)}
    with MemorySystem.open(home) as memory:
        if erasure == "owner":
            assert memory.forget_owner("alice").finished
        else:
            assert memory.forget_conversation("ada", "telegram:carol").finished
        assert memory.verify().ok
    assert found(files(), gone) == {}
    assert set(found(files(), kept)) == set(kept)


def _store_files(request: pytest.FixtureRequest, home: Path) -> Any:
    """What to scan: the home (SQLite: memory.db and its WAL), or the database's folder on the server."""
    url = os.environ.get(DATABASE_URL_ENV)
    if not url:
        return lambda: home
    from tests.integration.test_postgres_forget_bytes import database_folder

    server = request.getfixturevalue("postgres_server")
    return lambda: database_folder(server, url)
