"""Compaction checkpoints: whose words a checkpoint holds, how far it is trusted, who may read it.

Pure. A checkpoint summarises several messages of one conversation; in a group chat those
are several owners' words. The rules (ADR-0008):

- the words of owner X are the messages recorded under X: X's user messages, and the
  assistant, tool and system messages recorded under X (the host records a reply under the
  owner it answers, and a reply routinely repeats what it answers); a summarised checkpoint
  adds the owners it holds in turn;
- the checkpoint is recorded under the owner of the newest summarised message and names
  every other owner in ``quoted_owners`` (event field, mirrored in the message metadata so
  the row carries it);
- only a checkpoint that holds its own owner's words ONLY is readable outside the window
  (recall, history search); one with quoted owners, or one whose sources are unknown
  (written before owners were recorded), is not — the conversation window still shows it;
- its trust is the least trusted summarised message's (one guest message makes it guest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import Trust, check_identifier

CHECKPOINT_KIND = "checkpoint"
CHECKPOINT_SENDER = "compactor"
QUOTED_OWNERS_KEY = "quoted_owners"


@attrs.frozen(kw_only=True)
class CheckpointSources:
    """Whose words a new checkpoint holds and the trust it keeps."""

    owner_id: str
    quoted_owners: tuple[str, ...]
    trust: Trust
    owners_known: bool  # False when a summarised checkpoint predates recorded owners

    def metadata(self) -> dict[str, list[str]]:
        """The metadata entry that makes the row carry its quoted owners (none when unknown)."""
        return {QUOTED_OWNERS_KEY: list(self.quoted_owners)} if self.owners_known else {}


def is_checkpoint(message: Message) -> bool:
    return is_checkpoint_shape(message.kind, message.sender)


def is_checkpoint_shape(kind: str, sender: str) -> bool:
    return kind == CHECKPOINT_KIND and sender == CHECKPOINT_SENDER


def quoted_owners_of(kind: str, sender: str, owner_id: str, metadata: Mapping[str, object]) -> tuple[str, ...]:
    """The other owners a recorded checkpoint names in its metadata (how an exported checkpoint,
    imported again, keeps saying whose words it holds, so forgetting them still removes it).
    Only a checkpoint has any; a malformed list is refused rather than read as "nobody"."""
    if not is_checkpoint_shape(kind, sender) or QUOTED_OWNERS_KEY not in metadata:
        return ()
    quoted = metadata[QUOTED_OWNERS_KEY]
    if not isinstance(quoted, list):
        raise InvalidIdentifier(f"metadata {QUOTED_OWNERS_KEY} of a checkpoint must be a list of owner ids")
    owners = {check_identifier(owner, f"an owner id in metadata {QUOTED_OWNERS_KEY}") for owner in quoted}
    return tuple(sorted(owners - {owner_id}))


def checkpoint_sources(summarised: Sequence[Message]) -> CheckpointSources:
    """The owner, quoted owners and trust of a checkpoint summarising ``summarised`` (non-empty)."""
    owners: set[str] = set()
    known = True
    for message in summarised:
        owners.add(message.owner_id)
        if is_checkpoint(message):
            quoted = message.metadata.get(QUOTED_OWNERS_KEY)
            if isinstance(quoted, list) and all(isinstance(o, str) for o in quoted):
                owners.update(quoted)
            else:
                known = False
    owner_id = summarised[-1].owner_id
    trust = Trust.OPERATOR if all(m.trust is Trust.OPERATOR for m in summarised) else Trust.GUEST
    return CheckpointSources(owner_id=owner_id, quoted_owners=tuple(sorted(owners - {owner_id})), trust=trust,
                             owners_known=known)


def readable_by_its_owner(message: Message) -> bool:
    """True unless ``message`` is a checkpoint holding (or possibly holding) other owners' words."""
    return not is_checkpoint(message) or message.metadata.get(QUOTED_OWNERS_KEY) == []
