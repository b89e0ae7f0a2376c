"""Forgetting one owner's personal row (not a standing rule of the agent) redacts revisions of
that owner's own files only: another owner's MEMORY.md keeps every revision, even one holding
the same words (their own row says them)."""

from __future__ import annotations

from datetime import UTC, datetime

from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import RowContentFinder
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType

AT = datetime(2026, 3, 1, tzinfo=UTC)
TEXT = "## Context\n- tea: Drinks Rooibos daily\n"


def added(owner: str, category: Category) -> ev.MemoryAdded:
    return ev.MemoryAdded(at=AT, agent_id="ada", owner_id=owner, scope_type=ScopeType.AGENT, scope_id="ada",
                          category=category, key="tea", value="Drinks Rooibos daily",
                          promote_target=PromoteTarget.MEMORY_MD,
                          provenance=ev.Provenance(agent_id="ada", owner_id=owner))


def memory_md(owner: str, revision: int) -> ev.ResourceRevised:
    return ev.ResourceRevised(at=AT, agent_id="ada", owner_id=owner, name="memory_md", revision=revision,
                              content=TEXT, content_sha256="")


def found(first: ev.MemoryAdded) -> tuple[list[int], list[tuple[str, int]]]:
    log = [first, memory_md("alice", 1), added("bob", Category.CONTEXT), memory_md("bob", 1), memory_md("bob", 2)]
    finder = RowContentFinder(1)
    for position, event in enumerate(log, start=1):
        finder.add(position, event)
    return finder.positions(), [(r.owner_id, r.revision) for r in finder.revisions()]


def test_a_personal_row_takes_only_its_owners_revisions() -> None:
    assert found(added("alice", Category.CONTEXT)) == ([1, 2], [("alice", 1)])


def test_a_standing_rule_takes_every_owners_memory_md_that_showed_it() -> None:
    assert found(added("alice", Category.DIRECTIVE)) == ([1, 2, 4, 5], [("alice", 1), ("bob", 1), ("bob", 2)])
