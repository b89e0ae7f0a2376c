"""The prompt files are rendered from a bounded read of the owner's rows (``shown_rows``, ADR-0060):
for any sequence of adds, replaces, archives and restores across sections, scopes and times (ties
included), on every store, the rows it reads render byte for byte as every live row does, and
the revision the write records is that rendering."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fermix_memory.application.streams import memory_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain import rendering
from fermix_memory.domain.rendering import SHOWN_SECTIONS, render_memory_md, render_user_md
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType
from tests.contract.conftest import AT, Ports, prompt_files, provenance

AGENTS = itertools.count()
WORDS = ("tea", "violin", "Paris", "chess", "rain", "garden", "answer briefly", "café", "中文", "🚀")


def count(text: str) -> int:
    return len(text) // 4 + 1  # what the use case under test counts with (conftest.prompt_files)


moments = st.builds(lambda s, us: AT + timedelta(seconds=s, microseconds=us),
                    st.integers(0, 12), st.sampled_from([0, 0, 1, 500_000, 999_999]))
values = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
targets = st.sampled_from([PromoteTarget.USER_MD, PromoteTarget.MEMORY_MD, None])
adds = st.tuples(st.just("add"), st.sampled_from(list(Category)), st.sampled_from(list(ScopeType)), targets,
                 values, moments)
changes = st.tuples(st.sampled_from(["replace", "archive", "restore"]), st.integers(0, 10_000),
                    st.sampled_from(list(Category)), targets, values, moments)
steps = st.lists(st.one_of(adds, adds, changes), min_size=1, max_size=30)


def event_of(step: tuple[Any, ...], agent: str, n: int, rows: list[int]) -> ev.DomainEvent | None:
    kind, category, *rest = step
    owner = "alice"
    prov = provenance(agent, owner)
    if kind == "add":
        scope, target, value, at = rest
        scope_id = {ScopeType.OWNER: owner, ScopeType.AGENT: agent}.get(scope, f"{scope}-1")
        return ev.MemoryAdded(at=at, agent_id=agent, owner_id=owner, scope_type=scope, scope_id=scope_id,
                              category=category, key=f"k{n}", value=value, promote_target=target, provenance=prov)
    if not rows:
        return None
    row = rows[category % len(rows)]
    new_category, target, value, at = rest
    if kind == "replace":
        return ev.MemoryReplaced(at=at, memory_id=row, category=new_category, key=f"k{n}", value=value,
                                 confidence=0.9, promote_target=target, previous_value="", provenance=prov)
    if kind == "archive":
        return ev.MemoryArchived(at=at, memory_id=row, archived_by="test", reason="gone", provenance=prov)
    return ev.MemoryRestored(at=at, memory_id=row, restored_by="test", provenance=prov)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_the_bounded_read_renders_as_every_row_does(ports: Ports, steps: list[tuple[Any, ...]]) -> None:
    agent = f"agent-{next(AGENTS)}"  # an agent of its own: no standing rule of another example shows
    use_case = prompt_files(ports)
    rows: list[int] = []
    for n, step in enumerate(steps):
        event = event_of(step, agent, n, rows)
        if event is None:
            continue

        def work(tx: Any, event: ev.DomainEvent = event) -> list[int]:
            positions: list[int] = tx.append(memory_stream(agent, "alice"), [event])
            use_case.record_in(tx, [event], AT)
            return positions

        positions = ports.write(work)
        if isinstance(event, ev.MemoryAdded):
            rows += positions

    def check(tx: Any) -> None:
        every = tx.memories_of(agent, "alice")
        shown = tx.shown_rows(agent, "alice", SHOWN_SECTIONS)
        assert sorted(r.id for r in shown) == sorted(r.id for r in rendering.shown_rows(every))
        rules = tx.agent_rules(agent)
        for budget in (None, 120):
            user = {} if budget is None else {"budget": budget}
            assert render_user_md(shown, count, **user) == render_user_md(every, count, **user)
            memory = {"agent_rules": rules, **user}
            assert render_memory_md(shown, count, **memory) == render_memory_md(every, count, **memory)
        for name, text in (("user_md", render_user_md(every, count)),
                           ("memory_md", render_memory_md(every, count, agent_rules=rules))):
            current = tx.current_resource(agent, "alice", name)
            assert (current[1] if current else "") == text

    ports.write(check)


@pytest.mark.parametrize("cap", [0, 1, 3])
def test_a_section_gives_at_most_its_cap_newest_first(ports: Ports, cap: int) -> None:
    owner = f"owner-{next(AGENTS)}"
    events = [ev.MemoryAdded(at=AT + timedelta(seconds=i % 3, microseconds=(i % 2) * 7), agent_id="ada",
                             owner_id=owner, scope_type=ScopeType.OWNER, scope_id=owner, category=Category.GOAL,
                             key=f"goal-{i}", value=f"goal {i}", promote_target=PromoteTarget.USER_MD,
                             provenance=provenance("ada", owner)) for i in range(8)]
    ports.append(memory_stream("ada", owner), *events)
    section = [(PromoteTarget.USER_MD, Category.GOAL, cap)]
    shown = ports.load("shown_rows", "ada", owner, section)
    every = ports.load("memories_of", "ada", owner)
    assert [r.id for r in shown] == [r.id for r in rendering.shown_rows(every, section)]
    assert len(shown) == cap
    assert ports.load("shown_rows", "ada", owner, []) == []
