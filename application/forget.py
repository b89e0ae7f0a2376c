"""Forgetting an owner: erase what they left with an agent, keep a content-free record of it.

One write transaction redacts the payload of every event that carries the owner's content
and records ``owner.forgotten``, whose projection deletes the owner's rows; then the prompt
files go and the store is scrubbed so no deleted byte lingers in the database files.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import attrs

from fermix_memory.application.errors import StorageError
from fermix_memory.application.ports import Clock, Erasure, ErasureTransaction, EventStore, WriteTransaction
from fermix_memory.application.streams import owner_stream, parse_owner_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import OwnerContentFinder
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.values import Trust, check_identifier, is_encodable

MAX_REASON_CHARS = 500


@attrs.frozen(kw_only=True)
class ForgetReport:
    """What an erasure did: per agent, how many events were redacted; whether the prompt-file
    folders existed; and whether the database files were fully scrubbed. When nothing was
    found, nothing is rewritten and both byte counts are 0."""

    owner_id: str
    erased_events: dict[str, int]
    prompt_files_removed: list[str]
    wal_truncated: bool
    bytes_before: int
    bytes_after: int

    @property
    def agents(self) -> list[str]:
        return sorted(self.erased_events)


class OwnerFiles(Protocol):
    """The prompt files of (agent, owner), removed after their erasure."""

    def remove_files(self, agent_id: str, owner_id: str) -> bool:
        """Delete them unless a current revision exists again; ``True`` when some were deleted."""
        ...

    def record_in(self, tx: WriteTransaction, events: Sequence[ev.DomainEvent], at: datetime) -> None:
        """Re-render, in the erasure's transaction, the files the erasure changes (other owners'
        MEMORY.md lose the forgotten owner's standing rules)."""
        ...


def _is_owner_stream(stream: str, owner_id: str, agent_id: str | None) -> bool:
    try:
        agent, owner = parse_owner_stream(stream)
    except ValueError:
        return False
    return owner == owner_id and agent_id in (None, agent)


class Forgetting:
    def __init__(self, store: EventStore, erasure: Erasure, files: OwnerFiles, clock: Clock) -> None:
        self._store = store
        self._erasure = erasure
        self._files = files
        self._clock = clock

    def forget_owner(self, owner_id: str, *, agent_id: str | None = None, by: str = "operator",
                     reason: str = "") -> ForgetReport:
        """Erase ``owner_id``'s messages, memory rows, reviews, prompt files, sources and jobs with
        ``agent_id`` (every agent when ``None``). Idempotent: forgetting twice erases nothing more."""
        check_identifier(owner_id, "owner_id")
        if agent_id is not None:
            check_identifier(agent_id, "agent_id")
        check_identifier(by, "by")
        if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS or "\x00" in reason \
                or not is_encodable(reason):
            raise DomainError(f"reason must be text of at most {MAX_REASON_CHARS} characters, without NUL")
        at = self._clock.now()

        def work(tx: WriteTransaction, erasing: ErasureTransaction) -> dict[str, int]:
            finder = OwnerContentFinder(owner_id, agent_id)
            for item in erasing.erasure_candidates(owner_id, ev.REFERRING_KINDS):
                finder.add(item.position, item.event)
            found = finder.positions()
            conversations = finder.conversations()
            # Only agents the owner left something with: nothing found means nothing recorded.
            known = set(erasing.agents_of_owner(owner_id)) | set(found)
            agents = sorted(a for a in known if agent_id is None or a == agent_id)
            erased = {}
            forgotten: list[ev.DomainEvent] = []
            for agent in agents:
                positions = tuple(found.get(agent, ()))
                count = erasing.redact(positions)
                forgotten.append(ev.OwnerForgotten(
                    at=at, agent_id=agent, owner_id=owner_id, erased_events=count, redacted_positions=positions,
                    conversations=tuple(conv for of, conv in conversations if of == agent),
                    redacted_revisions=finder.revisions(agent),
                    provenance=ev.Provenance(agent_id=agent, owner_id=owner_id, trust=Trust.OPERATOR,
                                             source_type="forget", source_id=by, reason=reason)))
                tx.append(owner_stream(agent, owner_id), forgotten[-1:])
                erased[agent] = count
            self._files.record_in(tx, forgotten, at)
            return erased

        erased = self._erasure.erase(work)
        if not erased and not self._forgotten_before(owner_id, agent_id):
            # Nothing to erase and no earlier erasure left to finish: the files are not rewritten.
            return ForgetReport(owner_id=owner_id, erased_events={}, prompt_files_removed=[],
                                wal_truncated=True, bytes_before=0, bytes_after=0)
        removed = [agent for agent in sorted(erased) if self._files.remove_files(agent, owner_id)]
        try:
            scrub = self._erasure.scrub()
        except StorageError as exc:
            raise StorageError(
                f"owner {owner_id!r} is erased from the log and the tables, but memory.db could not be"
                f" rewritten yet ({exc}); run forget again to finish"
            ) from exc
        return ForgetReport(owner_id=owner_id, erased_events=erased, prompt_files_removed=removed,
                            wal_truncated=scrub.wal_truncated, bytes_before=scrub.bytes_before,
                            bytes_after=scrub.bytes_after)

    def _forgotten_before(self, owner_id: str, agent_id: str | None) -> bool:
        """Whether an earlier erasure of this owner was recorded: running forget again finishes
        it (prompt files, file rewrite) if it was interrupted."""
        return any(_is_owner_stream(s, owner_id, agent_id) for s in self._store.last_positions("owner/"))
