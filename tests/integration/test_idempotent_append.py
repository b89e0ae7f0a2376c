"""``idempotency_key``: an append retried with the host's own message id stores the message once,
on every way in, across restarts and replay (ADR-0050); on every store."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import AsyncMemorySystem, MemorySystem
from fermix_memory.domain.errors import DomainError

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER, CONV = "ada", "alice", "telegram:42"


def append(memory: MemorySystem, content: str, key: str | None, conversation: str = CONV, **extra: Any) -> int:
    return memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=conversation, role="user",
                                 sender=OWNER, content=content, idempotency_key=key, **extra)


def test_a_second_append_with_the_same_key_stores_nothing_and_returns_the_first_id(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        first = append(memory, "I live in Paris", "tg-1001")
        head = memory.head()
        assert append(memory, "I live in Paris", "tg-1001") == first
        assert append(memory, "a retry may even differ", "tg-1001", metadata={"x": 1}) == first
        assert memory.head() == head  # no event at all
        assert [m.content for m in memory.messages(AGENT, CONV)] == ["I live in Paris"]
        assert append(memory, "I live in Paris", "tg-1002") != first  # another key: another message
        other = append(memory, "I live in Paris", "tg-1001", conversation="telegram:43")
        assert other not in (first,)  # the same key in another conversation is another message
        assert len(memory.messages(AGENT, CONV)) == 2 and len(memory.messages(AGENT, "telegram:43")) == 1
        s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
        assert s.append("user", "I live in Paris", idempotency_key="tg-1001") == first


def test_the_key_survives_a_restart_and_a_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        first = append(memory, "hello", "k-1")
    with MemorySystem.open(tmp_path / "home") as memory:
        assert append(memory, "hello", "k-1") == first
        memory.replay_into(tmp_path / "replayed")
    with monkeypatch.context() as m:
        m.delenv("FERMIX_DATABASE_URL", raising=False)  # the replay is a SQLite home of its own
        with MemorySystem.open(tmp_path / "replayed") as replayed:
            assert append(replayed, "hello", "k-1") == first
            assert len(replayed.messages(AGENT, CONV)) == 1


def test_the_key_is_the_import_key_both_ways(tmp_path: Path) -> None:
    line = json.dumps({"agent_id": AGENT, "owner_id": OWNER, "channel": "telegram", "chat_id": "42", "role": "user",
                       "sender": OWNER, "content": "imported", "message_id": "tg-7"})
    with MemorySystem.open(tmp_path / "home") as memory:
        [imported] = memory.import_history([line])
        assert append(memory, "imported", "tg-7") == imported
        first = append(memory, "appended", "tg-8")
        assert memory.import_history([line.replace("tg-7", "tg-8")]) == []
        exported = [json.loads(x) for x in memory.export_history()]
        assert [(x["content"], x["message_id"]) for x in exported] == [("imported", "tg-7"), ("appended", "tg-8")]
        assert "fermix_import_key" not in exported[1]["metadata"]
        assert append(memory, "appended", "tg-8") == first


def test_a_retracted_messages_key_is_free_again(tmp_path: Path) -> None:
    """A message taken back leaves its key (ADR-0102): the same key records the message anew, and
    that one then holds it; an old export's line with the key brings the message back, as after
    ``forget``; batches and single appends agree."""
    with MemorySystem.open(tmp_path / "home") as memory:
        first = append(memory, "I live in Paris", "tg-1")
        old_export = list(memory.export_history())
        taken = memory.retract_newest_message(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
        assert taken is not None and taken.id == first
        again = append(memory, "I live in Lyon", "tg-1")
        assert again != first
        assert append(memory, "a retry", "tg-1") == again  # the new message holds the key now
        assert [m.content for m in memory.messages(AGENT, CONV)] == ["I live in Lyon"]
        s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
        assert s.append_many([{"role": "user", "content": "retried", "idempotency_key": "tg-1"}]) == [again]
        assert s.retract_newest() is not None
        [batched, repeated] = s.append_many([{"role": "user", "content": "in a batch", "idempotency_key": "tg-1"},
                                             {"role": "user", "content": "twice", "idempotency_key": "tg-1"}])
        assert batched == repeated and batched not in (first, again)
        assert s.retract_newest() is not None
        assert memory.import_history(old_export) != []  # the old line's message is back
        assert [m.content for m in memory.messages(AGENT, CONV)] == ["I live in Paris"]
        assert memory.import_history(old_export) == []
        assert memory.verify().ok


def test_an_agents_item_taken_back_and_added_again_is_back_as_in_the_sdks_session(tmp_path: Path) -> None:
    from agents import SQLiteSession

    from fermix_memory.openai_agents import FermixAgentsSession

    reply = {"id": "msg_abc", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Noted.", "annotations": []}]}
    question = {"role": "user", "content": "I live in Paris"}
    with MemorySystem.open(tmp_path / "home") as memory:
        ours = FermixAgentsSession.open(memory, "support-42", agent_id=AGENT, owner_id=OWNER, review=False)
        theirs = SQLiteSession("support-42", db_path=tmp_path / "sdk.db")

        async def run(session: Any) -> list[Any]:
            await session.add_items([question, reply])
            popped = await session.pop_item()
            assert popped == reply
            await session.add_items([popped])
            await session.add_items([reply])  # a retried add_items: still one item
            return list(await session.get_items())

        assert asyncio.run(run(ours)) == asyncio.run(run(theirs))[:2] == [question, reply]
        theirs.close()


@pytest.mark.parametrize("bad", ["", "x" * 300, "a\nb", 12])
def test_a_bad_key_is_a_typed_error_and_nothing_is_stored(tmp_path: Path, bad: object) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        with pytest.raises(DomainError, match="idempotency_key"):
            append(memory, "hello", bad)  # type: ignore[arg-type]
        with pytest.raises(DomainError, match="differs from idempotency_key"):
            append(memory, "hello", "k-1", metadata={"fermix_import_key": "k-2"})
        assert memory.messages(AGENT, CONV) == []


class Reached(Mapping[str, Any]):
    """Metadata that says when the append reads it (the call is then running on a lane thread)
    and holds the call there until ``go`` is set."""

    def __init__(self) -> None:
        self.read = threading.Event()
        self.go = threading.Event()

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        self.read.set()
        self.go.wait(60)
        return iter(())

    def __len__(self) -> int:
        return 0


def test_a_cancelled_asyncio_append_retried_with_its_key_gives_one_row(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "home") as memory:
            s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
            reached = Reached()
            task = asyncio.ensure_future(s.append("user", "I live in Paris", metadata=reached,
                                                  idempotency_key="tg-1001"))
            while not reached.read.is_set() and not task.done():  # the write is under way on its thread
                await asyncio.sleep(0.001)
            assert not task.done(), task.result()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            reached.go.set()  # the cancelled call goes on with its write
            while not await memory.messages(AGENT, CONV):  # the cancelled write still commits
                await asyncio.sleep(0.001)
            retried = await s.append("user", "I live in Paris", idempotency_key="tg-1001")  # the host retries
            assert [m.id for m in await memory.messages(AGENT, CONV)] == [retried]

    asyncio.run(main())


def test_an_agents_sdk_item_added_again_is_recorded_once(tmp_path: Path) -> None:
    from fermix_memory.openai_agents import FermixAgentsSession

    reply = {"id": "msg_abc", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Noted.", "annotations": []}]}
    with MemorySystem.open(tmp_path / "home") as memory:
        session = FermixAgentsSession.open(memory, "support-42", agent_id=AGENT, owner_id=OWNER)

        async def run() -> None:
            await session.add_items([{"role": "user", "content": "I live in Paris"}, reply])
            await session.add_items([reply])  # a retried add_items after a cancelled run
            await session.add_items([{"role": "user", "content": "I live in Paris"}])  # no id: a new message
            assert await session.get_items() == [{"role": "user", "content": "I live in Paris"}, reply,
                                                 {"role": "user", "content": "I live in Paris"}]

        asyncio.run(run())
