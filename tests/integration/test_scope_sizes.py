"""``scope_sizes``: how many messages each scope token is on, kept by triggers and read by history
search as the size of the searched scope (ADR-0019)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.scope_tokens import conversation_token, owner_token
from fermix_memory.adapters.sqlite.migrations import SCOPE_SIZES_COUNTED
from fermix_memory.domain.values import ConversationKey

AGENT = "companion"
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def append(memory: MemorySystem, owner: str, chat: str, texts: list[str]) -> list[int]:
    return [memory.append_message(agent_id=AGENT, owner_id=owner, conversation=chat, role="user", sender=owner,
                                  content=text, created_at=START + timedelta(minutes=i))
            for i, text in enumerate(texts)]


def sizes(home: Path) -> dict[str, int]:
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        stored = {str(t): (int(n), int(c))
                  for t, n, c in conn.execute("SELECT token, messages, chars FROM scope_sizes")}
        counted = {str(t): (int(n), int(c)) for t, n, c in conn.execute(SCOPE_SIZES_COUNTED)}
    finally:
        conn.close()
    assert stored == counted  # the triggers agree with a count from scratch
    return {token: messages for token, (messages, _) in stored.items()}


def characters(home: Path) -> dict[str, int]:
    conn = apsw.Connection(str(home / "memory.db"))
    try:
        return {str(t): int(c) for t, c in conn.execute("SELECT token, chars FROM scope_sizes")}
    finally:
        conn.close()


def conv(owner: str, chat: str) -> str:
    return conversation_token(AGENT, owner, ConversationKey.parse(chat))


def test_appends_count_each_owner_and_conversation_and_forgetting_removes_the_owners_rows(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        append(memory, "alice", "chat:a1", ["one", "two", "three"])
        append(memory, "alice", "chat:a2", ["four"])
        append(memory, "bob", "chat:b1", ["five", "six"])
        assert sizes(home) == {owner_token(AGENT, "alice"): 4, conv("alice", "chat:a1"): 3,
                               conv("alice", "chat:a2"): 1, owner_token(AGENT, "bob"): 2,
                               conv("bob", "chat:b1"): 2}
        # The characters of each scope's texts (its average turn is what ranking measures against).
        assert characters(home) == {owner_token(AGENT, "alice"): 15, conv("alice", "chat:a1"): 11,
                                    conv("alice", "chat:a2"): 4, owner_token(AGENT, "bob"): 7,
                                    conv("bob", "chat:b1"): 7}
        memory.forget_owner("alice", agent_id=AGENT)
        assert sizes(home) == {owner_token(AGENT, "bob"): 2, conv("bob", "chat:b1"): 2}
        assert memory.verify().ok


def test_the_sizes_follow_deletes_and_token_changes_and_replay_rebuilds_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        ids = append(memory, "alice", "chat:a1", ["one", "two", "three"])
        append(memory, "bob", "chat:b1", ["four"])
        report = memory.replay_into(tmp_path / "replayed")
        assert report["differing_tables"] == []
    assert sizes(tmp_path / "replayed") == sizes(home)
    conn = apsw.Connection(str(home / "memory.db"))
    with conn:
        conn.execute("DELETE FROM messages WHERE id = ?", (ids[0],))
        # A message whose tokens are taken away (as a group checkpoint's are) leaves its scopes.
        conn.execute("UPDATE messages SET scope_tokens = '' WHERE id = ?", (ids[1],))
    conn.close()
    assert sizes(home) == {owner_token(AGENT, "alice"): 1, conv("alice", "chat:a1"): 1,
                           owner_token(AGENT, "bob"): 1, conv("bob", "chat:b1"): 1}
    assert characters(home) == {owner_token(AGENT, "alice"): 5, conv("alice", "chat:a1"): 5,
                                owner_token(AGENT, "bob"): 4, conv("bob", "chat:b1"): 4}


def test_verify_reports_scope_sizes_that_do_not_match_the_messages(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        append(memory, "alice", "chat:a1", ["one", "two"])
        assert memory.verify().ok
    conn = apsw.Connection(str(home / "memory.db"))
    with conn:
        conn.execute("UPDATE scope_sizes SET messages = 7 WHERE token = ?", (conv("alice", "chat:a1"),))
        conn.execute("UPDATE scope_sizes SET chars = chars + 1 WHERE token = ?", (owner_token(AGENT, "alice"),))
    conn.close()
    with MemorySystem.open(home) as memory:
        report = memory.verify()
    assert not report.ok
    assert "scope_sizes does not match messages (2 scope(s) differ)" in report.problem
