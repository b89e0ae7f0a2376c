"""Projections: plain functions ``(cursor, position, event)`` run inside the append transaction.

The same functions serve live writes and replay, so the tables can never disagree with the
log. Ids of messages and memory rows are the positions of the events that created them.

The rules are the domain's (ADR-0015). ``conversation_state``, ``review_state``,
``memory_sources``, ``scheduled_jobs`` and ``job_runs`` rows are the domain's state: their
projections load the row, apply the domain's ``evolve`` and write the result. ``memories``
(FTS triggers, the hot path), messages and ``resources`` / ``resource_revisions`` keep plain
SQL, checked against the domain's evolve by tests/integration/test_projections_follow_the_domain.py.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import attrs

from fermix_memory.adapters.sql.codec import isoformat, metadata_json
from fermix_memory.adapters.sql.cursor import SqlCursor
from fermix_memory.adapters.sql.job_queries import (
    JOB_COLUMNS,
    RUN_COLUMNS,
    SOURCE_COLUMNS,
    job_from_row,
    run_from_row,
    source_from_row,
)
from fermix_memory.adapters.sql.mark_writes import mark_rows, write_marks
from fermix_memory.adapters.sql.rows import (
    REVIEW_STATE_COLUMNS,
    WINDOW_COLUMNS,
    review_state_from_row,
    window_from_row,
)
from fermix_memory.adapters.sql.scope_tokens import message_scope_tokens
from fermix_memory.application.errors import IntegrityError
from fermix_memory.domain import conversation_window, resources, review_gate
from fermix_memory.domain import events as ev
from fermix_memory.domain import jobs as job_rules
from fermix_memory.domain.conversation_window import ConversationWindow
from fermix_memory.domain.review_gate import ReviewGateState
from fermix_memory.domain.values import ConversationKey

Projection = Callable[[SqlCursor, int, Any], None]
S = TypeVar("S")


INSERT_MESSAGE = (
    "INSERT INTO messages(id, agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind,"
    " content, metadata_json, created_at, trust, scope_tokens)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def message_row(position: int, e: ev.MessageAppended) -> tuple[Any, ...]:
    """The ``messages`` row of an appended message (:data:`INSERT_MESSAGE`'s parameters)."""
    conv = e.conversation
    return (
        position,
        e.agent_id,
        e.owner_id,
        conv.channel,
        conv.chat_id,
        conv.thread_scope,
        e.sender,
        str(e.role),  # a text enum's ``str`` is its value (``.value`` is a property call)
        e.message_kind,
        e.content,
        metadata_json(e.metadata),  # the text its checks made, when they made it
        isoformat(e.created_at),
        str(e.trust),
        message_scope_tokens(e.agent_id, e.owner_id, conv, e.quoted_owners),
    )


def _message_appended(cur: SqlCursor, position: int, e: ev.MessageAppended) -> None:
    cur.execute(INSERT_MESSAGE, message_row(position, e))
    write_marks(cur, mark_rows(position, e))  # its days and names (``sql.marks``), gone with the row


def _message_retracted(cur: SqlCursor, position: int, e: ev.MessageRetracted) -> None:
    """The row leaves the table (so the window, history recall and search, and the full-text
    index with it); its event stays in the log. A replay that skipped the message (its owner was
    forgotten) finds no row, as live."""
    cur.execute("DELETE FROM messages WHERE id = ? AND agent_id = ?", (e.message_id, e.agent_id))


def _memory_added(cur: SqlCursor, position: int, e: ev.MemoryAdded) -> None:
    p = e.provenance
    cur.execute(
        "INSERT INTO memories(id, agent_id, owner_id, scope_type, scope_id, category, key, value, confidence,"
        " promote_target, source_id, source_type, source_name, source_description, session_id, run_id,"
        " source_message_id, created_at, updated_at, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
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
            at := isoformat(e.at),  # the text its payload and log row hold, formatted once
            at,
            _time_or_null(e.expires_at),
        ),
    )
    if cur.connection.changes() != 1:
        raise IntegrityError(f"memory.added at {position}: key {e.key!r} already exists in its scope")


def _time_or_null(moment: datetime | None) -> str | None:
    """A row's optional time as stored: ISO 8601 text (the payload's), or NULL."""
    return None if moment is None else moment.isoformat()


def _require_row(cur: SqlCursor, position: int, kind: str) -> None:
    if cur.connection.changes() != 1:
        raise IntegrityError(f"{kind} at {position} names a memory row that does not exist")


def _memory_replaced(cur: SqlCursor, position: int, e: ev.MemoryReplaced) -> None:
    p = e.provenance
    cur.execute(
        "UPDATE memories SET category = ?, key = ?, value = ?, confidence = ?, promote_target = ?,"
        " source_id = ?, source_type = ?, session_id = ?, run_id = ?, source_message_id = ?,"
        " archived_at = NULL, archived_by = NULL, archive_reason = NULL, updated_at = ?, expires_at = ? WHERE id = ?",
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
            _time_or_null(e.expires_at),
            e.memory_id,
        ),
    )
    _require_row(cur, position, e.kind)


def _memory_archived(cur: SqlCursor, position: int, e: ev.MemoryArchived) -> None:
    cur.execute(
        "UPDATE memories SET archived_at = ?, archived_by = ?, archive_reason = ?, updated_at = ?"
        " WHERE id = ?",
        (e.at.isoformat(), e.archived_by, e.reason, e.at.isoformat(), e.memory_id),
    )
    _require_row(cur, position, e.kind)


def _memory_restored(cur: SqlCursor, position: int, e: ev.MemoryRestored) -> None:
    cur.execute(
        "UPDATE memories SET archived_at = NULL, archived_by = NULL, archive_reason = NULL, updated_at = ?"
        " WHERE id = ?",
        (e.at.isoformat(), e.memory_id),
    )
    _require_row(cur, position, e.kind)


# --- aggregates whose rows are the domain's state: load the row, apply the domain's evolve, write it


def _sql(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool):
        return int(value)
    return value


def _evolve_row(cur: SqlCursor, table: str, key: Mapping[str, Any], columns: Sequence[str],
                decode: Callable[[tuple[Any, ...]], S], evolve: Callable[[S | None], Any]) -> None:
    """Write the row ``evolve`` makes of the row stored under ``key`` (``None``: no row yet)."""
    where = " AND ".join(f"{k} = ?" for k in key)
    rows = cur.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {where}", tuple(key.values())).fetchall()
    row = {**key, **attrs.asdict(evolve(decode(rows[0]) if rows else None), recurse=False)}
    updates = ", ".join(f"{c} = excluded.{c}" for c in row if c not in key)
    cur.execute(
        f"INSERT INTO {table}({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
        f" ON CONFLICT({', '.join(key)}) DO UPDATE SET {updates}",
        tuple(_sql(v) for v in row.values()),
    )


def _evolve_window(cur: SqlCursor, agent_id: str, conv: ConversationKey, e: ev.DomainEvent) -> None:
    key = {"agent_id": agent_id, "channel": conv.channel, "chat_id": conv.chat_id, "thread_scope": conv.thread_scope}
    _evolve_row(cur, "conversation_state", key, WINDOW_COLUMNS, window_from_row,
                lambda state: conversation_window.evolve(state or ConversationWindow(), e))


def _window(cur: SqlCursor, position: int,
            e: ev.ConversationWindowCleared | ev.HistoryCompacted | ev.CompactionFailed) -> None:
    _evolve_window(cur, e.agent_id, e.conversation, e)


def _review(cur: SqlCursor, position: int, e: ev.ReviewClaimed | ev.ReviewCompleted | ev.ReviewFailed
            | ev.ReviewSkipped) -> None:
    c = e.conversation
    key = {"agent_id": e.agent_id, "owner_id": e.owner_id, "channel": c.channel, "chat_id": c.chat_id,
           "thread_scope": c.thread_scope}
    _evolve_row(cur, "review_state", key, REVIEW_STATE_COLUMNS, review_state_from_row,
                lambda state: review_gate.evolve(state or ReviewGateState(), e))


def _source_registered(cur: SqlCursor, position: int, e: ev.MemorySourceRegistered) -> None:
    _evolve_row(cur, "memory_sources", {"id": e.source_id}, SOURCE_COLUMNS.split(", "), source_from_row,
                lambda state: job_rules.evolve_source(state, e))


def _job_saved(cur: SqlCursor, position: int, e: ev.ScheduledJobSaved) -> None:
    _evolve_row(cur, "scheduled_jobs", {"id": e.job_id}, JOB_COLUMNS.split(", "), job_from_row,
                lambda state: job_rules.evolve_job(state, e))


def _job_run(cur: SqlCursor, position: int, e: ev.JobRunRecorded) -> None:
    _evolve_row(cur, "job_runs", {"id": e.run_id}, RUN_COLUMNS.split(", "), run_from_row,
                lambda state: job_rules.evolve_run(state, e))


def _revision(cur: SqlCursor, e: ev.ResourceRevised | ev.ResourceRolledBack) -> None:
    # SQL kept (an insert and an upsert); checked against ``domain.resources.evolve`` by a test.
    at = e.at.isoformat()
    revision, reason = resources.evolve(resources.NEVER_RECORDED, e).revision, resources.revision_reason(e)
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


def _resource_revised(cur: SqlCursor, position: int, e: ev.ResourceRevised | ev.ResourceRolledBack) -> None:
    _revision(cur, e)


def _owner_forgotten(cur: SqlCursor, position: int, e: ev.OwnerForgotten) -> None:
    """Every projection row of the owner with the agent goes (the redacted events that made
    them are skipped by a replay, so a rebuilt database has none either)."""
    key = {"a": e.agent_id, "o": e.owner_id}
    # Rows made by redacted events of other owners that quoted this one (a group checkpoint).
    erased = [(p,) for p in e.redacted_positions or ()]
    cur.executemany("DELETE FROM messages WHERE id = ?", erased)
    cur.executemany("DELETE FROM memories WHERE id = ?", erased)
    # A redacted compaction failure no longer holds the conversation back; the row is kept (or
    # made, in a replay that skipped the failure that made it) so both agree.
    for conversation in e.conversations:
        _evolve_window(cur, e.agent_id, conversation, e)
    _drop_revisions(cur, e.agent_id, e.redacted_revisions)
    cur.execute("DELETE FROM job_runs WHERE job_id IN"
                " (SELECT id FROM scheduled_jobs WHERE agent_id = :a AND owner_id = :o)", key)
    for table in ("messages", "memories", "review_state", "scheduled_jobs", "memory_sources",
                  "resource_revisions", "resources"):
        cur.execute(f"DELETE FROM {table} WHERE agent_id = :a AND owner_id = :o", key)


def _memory_forgotten(cur: SqlCursor, position: int, e: ev.MemoryForgotten) -> None:
    """The row goes (its redacted events are skipped by a replay, which makes no row either),
    and so do the prompt-file revisions that showed it."""
    cur.execute("DELETE FROM memories WHERE id = ? AND agent_id = ?", (e.memory_id, e.agent_id))
    _drop_revisions(cur, e.agent_id, e.redacted_revisions)


def _conversation_forgotten(cur: SqlCursor, position: int, e: ev.ConversationForgotten) -> None:
    """Every row the conversation's redacted events made goes: its messages, its window, the
    reviews of it, the rows learnt only from it and the revisions that showed them (a replay
    skips those events and makes none of them)."""
    c = e.conversation
    key = (e.agent_id, c.channel, c.chat_id, c.thread_scope)
    where = "agent_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?"
    for table in ("messages", "conversation_state", "review_state"):
        cur.execute(f"DELETE FROM {table} WHERE {where}", key)
    cur.executemany("DELETE FROM memories WHERE id = ? AND agent_id = ?", [(m, e.agent_id) for m in e.memory_ids])
    _drop_revisions(cur, e.agent_id, e.redacted_revisions)


def _drop_revisions(cur: SqlCursor, agent_id: str, revisions: Sequence[ev.RedactedRevision]) -> None:
    """Other owners' prompt-file revisions whose events were redacted: their rows go, and each
    file's current revision is its newest one left (none left: no current revision), which is
    what a replay, skipping the redacted events, arrives at."""
    for r in revisions:
        cur.execute("DELETE FROM resource_revisions WHERE agent_id = ? AND owner_id = ? AND name = ? AND revision = ?",
                    (agent_id, r.owner_id, r.name, r.revision))
    for owner_id, name in dict.fromkeys((r.owner_id, r.name) for r in revisions):
        key = (agent_id, owner_id, name)
        newest = cur.execute("SELECT revision, content_sha256, created_at FROM resource_revisions WHERE agent_id = ?"
                             " AND owner_id = ? AND name = ? ORDER BY revision DESC LIMIT 1", key).fetchall()
        if newest:
            cur.execute("UPDATE resources SET current_revision = ?, content_sha256 = ?, updated_at = ?"
                        " WHERE agent_id = ? AND owner_id = ? AND name = ?", (*newest[0], *key))
        else:
            cur.execute("DELETE FROM resources WHERE agent_id = ? AND owner_id = ? AND name = ?", key)


def _no_projection(cur: SqlCursor, position: int, e: Any) -> None:
    """Audit-only events: the log is their only home."""


PROJECTIONS: dict[type[ev.DomainEvent], Projection] = {
    ev.MessageAppended: _message_appended,
    ev.MessageRetracted: _message_retracted,
    ev.ConversationWindowCleared: _window,
    ev.HistoryCompacted: _window,
    ev.CompactionFailed: _window,
    ev.MemoryAdded: _memory_added,
    ev.MemoryReplaced: _memory_replaced,
    ev.MemoryArchived: _memory_archived,
    ev.MemoryRestored: _memory_restored,
    ev.OperationRefused: _no_projection,
    ev.ReviewClaimed: _review,
    ev.ReviewCompleted: _review,
    ev.ReviewFailed: _review,
    ev.ReviewSkipped: _review,
    ev.MemorySourceRegistered: _source_registered,
    ev.ScheduledJobSaved: _job_saved,
    ev.JobRunRecorded: _job_run,
    ev.ResourceRevised: _resource_revised,
    ev.ResourceRolledBack: _resource_revised,
    ev.ModelCallTraced: _no_projection,
    ev.OwnerForgotten: _owner_forgotten,
    ev.MemoryForgotten: _memory_forgotten,
    ev.ConversationForgotten: _conversation_forgotten,
    ev.ErasureReceipted: _no_projection,
    ev.RetentionRan: _no_projection,
    ev.ExportKeysDestroyed: _no_projection,
    # The import appended the positions it names without their payloads: they made no rows.
    ev.SealedPayloadsLost: _no_projection,
}

def project(cur: SqlCursor, position: int, event: ev.DomainEvent, *, marks: bool = True) -> None:
    """The projections of one event. ``marks=False``: a message's marks are left to the
    catch-up (``sql.mark_writes.mark_new``, SQLite's appends: ADR-0085)."""
    if not marks and type(event) is ev.MessageAppended:
        cur.execute(INSERT_MESSAGE, message_row(position, event))
        return
    PROJECTIONS[type(event)](cur, position, event)


def project_each(cur: SqlCursor, appended: Sequence[tuple[int, ev.DomainEvent]], *, marks: bool = True) -> None:
    """The projections of several ``(position, event)`` in order, as :func:`project` of each
    one after the other writes them: each run of appended messages by one statement."""
    messages: list[tuple[Any, ...]] = []
    rows: list[tuple[int, str]] = []
    for position, event in appended:
        if type(event) is ev.MessageAppended:
            messages.append(message_row(position, event))
            if marks:
                rows += mark_rows(position, event)
            continue
        if messages:
            cur.executemany(INSERT_MESSAGE, messages)
            write_marks(cur, rows)
            messages, rows = [], []
        project(cur, position, event)
    if messages:
        cur.executemany(INSERT_MESSAGE, messages)
        write_marks(cur, rows)
