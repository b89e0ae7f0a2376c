"""Prompt-file revisions recorded in the memory change's own transaction
(``PromptFiles.record_in``), on every store: the use case uses the port's loaders only."""

from __future__ import annotations

from typing import Any

from fermix_memory.domain import events as ev
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType
from tests.contract.conftest import AT, MemoryFiles, Ports, added, archived, prompt_files, provenance, replaced

RULE: dict[str, Any] = dict(scope=(ScopeType.AGENT, "ada"), category=Category.DIRECTIVE,
                            target=PromoteTarget.MEMORY_MD)


def change(ports: Ports, *events: ev.DomainEvent, stream: str = "memory/ada/alice",
           files: MemoryFiles | None = None) -> list[int]:
    """Append ``events`` and record the prompt-file revisions they cause in the same write."""
    use_case = prompt_files(ports, files)

    def work(tx: Any) -> list[int]:
        positions: list[int] = tx.append(stream, list(events))
        use_case.record_in(tx, events, AT)
        return positions

    return ports.write(work)  # type: ignore[no-any-return]


def test_record_in_revises_the_owners_files_in_the_same_transaction(ports: Ports) -> None:
    files = MemoryFiles()

    def work(tx: Any) -> Any:
        events = [added()]
        tx.append("memory/ada/alice", events)
        prompt_files(ports, files).record_in(tx, events, AT)
        return tx.current_resource("ada", "alice", "user_md")

    revision, content = ports.write(work)
    assert revision == 1 and "Lives in Paris" in content
    assert ports.load("current_resource", "ada", "alice", "user_md") == (1, content)
    assert ports.load("current_resource", "ada", "alice", "memory_md") is None  # nothing to render: no revision
    assert [r.stream for r in ports.store.read_events()] == ["memory/ada/alice", "resource/ada/alice/user_md"]
    assert files.writes == 0  # files are written after the commit (on_commit), never inside it


def test_record_in_records_nothing_when_the_rendering_is_unchanged(ports: Ports) -> None:
    [row] = change(ports, added())
    current = ports.load("current_resource", "ada", "alice", "user_md")
    position = ports.store.last_position()
    change(ports, replaced(row, "Lives in Paris"))  # same text rendered
    assert ports.store.last_position() == position + 1  # the replace only: no revision
    assert ports.load("current_resource", "ada", "alice", "user_md") == current
    change(ports, replaced(row, "Lives in Berlin", seconds=2))
    revision, content = ports.load("current_resource", "ada", "alice", "user_md")
    assert revision == 2 and "Lives in Berlin" in content


def test_a_standing_rule_revises_every_owners_memory_md_in_the_same_transaction(ports: Ports) -> None:
    change(ports, added(owner="bob"), stream="memory/ada/bob")
    change(ports, added("be-brief", "Answer briefly", **RULE))
    for owner in ("alice", "bob"):
        revision, content = ports.load("current_resource", "ada", owner, "memory_md")
        assert revision == 1 and "Answer briefly" in content
    [rule] = [r.id for r in ports.load("agent_rules", "ada")]
    change(ports, archived(rule))
    for owner in ("alice", "bob"):
        assert ports.load("current_resource", "ada", owner, "memory_md") == (2, "")


def test_on_commit_writes_only_the_files_whose_revision_changed(ports: Ports) -> None:
    files = MemoryFiles()
    use_case = prompt_files(ports, files)
    change(ports, added(), files=files)
    use_case.on_commit(list(ports.store.read_events()))
    assert set(files.files) == {("ada", "alice", "user_md")} and files.writes == 1
    use_case.on_commit(list(ports.store.read_events()))
    assert files.writes == 1  # same text: no rewrite


def replace_read_first(ports: Ports, row: int, target: PromoteTarget | None) -> None:
    """Read row ``row``, then replace its statement with one of promote target ``target`` and
    record the prompt files, in one write (as admission reads a row before changing it)."""
    use_case = prompt_files(ports, None)

    def work(tx: Any) -> None:
        before = tx.by_id(row)
        event = ev.MemoryReplaced(at=AT, memory_id=row, category=before.category, key=before.key,
                                  value="Lives in Lyon", confidence=0.9, promote_target=target,
                                  previous_value=before.value, provenance=provenance())
        tx.append("memory/ada/alice", [event])
        assert tx.first_read(row) == before  # as read before the change, not as changed
        use_case.record_in(tx, [event], AT)

    ports.write(work)


def test_a_change_that_takes_a_row_out_of_the_files_or_into_them_is_rendered(ports: Ports) -> None:
    """A row no file shows, before or after its change, renders nothing; one that leaves a file
    or enters one (its promote target changed) revises it."""
    [shown] = change(ports, added())
    assert "Lives in Paris" in ports.load("current_resource", "ada", "alice", "user_md")[1]
    replace_read_first(ports, shown, None)  # out of USER.md
    assert "Lives in" not in ports.load("current_resource", "ada", "alice", "user_md")[1]
    replace_read_first(ports, shown, PromoteTarget.USER_MD)  # back into it
    assert "Lives in Lyon" in ports.load("current_resource", "ada", "alice", "user_md")[1]


def test_first_read_is_the_row_before_the_transaction_changed_it(ports: Ports) -> None:
    [row] = change(ports, added())

    def work(tx: Any) -> tuple[Any, Any, Any]:
        unread = tx.first_read(row)
        before = tx.by_key("ada", "alice", tx.by_id(row).scope, "home")
        tx.append("memory/ada/alice", [archived(row)])
        return unread, before, (tx.first_read(row), tx.by_id(row))

    unread, before, (first, now) = ports.write(work)
    assert unread is None and first == before and not first.archived and now.archived
