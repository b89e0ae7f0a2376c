"""Whose words a compaction checkpoint holds, its trust, and who may read it (ADR-0008)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fermix_memory.domain.checkpoint import (
    CheckpointSources,
    checkpoint_sources,
    is_checkpoint,
    quoted_owners_of,
    readable_by_its_owner,
)
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role, Trust

KEY = ConversationKey("tg", "1")
AT = datetime(2026, 3, 1, tzinfo=UTC)


def message(owner: str, *, role: Role = Role.USER, trust: Trust = Trust.OPERATOR, kind: str = "text",
            sender: str = "", metadata: dict[str, Any] | None = None) -> Message:
    return Message(id=1, agent_id="ada", owner_id=owner, conversation=KEY, sender=sender or owner, role=role,
                   kind=kind, content="x", metadata=metadata or {}, trust=trust, created_at=AT)


def checkpoint(owner: str, **metadata: Any) -> Message:
    return message(owner, role=Role.SYSTEM, kind="checkpoint", sender="compactor", metadata=metadata)


def test_assistant_answers_count_as_words_of_the_owner_they_are_recorded_under() -> None:
    sources = checkpoint_sources([message("bob"), message("bob", role=Role.ASSISTANT), message("alice")])
    assert (sources.owner_id, sources.quoted_owners) == ("alice", ("bob",))
    assert sources.metadata() == {"quoted_owners": ["bob"]}
    alone = checkpoint_sources([message("alice"), message("alice", role=Role.ASSISTANT)])
    assert (alone.owner_id, alone.quoted_owners, alone.metadata()) == ("alice", (), {"quoted_owners": []})


def test_a_summarised_checkpoint_brings_its_owners() -> None:
    sources = checkpoint_sources([checkpoint("alice", quoted_owners=["bob", "carol"]), message("alice")])
    assert sources.quoted_owners == ("bob", "carol") and sources.owners_known


def test_a_checkpoint_of_unknown_sources_is_never_readable_outside_the_window() -> None:
    legacy = checkpoint("alice")  # written before checkpoints recorded their owners
    assert not readable_by_its_owner(legacy)
    sources = checkpoint_sources([legacy, message("alice")])
    assert not sources.owners_known and sources.metadata() == {}
    assert not readable_by_its_owner(checkpoint("alice", quoted_owners=["bob"]))
    assert readable_by_its_owner(checkpoint("alice", quoted_owners=[]))
    assert readable_by_its_owner(message("alice", kind="checkpoint"))  # a host's own message of that kind


def test_one_guest_message_makes_the_checkpoint_guest() -> None:
    assert checkpoint_sources([message("a"), message("a", role=Role.ASSISTANT)]).trust is Trust.OPERATOR
    assert checkpoint_sources([message("a"), message("b", trust=Trust.GUEST)]).trust is Trust.GUEST


def test_a_recorded_checkpoint_names_the_other_owners_its_metadata_lists() -> None:
    meta = {"quoted_owners": ["carol", "bob", "alice", "bob"]}
    assert quoted_owners_of("checkpoint", "compactor", "alice", meta) == ("bob", "carol")
    assert quoted_owners_of("checkpoint", "compactor", "alice", {"quoted_owners": []}) == ()
    assert quoted_owners_of("checkpoint", "compactor", "alice", {"other": 1}) == ()


def test_only_a_checkpoint_carries_quoted_owners() -> None:
    meta = {"quoted_owners": ["bob"]}
    assert quoted_owners_of("text", "compactor", "alice", meta) == ()
    assert quoted_owners_of("checkpoint", "alice", "alice", meta) == ()
    assert quoted_owners_of("text", "compactor", "alice", {"quoted_owners": "junk"}) == ()


@pytest.mark.parametrize("quoted", ["bob", ("bob",), [1], [""], ["a\nb"], None])
def test_a_checkpoints_malformed_quoted_owners_are_refused(quoted: object) -> None:
    with pytest.raises(InvalidIdentifier, match="quoted_owners"):
        quoted_owners_of("checkpoint", "compactor", "alice", {"quoted_owners": quoted})


def said_by(owner: str, *, trust: Trust = Trust.OPERATOR, kind: str = "text", sender: str = "user",
            metadata: dict[str, object] | None = None) -> Message:
    return Message(id=1, agent_id="a", owner_id=owner, conversation=KEY, sender=sender, role=Role.USER, kind=kind,
                   content="x", metadata=metadata or {}, trust=trust, created_at=AT)


def test_a_checkpoint_is_kind_checkpoint_from_the_compactor() -> None:
    assert is_checkpoint(said_by("o", kind="checkpoint", sender="compactor"))
    assert not is_checkpoint(said_by("o", kind="checkpoint", sender="user"))
    assert not is_checkpoint(said_by("o", kind="text", sender="compactor"))
    assert not is_checkpoint(said_by("o"))


def test_checkpoint_sources_exactly() -> None:
    sources = checkpoint_sources([said_by("bob"), said_by("carol", trust=Trust.GUEST), said_by("alice")])
    assert sources == CheckpointSources(owner_id="alice", quoted_owners=("bob", "carol"), trust=Trust.GUEST,
                                        owners_known=True)
    own = checkpoint_sources([said_by("alice"), said_by("alice")])
    assert own == CheckpointSources(owner_id="alice", quoted_owners=(), trust=Trust.OPERATOR, owners_known=True)
    assert own.metadata() == {"quoted_owners": []}
    nested = checkpoint_sources([said_by("alice", kind="checkpoint", sender="compactor",
                                         metadata={"quoted_owners": ["dave"]}), said_by("alice")])
    assert nested.quoted_owners == ("dave",) and nested.owners_known
    # A text message that merely carries the metadata key is not a checkpoint.
    plain = checkpoint_sources([said_by("alice", metadata={"quoted_owners": ["eve"]})])
    assert plain.quoted_owners == () and plain.owners_known
    unknown = checkpoint_sources([said_by("alice", kind="checkpoint", sender="compactor"), said_by("alice")])
    assert not unknown.owners_known and unknown.metadata() == {}
    bad = checkpoint_sources([said_by("alice", kind="checkpoint", sender="compactor",
                                      metadata={"quoted_owners": ["x", 3]})])
    assert not bad.owners_known and bad.quoted_owners == ()


def test_only_a_checkpoint_of_its_owners_words_alone_is_readable() -> None:
    assert readable_by_its_owner(said_by("o"))
    assert readable_by_its_owner(said_by("o", kind="checkpoint", sender="compactor", metadata={"quoted_owners": []}))
    assert not readable_by_its_owner(said_by("o", kind="checkpoint", sender="compactor",
                                             metadata={"quoted_owners": ["x"]}))
    assert not readable_by_its_owner(said_by("o", kind="checkpoint", sender="compactor"))
