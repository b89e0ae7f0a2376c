"""Resource revision numbering: given a resource's revisions, when a rendering or a rollback, then events."""

from __future__ import annotations

from datetime import UTC, datetime

from fermix_memory.domain import events as ev
from fermix_memory.domain import resources as res

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
KEY = res.ResourceKey(agent_id="ada", owner_id="alice", name="user_md")


def revise(content: str, reason: str = "rebuild") -> res.ReviseResource:
    return res.ReviseResource(key=KEY, at=T0, content=content, reason=reason)


def given(*contents: str) -> res.ResourceState:
    state = res.NEVER_RECORDED
    for content in contents:
        for event in res.decide_revise(state, revise(content)):
            state = res.evolve(state, event)
    return state


def test_the_first_rendering_is_revision_one_and_each_change_the_next() -> None:
    [first] = res.decide_revise(res.NEVER_RECORDED, revise("a\n"))
    assert first == ev.ResourceRevised(at=T0, agent_id="ada", owner_id="alice", name="user_md", revision=1,
                                       content="a\n", content_sha256=res.sha256("a\n"), reason="rebuild")
    [third] = res.decide_revise(given("a\n", "b\n"), revise("c\n", "rules"))
    assert isinstance(third, ev.ResourceRevised) and (third.revision, third.reason) == (3, "rules")


def test_the_same_text_again_records_nothing_and_no_empty_first_revision() -> None:
    assert res.decide_revise(given("a\n"), revise("a\n")) == []
    assert res.decide_revise(res.NEVER_RECORDED, revise("")) == []
    [emptied] = res.decide_revise(given("a\n"), revise(""))  # a file that had text may become empty
    assert isinstance(emptied, ev.ResourceRevised) and emptied.revision == 2


def test_a_rollback_is_a_new_revision_with_the_earlier_text() -> None:
    state = given("a\n", "b\n")
    provenance = ev.Provenance(agent_id="ada", owner_id="alice", source_type="operator", source_id="op")
    [event] = res.decide_rollback(state, res.RollBackResource(key=KEY, at=T0, to_revision=1, content="a\n",
                                                              content_sha256=res.sha256("a\n"),
                                                              provenance=provenance))
    assert isinstance(event, ev.ResourceRolledBack) and (event.to_revision, event.new_revision) == (1, 3)
    after = res.evolve(state, event)
    assert (after.revision, after.content, res.revision_reason(event)) == (3, "a\n", "rollback to 1")
    assert res.decide_revise(after, revise("a\n")) == []
