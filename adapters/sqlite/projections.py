"""Projections: plain functions ``(cursor, position, event)`` run inside the append transaction.

The same functions serve live writes and replay, so the tables can never disagree with the
log. Ids of messages and memory rows are the positions of the events that created them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import apsw

from fermix_memory.adapters.sqlite.scope_tokens import message_scope_tokens
from fermix_memory.application.errors import IntegrityError
from fermix_memory.domain import events as ev

Projection = Callable[[apsw.Cursor, int, Any], None]


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _message_appended(cur: apsw.Cursor, position: int, e: ev.MessageAppended) -> None:
    conv = e.conversation
    cur.execute(
        "INSERT INTO messages(id, agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind,"
        " content, metadata_json, created_at, trust, scope_tokens)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            position,
            e.agent_id,
            e.owner_id,
            conv.channel,
            conv.chat_id,
            conv.thread_scope,
            e.sender,
            e.role.value,
            e.message_kind,
            e.content,
            json.dumps(e.metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False) if e.metadata else "{}",
            e.created_at.isoformat(),
            e.trust.value,
            message_scope_tokens(e.agent_id, e.owner_id, conv, e.quoted_owners),
        ),
    )


def _move_window(
    cur: apsw.Cursor, agent_id: str, conv: Any, start: int, checkpoint: int | None, compacted_at: str | None
) -> None:
    cur.execute(
        "INSERT INTO conversation_state(agent_id, channel, chat_id, thread_scope, window_start_id,"
        " checkpoint_message_id, compacted_at) VALUES (?,?,?,?,?,?,?)"
        " ON CONFLICT(agent_id, channel, chat_id, thread_scope) DO UPDATE SET"
        " window_start_id = excluded.window_start_id,"
        " checkpoint_message_id = excluded.checkpoint_message_id,"
        " compacted_at = coalesce(excluded.compacted_at, conversation_state.compacted_at),"
        " compaction_retry_after = NULL",
        (agent_id, conv.channel, conv.chat_id, conv.thread_scope, start, checkpoint, compacted_at),
    )


def _window_cleared(cur: apsw.Cursor, position: int, e: ev.ConversationWindowCleared) -> None:
    _move_window(cur, e.agent_id, e.conversation, e.up_to_message_id, None, None)


def _compacted(cur: apsw.Cursor, position: int, e: ev.HistoryCompacted) -> None:
    # The checkpoint message (appended earlier) stays visible; everything before it leaves.
    _move_window(
        cur, e.agent_id, e.conversation, e.up_to_message_id, e.checkpoint_message_id, e.at.isoformat()
    )


def _compaction_failed(cur: apsw.Cursor, position: int, e: ev.CompactionFailed) -> None:
    conv = e.conversation
    cur.execute(
        "INSERT INTO conversation_state(agent_id, channel, chat_id, thread_scope, compaction_retry_after)"
        " VALUES (?,?,?,?,?) ON CONFLICT(agent_id, channel, chat_id, thread_scope) DO UPDATE SET"
        " compaction_retry_after = excluded.compaction_retry_after",
        (e.agent_id, conv.channel, conv.chat_id, conv.thread_scope, e.retry_after.isoformat()),
    )


def _memory_added(cur: apsw.Cursor, position: int, e: ev.MemoryAdded) -> None:
    p = e.provenance
    cur.execute(
        "INSERT INTO memories(id, agent_id, owner_id, scope_type, scope_id, category, key, value, confidence,"
        " promote_target, source_id, source_type, source_name, source_description, session_id, run_id,"
        " source_message_id, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT(agent_id, owner_id, scope_type, scope_id, key) DO NOTHING",
        (
            position,
            e.agent_id,
            e.owner_id,
            e.scope_type.value,
            e.scope_id,
            e.category.value,
            e.key,
            e.value,
            e.confidence,
            e.promote_target.value if e.promote_target else None,
            p.source_id,
            p.source_type,
            e.source_name,
            e.source_description,
            p.session_id,
            p.run_id,
            p.source_message_id,
            e.at.isoformat(),
            e.at.isoformat(),
        ),
    )
    if cur.connection.changes() != 1:
        raise IntegrityError(f"memory.added at {position}: key {e.key!r} already exists in its scope")


def _require_row(cur: apsw.Cursor, position: int, kind: str) -> None:
    if cur.connection.changes() != 1:
        raise IntegrityError(f"{kind} at {position} names a memory row that does not exist")


def _memory_replaced(cur: apsw.Cursor, position: int, e: ev.MemoryReplaced) -> None:
    p = e.provenance
    cur.execute(
        "UPDATE memories SET category = ?, key = ?, value = ?, confidence = ?, promote_target = ?,"
        " source_id = ?, source_type = ?, session_id = ?, run_id = ?, source_message_id = ?,"
        " archived_at = NULL, archived_by = NULL, archive_reason = NULL, updated_at = ? WHERE id = ?",
        (
            e.category.value,
            e.key,
            e.value,
            e.confidence,
            e.promote_target.value if e.promote_target else None,
            p.source_id,
            p.source_type,
            p.session_id,
            p.run_id,
            p.source_message_id,
            e.at.isoformat(),
            e.memory_id,
        ),
    )
    _require_row(cur, position, e.kind)


def _memory_archived(cur: apsw.Cursor, position: int, e: ev.MemoryArchived) -> None:
    cur.execute(
        "UPDATE memories SET archived_at = ?, archived_by = ?, archive_reason = ?, updated_at = ?"
        " WHERE id = ?",
        (e.at.isoformat(), e.archived_by, e.reason, e.at.isoformat(), e.memory_id),
    )
    _require_row(cur, position, e.kind)


def _memory_restored(cur: apsw.Cursor, position: int, e: ev.MemoryRestored) -> None:
    cur.execute(
        "UPDATE memories SET archived_at = NULL, archived_by = NULL, archive_reason = NULL, updated_at = ?"
        " WHERE id = ?",
        (e.at.isoformat(), e.memory_id),
    )
    _require_row(cur, position, e.kind)


def _review_key(e: Any) -> tuple[str, str, str, str, str]:
    c = e.conversation
    return (e.agent_id, e.owner_id, c.channel, c.chat_id, c.thread_scope)


_REVIEW_UPSERT = (
    "INSERT INTO review_state(agent_id, owner_id, channel, chat_id, thread_scope, {cols})"
    " VALUES (?,?,?,?,?,{marks}) ON CONFLICT(agent_id, owner_id, channel, chat_id, thread_scope)"
    " DO UPDATE SET {sets}"
)


def _review_upsert(cur: apsw.Cursor, e: Any, values: dict[str, Any]) -> None:
    cols = list(values)
    sql = _REVIEW_UPSERT.format(
        cols=", ".join(cols),
        marks=", ".join("?" for _ in cols),
        sets=", ".join(f"{c} = excluded.{c}" for c in cols),
    )
    cur.execute(sql, (*_review_key(e), *values.values()))


def _review_claimed(cur: apsw.Cursor, position: int, e: ev.ReviewClaimed) -> None:
    _review_upsert(
        cur,
        e,
        {
            "claim_id": e.claim_id,
            "claim_holder": e.holder,
            "claim_expires_at": e.expires_at.isoformat(),
            "last_skip_reason": None,
        },
    )


def _review_completed(cur: apsw.Cursor, position: int, e: ev.ReviewCompleted) -> None:
    _review_upsert(
        cur,
        e,
        {
            "reviewed_up_to_id": e.reviewed_up_to_message_id,
            "last_review_at": e.at.isoformat(),
            "retry_after": None,
            "last_error": None,
            "claim_id": None,
            "claim_holder": None,
            "claim_expires_at": None,
            "last_skip_reason": None,
        },
    )


def _review_skipped(cur: apsw.Cursor, position: int, e: ev.ReviewSkipped) -> None:
    _review_upsert(cur, e, {"last_skip_reason": e.reason})


def _review_failed(cur: apsw.Cursor, position: int, e: ev.ReviewFailed) -> None:
    _review_upsert(
        cur,
        e,
        {
            "retry_after": e.retry_after.isoformat(),
            "last_error": e.error[:500],
            "claim_id": None,
            "claim_holder": None,
            "claim_expires_at": None,
            "last_skip_reason": None,
        },
    )


def _source_registered(cur: apsw.Cursor, position: int, e: ev.MemorySourceRegistered) -> None:
    at = e.at.isoformat()
    cur.execute(
        "INSERT INTO memory_sources(id, agent_id, owner_id, source_type, name, description, created_at,"
        " updated_at) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET source_type = excluded.source_type,"
        " name = excluded.name, description = excluded.description, updated_at = excluded.updated_at",
        (e.source_id, e.agent_id, e.owner_id, e.source_type, e.name, e.description, at, at),
    )


def _job_saved(cur: apsw.Cursor, position: int, e: ev.ScheduledJobSaved) -> None:
    at = e.at.isoformat()
    cur.execute(
        "INSERT INTO scheduled_jobs(id, agent_id, owner_id, name, schedule, prompt, memory_source_id, enabled,"
        " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET"
        " name = excluded.name, schedule = excluded.schedule, prompt = excluded.prompt,"
        " memory_source_id = excluded.memory_source_id, enabled = excluded.enabled,"
        " updated_at = excluded.updated_at",
        (
            e.job_id,
            e.agent_id,
            e.owner_id,
            e.name,
            e.schedule,
            e.prompt,
            e.memory_source_id,
            int(e.enabled),
            at,
            at,
        ),
    )


def _job_run(cur: apsw.Cursor, position: int, e: ev.JobRunRecorded) -> None:
    cur.execute(
        "INSERT INTO job_runs(id, job_id, status, started_at, finished_at, output, error)"
        " VALUES (?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET status = excluded.status,"
        " finished_at = excluded.finished_at, output = excluded.output, error = excluded.error",
        (e.run_id, e.job_id, e.status, e.started_at.isoformat(), _iso(e.finished_at), e.output, e.error),
    )


def _revision(cur: apsw.Cursor, e: Any, revision: int, reason: str) -> None:
    at = e.at.isoformat()
    cur.execute(
        "INSERT INTO resource_revisions(agent_id, owner_id, name, revision, content, content_sha256, reason,"
        " created_at) VALUES (?,?,?,?,?,?,?,?)",
        (e.agent_id, e.owner_id, e.name, revision, e.content, e.content_sha256, reason, at),
    )
    cur.execute(
        "INSERT INTO resources(agent_id, owner_id, name, current_revision, content_sha256, updated_at)"
        " VALUES (?,?,?,?,?,?) ON CONFLICT(agent_id, owner_id, name) DO UPDATE SET"
        " current_revision = excluded.current_revision, content_sha256 = excluded.content_sha256,"
        " updated_at = excluded.updated_at",
        (e.agent_id, e.owner_id, e.name, revision, e.content_sha256, at),
    )


def _resource_revised(cur: apsw.Cursor, position: int, e: ev.ResourceRevised) -> None:
    _revision(cur, e, e.revision, e.reason)


def _resource_rolled_back(cur: apsw.Cursor, position: int, e: ev.ResourceRolledBack) -> None:
    _revision(cur, e, e.new_revision, f"rollback to {e.to_revision}")


def _owner_forgotten(cur: apsw.Cursor, position: int, e: ev.OwnerForgotten) -> None:
    """Every projection row of the owner with the agent goes (the redacted events that made
    them are skipped by a replay, so a rebuilt database has none either)."""
    key = {"a": e.agent_id, "o": e.owner_id}
    # Rows made by redacted events of other owners that quoted this one (a group checkpoint).
    erased = [(p,) for p in e.redacted_positions or ()]
    cur.executemany("DELETE FROM messages WHERE id = ?", erased)
    cur.executemany("DELETE FROM memories WHERE id = ?", erased)
    # A redacted compaction failure no longer holds the conversation back; the row is kept (or
    # made, in a replay that skipped the failure that made it) so both agree.
    cur.executemany(
        "INSERT INTO conversation_state(agent_id, channel, chat_id, thread_scope) VALUES (?,?,?,?)"
        " ON CONFLICT(agent_id, channel, chat_id, thread_scope) DO UPDATE SET compaction_retry_after = NULL",
        [(e.agent_id, c.channel, c.chat_id, c.thread_scope) for c in e.conversations],
    )
    cur.execute("DELETE FROM job_runs WHERE job_id IN"
                " (SELECT id FROM scheduled_jobs WHERE agent_id = :a AND owner_id = :o)", key)
    for table in ("messages", "memories", "review_state", "scheduled_jobs", "memory_sources",
                  "resource_revisions", "resources"):
        cur.execute(f"DELETE FROM {table} WHERE agent_id = :a AND owner_id = :o", key)


def _no_projection(cur: apsw.Cursor, position: int, e: Any) -> None:
    """Audit-only events: the log is their only home."""


PROJECTIONS: dict[type[ev.DomainEvent], Projection] = {
    ev.MessageAppended: _message_appended,
    ev.ConversationWindowCleared: _window_cleared,
    ev.HistoryCompacted: _compacted,
    ev.CompactionFailed: _compaction_failed,
    ev.MemoryAdded: _memory_added,
    ev.MemoryReplaced: _memory_replaced,
    ev.MemoryArchived: _memory_archived,
    ev.MemoryRestored: _memory_restored,
    ev.OperationRefused: _no_projection,
    ev.ReviewClaimed: _review_claimed,
    ev.ReviewCompleted: _review_completed,
    ev.ReviewFailed: _review_failed,
    ev.ReviewSkipped: _review_skipped,
    ev.MemorySourceRegistered: _source_registered,
    ev.ScheduledJobSaved: _job_saved,
    ev.JobRunRecorded: _job_run,
    ev.ResourceRevised: _resource_revised,
    ev.ResourceRolledBack: _resource_rolled_back,
    ev.ModelCallTraced: _no_projection,
    ev.OwnerForgotten: _owner_forgotten,
}

def project(cur: apsw.Cursor, position: int, event: ev.DomainEvent) -> None:
    PROJECTIONS[type(event)](cur, position, event)
