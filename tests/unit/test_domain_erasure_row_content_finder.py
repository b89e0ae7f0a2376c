"""The row-content finder (domain/erasure.py): which log positions carry any value one memory
row ever had. Its own events and every event naming it; of the prompt-file revisions, only those
that showed it (live, in the file its statement renders into, holding its text) and the
rollbacks repeating one of them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import RowContentFinder, shown_text
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType

AT = datetime(2026, 3, 1, tzinfo=UTC)
BY = ev.Provenance(agent_id="ada", owner_id="alice")


def added(value: str = "Drinks Yerbamate", *, category: Category = Category.PREFERENCE,
          scope: ScopeType = ScopeType.OWNER, target: PromoteTarget | None = PromoteTarget.USER_MD,
          owner: str = "alice", agent: str = "ada") -> ev.MemoryAdded:
    return ev.MemoryAdded(at=AT, agent_id=agent, owner_id=owner, scope_type=scope, scope_id=owner, category=category,
                          key="k", value=value, promote_target=target,
                          provenance=ev.Provenance(agent_id=agent, owner_id=owner))


def replaced(row: int, value: str, *, category: Category = Category.PREFERENCE,
             target: PromoteTarget | None = PromoteTarget.USER_MD) -> ev.MemoryReplaced:
    return ev.MemoryReplaced(at=AT, memory_id=row, category=category, key="k", value=value, confidence=1.0,
                             promote_target=target, previous_value="", provenance=BY)


def revised(number: int, text: str, *, name: str = "user_md", owner: str = "alice",
            agent: str = "ada") -> ev.ResourceRevised:
    return ev.ResourceRevised(at=AT, agent_id=agent, owner_id=owner, name=name, revision=number, content=text,
                              content_sha256="")


def rolled(number: int, to: int, text: str, *, name: str = "user_md") -> ev.ResourceRolledBack:
    return ev.ResourceRolledBack(at=AT, agent_id="ada", owner_id="alice", name=name, to_revision=to,
                                 new_revision=number, content=text, content_sha256="", provenance=BY)


def find(row: int, log: list[Any]) -> tuple[list[int], list[tuple[str, str, int]]]:
    finder = RowContentFinder(row)
    for position, event in enumerate(log, start=1):
        finder.add(position, event)
    return finder.positions(), [(r.owner_id, r.name, r.revision) for r in finder.revisions()]


def test_the_row_and_every_event_naming_it_go_and_nothing_before_it() -> None:
    log = [
        revised(1, "- k: Drinks Yerbamate"),  # 1: before the row: another row's words
        added(),  # 2: the row
        ev.MemoryArchived(at=AT, memory_id=2, archived_by="op", reason="r", provenance=BY),  # 3
        ev.MemoryRestored(at=AT, memory_id=2, restored_by="op", provenance=BY),  # 4
        ev.OperationRefused(at=AT, op="replace", reason="x", memory_id=2, provenance=BY),  # 5
        ev.OperationRefused(at=AT, op="replace", reason="x", memory_id=9, provenance=BY),  # 6: another row
        added("Likes Sencha"),  # 7: another row
    ]
    assert find(2, log) == ([2, 3, 4, 5], [])
    assert find(8, log) == ([], [])  # never seen
    assert find(3, log) == ([], [])  # position 3 made no row


def test_only_revisions_that_showed_its_value_while_live_go() -> None:
    log = [
        added(),  # 1
        revised(1, "## Preferences\n- k: Drinks Yerbamate\n"),  # 2: shows it
        revised(1, "## Context\n- k: Drinks Yerbamate\n", name="memory_md"),  # 3: not its file
        revised(2, "## Preferences\n- other: Likes Sencha\n"),  # 4: left it out (no room)
        ev.MemoryArchived(at=AT, memory_id=1, archived_by="op", reason="r", provenance=BY),  # 5
        revised(3, "## Preferences\n- k: Drinks Yerbamate\n"),  # 6: archived: another row's words
        ev.MemoryRestored(at=AT, memory_id=1, restored_by="op", provenance=BY),  # 7
        revised(1, "## Preferences\n- k: Drinks Yerbamate\n", owner="bob"),  # 8: bob's file
        revised(4, "## Preferences\n- k: Drinks Yerbamate\n", agent="max"),  # 9: another agent
        revised(4, "## Preferences\n- k: Drinks Yerbamate\n"),  # 10: shows it again
    ]
    assert find(1, log) == ([1, 2, 5, 7, 10], [("alice", "user_md", 1), ("alice", "user_md", 4)])


def test_a_replace_changes_the_value_and_the_file_that_shows_it() -> None:
    log = [
        added(),  # 1
        replaced(1, "Drinks Matcha"),  # 2
        revised(1, "## Preferences\n- k: Drinks Yerbamate\n"),  # 3: the old value: another row's now
        revised(2, "## Preferences\n- k: Drinks Matcha\n"),  # 4
        replaced(1, "Works on Matcha farm", category=Category.CONTEXT, target=PromoteTarget.MEMORY_MD),  # 5
        revised(3, "## Preferences\n- k: Works on Matcha farm\n"),  # 6: USER.md no longer shows it
        revised(1, "## Context\n- k: Works on Matcha farm\n", name="memory_md"),  # 7
    ]
    assert find(1, log) == ([1, 2, 4, 5, 7], [("alice", "user_md", 2), ("alice", "memory_md", 1)])


def test_rows_that_never_render_take_no_revision() -> None:
    text = "## Context\n- k: Drinks Yerbamate\n## Working Rules\n- k: Drinks Yerbamate\n"
    for row in (added(category=Category.CONTEXT, scope=ScopeType.CONVERSATION, target=None),  # a tool's note
                added(category=Category.CONTEXT, scope=ScopeType.JOB, target=PromoteTarget.MEMORY_MD),
                added(category=Category.DIRECTIVE, scope=ScopeType.CONVERSATION, target=PromoteTarget.MEMORY_MD),
                added(category=Category.CONTEXT, target=PromoteTarget.USER_MD)):  # no section for it there
        log = [row, revised(1, text), revised(1, text, name="memory_md")]
        assert find(1, log) == ([1], []), row


def test_a_rollback_repeating_a_revision_that_showed_it_goes_too() -> None:
    shown, other = "## Preferences\n- k: Drinks Yerbamate\n", "## Preferences\n- o: Likes Sencha\n"
    log = [
        added(),  # 1
        revised(1, shown),  # 2
        ev.MemoryArchived(at=AT, memory_id=1, archived_by="op", reason="r", provenance=BY),  # 3
        revised(2, other),  # 4
        rolled(3, 1, shown),  # 5: repeats revision 1
        rolled(4, 2, other),  # 6: repeats revision 2
    ]
    assert find(1, log) == ([1, 2, 3, 5], [("alice", "user_md", 1), ("alice", "user_md", 3)])


def test_a_long_value_is_found_by_the_start_every_rendering_keeps() -> None:
    value = "Collects " + "Quokkastamps " * 40
    cut = shown_text(value)
    assert 90 <= len(cut) < 100 and value.startswith(cut)
    log = [added(value), revised(1, f"## Preferences\n- k: {cut} and then some…\n"), revised(2, "- k: Collects")]
    assert find(1, log) == ([1, 2], [("alice", "user_md", 1)])


def test_what_is_left_after_another_erasure_took_some_events() -> None:
    log = [
        added(),  # 1
        added("Likes Sencha"),  # 2
        revised(1, "## Preferences\n- k: Drinks Yerbamate\n- k: Likes Sencha\n"),  # 3: shows both rows
        revised(2, "## Preferences\n- k: Drinks Yerbamate\n"),  # 4: shows the first only
    ]
    finder = RowContentFinder(1)
    for position, event in enumerate(log, start=1):
        finder.add_declared(position, event.erasure())
    revision = ev.RedactedRevision(owner_id="alice", name="user_md", revision=2)
    assert finder.left_after({3}) == ((1, 4), (revision,))
    assert finder.left_after(()) == ((1, 3, 4), (ev.RedactedRevision(owner_id="alice", name="user_md", revision=1),
                                                  revision))
    assert finder.left_after({1, 3, 4}) == ((), ())
