"""Every event kind declares whose content it carries; forgetting follows the declarations to
events without an owner field: group checkpoints quoting someone, conversation-level failures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from fermix_memory.application.store_ports import EventStore
from fermix_memory.application.streams import conversation_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import OwnerContentFinder
from fermix_memory.domain.values import ConversationKey, Role
from tests.integration.held_store import memory_on_held_store
from tests.integration.test_forget import found, write_everything

AT = datetime(2026, 3, 1, tzinfo=UTC)
GROUP = ConversationKey(channel="telegram", chat_id="group")
ALICE_WORD, BOB_WORD, CAROL_WORD = "Alicequotedzeppelin", "Bobownwordfalcon", "Carolmodelanswerkiwi"


def test_every_event_kind_declares_whose_content_it_carries() -> None:
    undeclared = [cls.kind for cls in ev.ALL_EVENTS if not {"erasure", "refers_to_others"} <= set(vars(cls))]
    assert undeclared == []

    @attrs.frozen(kw_only=True)
    class Forgetful(ev.DomainEvent):  # a new kind that forgot to declare: no silent default
        kind = "test.forgetful"

    with pytest.raises(NotImplementedError, match="Forgetful"):
        Forgetful(at=AT).erasure()


def append(store: EventStore, event: ev.DomainEvent) -> None:
    store.write(lambda tx: tx.append(conversation_stream("ada", GROUP), [event]))


def group_chat(memory: MemorySystem, store: EventStore) -> None:
    """Alice, Bob and Carol in one group; Bob's checkpoint quotes Alice; a compaction failure
    quotes the model's answer (which quoted Carol)."""
    for owner, word in (("alice", "hello"), ("bob", BOB_WORD), ("carol", "hi")):
        memory.append_message(agent_id="ada", owner_id=owner, conversation="telegram:group", role="user",
                              sender=owner, content=f"{owner} says {word}")
    append(store, ev.MessageAppended(
        at=AT, agent_id="ada", owner_id="bob", conversation=GROUP, sender="compactor", role=Role.SYSTEM,
        message_kind="checkpoint", content=f"Bob said {BOB_WORD}; Alice said {ALICE_WORD}", created_at=AT,
        quoted_owners=("alice",)))
    append(store, ev.CompactionFailed(at=AT, agent_id="ada", conversation=GROUP,
                                       error=f"ModelBadResponse: 'Carol said {CAROL_WORD}'",
                                       retry_after=AT + timedelta(days=3650)))


def test_forget_erases_a_message_that_quotes_the_owner(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with memory_on_held_store(home) as (memory, store):
        group_chat(memory, store)
        assert ALICE_WORD in found(home, (ALICE_WORD,))
        report = memory.forget_owner("alice")
        assert report.wal_truncated
        assert all(ALICE_WORD not in m.content for m in memory.history("ada", "telegram:group", limit=None))
        assert memory.recall(ALICE_WORD, agent_id="ada", owner_id="bob", conversation="telegram:group",
                             source="history").messages == []
        verified = memory.verify()
        assert verified.ok, verified.problem
        assert memory.replay_into(tmp_path / "replayed")["identical"]
        assert any(BOB_WORD in m.content for m in memory.history("ada", "telegram:group", limit=None))
    assert found(home, (ALICE_WORD,)) == {}
    assert BOB_WORD in found(home, (BOB_WORD,))


def test_forget_erases_conversation_events_of_a_conversation_the_owner_took_part_in(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with memory_on_held_store(home) as (memory, store):
        group_chat(memory, store)
        append(store, ev.CompactionFailed(at=AT, agent_id="ada", conversation=ConversationKey(
            channel="telegram", chat_id="elsewhere"), error="kept: nobody forgotten here", retry_after=AT))
        report = memory.forget_owner("carol")
        assert report.erased_events["ada"] == 2  # her message and the failure quoting the model
        verified = memory.verify()
        assert verified.ok, verified.problem
        assert memory.replay_into(tmp_path / "replayed")["identical"]
        [record] = [r.event for r in memory.events() if isinstance(r.event, ev.OwnerForgotten)]
        assert record.conversations == (GROUP,)
    assert found(home, (CAROL_WORD,)) == {}
    assert "kept: nobody forgotten here" in found(home, ("kept: nobody forgotten here",))


def test_an_owner_of_another_conversation_does_not_reach_the_group(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with memory_on_held_store(home) as (memory, store):
        group_chat(memory, store)
        memory.append_message(agent_id="ada", owner_id="dave", conversation="telegram:dave", role="user",
                              content="dave alone")
        assert memory.forget_owner("dave").erased_events == {"ada": 1}
        assert memory.verify().ok
    assert set(found(home, (ALICE_WORD, BOB_WORD, CAROL_WORD))) == {ALICE_WORD, BOB_WORD, CAROL_WORD}


def test_the_payload_filter_finds_what_a_pass_over_the_whole_log_finds(tmp_path: Path) -> None:
    with memory_on_held_store(tmp_path / "home") as (memory, store):
        write_everything(memory)
        group_chat(memory, store)

        def both(tx: Any, erasing: Any, owner: str) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
            full, narrow = OwnerContentFinder(owner), OwnerContentFinder(owner)
            for item in tx.read_events():
                full.add(item.position, item.event)
            for item in erasing.erasure_candidates(owner, ev.REFERRING_KINDS):
                narrow.add(item.position, item.event)
            return full.positions(), narrow.positions()

        for owner in ("alice", "bob", "carol"):
            full, narrow = SqliteErasure(store).erase(lambda tx, erasing, o=owner: both(tx, erasing, o))
            assert full and full == narrow, owner
