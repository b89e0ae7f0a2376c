"""The contract suite of the storage ports: every case runs against every storage adapter.

An adapter joins by adding one branch to :func:`ports` that opens it empty; the test bodies
use the ports (``EventStore``, ``WriteTransaction``, ``Erasure``) and nothing else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.application.prompt_files import PromptFiles
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.store_ports import Erasure, EventStore
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.resources import sha256
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, Role, ScopeType, Trust
from tests.contract.fake_store import FakeEventStore

AT = datetime(2026, 5, 1, tzinfo=UTC)
CHAT = ConversationKey("telegram", "42")


@attrs.frozen
class Ports:
    """One storage adapter under test: its event store and its erasure port."""

    store: EventStore
    erasure: Erasure

    def write(self, work: Any) -> Any:
        return self.store.write(work)

    def append(self, stream: str, *events: ev.DomainEvent, expected_version: int | None = None) -> list[int]:
        """Append ``events`` to ``stream`` in a write of their own; their log positions."""
        return self.write(lambda tx: tx.append(stream, list(events), expected_version=expected_version))  # type: ignore[no-any-return]

    def load(self, loader: str, *args: Any) -> Any:
        """What the transaction loader named ``loader`` answers, in a write of its own."""
        return self.write(lambda tx: getattr(tx, loader)(*args))

    def erase(self, work: Any) -> Any:
        return self.erasure.erase(work)


@pytest.fixture(params=["fake", "apsw", "postgres"])
def ports(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ports]:
    if request.param == "fake":
        fake = FakeEventStore()
        yield Ports(fake, fake)
        return
    if request.param == "postgres":
        from fermix_memory.adapters.postgres.erasure import PostgresErasure
        from fermix_memory.adapters.postgres.event_store import PostgresEventStore

        pg = PostgresEventStore(request.getfixturevalue("postgres_url"))
        try:
            yield Ports(pg, PostgresErasure(pg))
        finally:
            pg.close()
        return
    real = SqliteEventStore(tmp_path / "memory.db")
    try:
        yield Ports(real, SqliteErasure(real))
    finally:
        real.close()


# --- prompt files on the ports alone -------------------------------------------------------


class FixedClock:
    def now(self) -> datetime:
        return at(100)


@attrs.define
class MemoryFiles:
    """A ``PromptFileSink`` in a dictionary: ``(agent, owner, name) -> content``."""

    files: dict[tuple[str, str, str], str] = attrs.field(factory=dict)
    writes: int = 0

    def read(self, agent_id: str, owner_id: str, name: str) -> str | None:
        return self.files.get((agent_id, owner_id, name))

    def write(self, agent_id: str, owner_id: str, name: str, content: str) -> None:
        self.files[(agent_id, owner_id, name)] = content
        self.writes += 1

    def syncing(self, agent_id: str, owner_id: str) -> AbstractContextManager[None]:
        return nullcontext()

    def discard(self, agent_id: str, owner_id: str, name: str) -> bool:
        return self.files.pop((agent_id, owner_id, name), None) is not None

    def remove(self, agent_id: str, owner_id: str) -> bool:
        mine = [k for k in self.files if k[:2] == (agent_id, owner_id)]
        for k in mine:
            del self.files[k]
        return bool(mine)


@attrs.frozen
class LoaderReader:
    """The ``ResourceReader`` the prompt-file use case needs, answered by the transaction loaders
    (so it runs on every store; the current revision only)."""

    ports: Ports

    def resource_revision(self, agent_id: str, owner_id: str, name: str,
                          revision: int | None = None) -> ResourceRevision | None:
        current = self.ports.load("current_resource", agent_id, owner_id, name)
        if current is None or revision not in (None, current[0]):
            return None
        return ResourceRevision(agent_id=agent_id, owner_id=owner_id, name=name, revision=current[0],
                                content=current[1], content_sha256=sha256(current[1]), reason="", created_at=AT)

    def memory_owners(self) -> list[tuple[str, str]]:
        return []

    def agent_rules(self, agent_id: str) -> list[Memory]:
        return self.ports.load("agent_rules", agent_id)  # type: ignore[no-any-return]

    def agent_owners(self, agent_id: str) -> list[str]:
        return self.ports.load("agent_owners", agent_id)  # type: ignore[no-any-return]

    def agent_rules_changed_at(self) -> dict[str, datetime]:
        return {}


def prompt_files(ports: Ports, files: MemoryFiles | None = None) -> PromptFiles:
    """The prompt-file use case over ``ports`` and an in-memory file sink."""
    return PromptFiles(ports.store, LoaderReader(ports), files if files is not None else MemoryFiles(),
                       lambda text: len(text) // 4 + 1, FixedClock())


# --- events ---------------------------------------------------------------------------------


def at(seconds: int = 0) -> datetime:
    return AT + timedelta(seconds=seconds)


def provenance(agent: str = "ada", owner: str = "alice", trust: Trust = Trust.OPERATOR) -> ev.Provenance:
    return ev.Provenance(agent_id=agent, owner_id=owner, trust=trust, source_type="test")


def message(content: str = "hello", *, agent: str = "ada", owner: str = "alice", role: Role = Role.USER,
            conversation: ConversationKey = CHAT, quoted: tuple[str, ...] = ()) -> ev.MessageAppended:
    return ev.MessageAppended(at=AT, agent_id=agent, owner_id=owner, conversation=conversation,
                              sender=owner if role is Role.USER else agent, role=role, content=content,
                              created_at=AT, quoted_owners=quoted)


def added(key: str = "home", value: str = "Lives in Paris", *, agent: str = "ada", owner: str = "alice",
          scope: tuple[ScopeType, str] | None = None, category: Category = Category.IDENTITY,
          target: PromoteTarget | None = PromoteTarget.USER_MD) -> ev.MemoryAdded:
    scope_type, scope_id = scope or (ScopeType.OWNER, owner)
    return ev.MemoryAdded(at=AT, agent_id=agent, owner_id=owner, scope_type=scope_type, scope_id=scope_id,
                          category=category, key=key, value=value, promote_target=target,
                          provenance=provenance(agent, owner))


def replaced(memory_id: int, value: str, *, key: str = "home", seconds: int = 1) -> ev.MemoryReplaced:
    return ev.MemoryReplaced(at=at(seconds), memory_id=memory_id, category=Category.IDENTITY, key=key,
                             value=value, confidence=0.9, promote_target=PromoteTarget.USER_MD,
                             previous_value="", provenance=provenance())


def archived(memory_id: int, *, seconds: int = 2) -> ev.MemoryArchived:
    return ev.MemoryArchived(at=at(seconds), memory_id=memory_id, archived_by="test", reason="gone",
                             provenance=provenance())


def restored(memory_id: int, *, seconds: int = 3) -> ev.MemoryRestored:
    return ev.MemoryRestored(at=at(seconds), memory_id=memory_id, restored_by="test", provenance=provenance())


def revised(revision: int, content: str, *, agent: str = "ada", owner: str = "alice",
            name: str = "user_md") -> ev.ResourceRevised:
    return ev.ResourceRevised(at=AT, agent_id=agent, owner_id=owner, name=name, revision=revision,
                              content=content, content_sha256=hashlib.sha256(content.encode()).hexdigest())


def rolled_back(to_revision: int, new_revision: int, content: str, *, name: str = "user_md") -> ev.ResourceRolledBack:
    return ev.ResourceRolledBack(at=AT, agent_id="ada", owner_id="alice", name=name, to_revision=to_revision,
                                 new_revision=new_revision, content=content,
                                 content_sha256=hashlib.sha256(content.encode()).hexdigest(), provenance=provenance())


def review_key(agent: str = "ada", owner: str = "alice") -> dict[str, Any]:
    return {"agent_id": agent, "owner_id": owner, "conversation": CHAT}


def job_saved(job_id: str = "job-1", *, owner: str = "alice") -> ev.ScheduledJobSaved:
    return ev.ScheduledJobSaved(at=AT, job_id=job_id, agent_id="ada", owner_id=owner, name="digest",
                                schedule="0 9 * * *", prompt="Summarise the week", memory_source_id="src-1")


def source_registered(source_id: str = "src-1", *, agent: str = "ada",
                      owner: str = "alice") -> ev.MemorySourceRegistered:
    return ev.MemorySourceRegistered(at=AT, source_id=source_id, agent_id=agent, owner_id=owner,
                                     source_type="job", name="digest")


def forgotten(positions: tuple[int, ...], *, agent: str = "ada", owner: str = "alice") -> ev.OwnerForgotten:
    return ev.OwnerForgotten(at=AT, agent_id=agent, owner_id=owner, erased_events=len(positions),
                             redacted_positions=positions, provenance=provenance(agent, owner))
