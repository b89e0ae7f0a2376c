"""Read side of the projections (the ``MemoryQueries`` port) on per-thread read connections, in
the SQL every dialect runs; full-text search is the dialect's (``search_memories``, ``search_history``)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from fermix_memory.adapters.sql.marks import MarkQueries
from fermix_memory.adapters.sql.read_side import ReadSide, clamp_limit
from fermix_memory.adapters.sql.rows import (
    CONVERSATION_MESSAGE_COLUMNS,
    MEMORY_COLUMNS,
    MEMORY_FIELDS,
    MESSAGE_COLUMNS,
    REVIEW_STATE_SQL,
    WINDOW_COLUMNS,
    conversation_message_from_row,
    memory_from_row,
    message_from_row,
    review_state_from_row,
    review_state_key,
    window_from_row,
)
from fermix_memory.adapters.sql.rows_under import NumberSql, rows_under
from fermix_memory.adapters.sql.scope_sql import scope_sql, where_sql
from fermix_memory.application.query_ports import KeyedValue, NumberBound, OwnerSummary, ResourceRevision
from fermix_memory.application.store_ports import ConversationState, ReviewState
from fermix_memory.application.stored_messages import StoredRow, stored_row
from fermix_memory.domain.conversation_states import LEFT_AT_CLOSE
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.scopes import MemoryFilter
from fermix_memory.domain.values import ConversationKey

# The agent's standing rules (``domain.scopes.is_agent_rule``): shown to every owner of the agent.
AGENT_RULES_SQL = (
    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? AND scope_type = 'agent'"
    " AND category = 'directive' AND promote_target = 'memory_md' AND archived_at IS NULL ORDER BY id"
)
# Every owner of an agent that could hold prompt files: their messages, rows or files.
AGENT_OWNERS_SQL = (
    "SELECT owner_id FROM messages WHERE agent_id = :a UNION SELECT owner_id FROM memories WHERE agent_id = :a"
    " UNION SELECT owner_id FROM resources WHERE agent_id = :a ORDER BY 1"
)

# The newest messages after a conversation's window start, newest first, each with the checkpoint
# of the conversation's state (``application.window_tail``): one statement, one snapshot. The state
# row is read by its primary key (two uncorrelated subqueries, each run once); the messages by a
# backward seek of ``messages_by_conversation`` that stops at the LIMIT, however long the window.
def window_tail_sql(bound: str = "?") -> str:
    """The window tail's statement, each parameter written as ``bound`` (a dialect may write it as
    an expression of the parameter: SQLite prepares a statement once for ``+?``, at every run for
    a bare one compared to an indexed column; ``sqlite.queries``); parameters: the conversation's
    key (agent, channel, chat, thread scope) three times, then the limit."""
    key = f"agent_id = {bound} AND channel = {bound} AND chat_id = {bound} AND thread_scope = {bound}"
    state = "(SELECT {} FROM conversation_state WHERE " + key + ")"
    return (f"SELECT {CONVERSATION_MESSAGE_COLUMNS}, {state.format('checkpoint_message_id')} FROM messages"
            f" WHERE {key} AND id > coalesce({state.format('window_start_id')}, 0)"
            f" ORDER BY created_at DESC, id DESC LIMIT {bound}")


WINDOW_TAIL_SQL = window_tail_sql()

# One live row of a conversation scope by its key: a seek of the unique index of the key.
_VALUE_BY_KEY_SQL = (
    "SELECT id, value, created_at, updated_at FROM memories WHERE agent_id = ? AND owner_id = ?"
    " AND scope_type = 'conversation' AND scope_id = ? AND key = ? AND archived_at IS NULL"
)


class SqlQueries(MarkQueries, ReadSide):
    """Implements ``MemoryQueries`` on this thread's read connection, but for full-text search,
    which each dialect adds (the reads by day and name are ``sql.marks``')."""

    window_tail_sql = WINDOW_TAIL_SQL  # a dialect may write its parameters otherwise (``window_tail_sql``)
    prompt_files_bound = ""  # and those of the owner's prompt files (``prompt_files_sql``)
    number_sql: NumberSql | None = None  # a bound of a JSON value, where the dialect writes it (ADR-0109)

    def memory(self, memory_id: int) -> Memory | None:
        rows = self._rows(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        return memory_from_row(rows[0]) if rows else None

    def memories(self, where: MemoryFilter, *, include_archived: bool = False) -> list[Memory]:
        sql, params = scope_sql(where)
        if not include_archived:
            sql += " AND archived_at IS NULL"
        rows = self._rows(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {sql} ORDER BY id", params)
        return [memory_from_row(r) for r in rows]

    def all_memories(
        self, *, agent_id: str | None = None, owner_id: str | None = None, include_archived: bool = True
    ) -> list[Memory]:
        """Every row (optionally of one agent / owner): for operators, never for prompts."""
        where, params = where_sql(("", "agent_id", agent_id), ("", "owner_id", owner_id),
                               extra=() if include_archived else ("archived_at IS NULL",))
        rows = self._rows(f"SELECT {MEMORY_COLUMNS} FROM memories {where} ORDER BY id", params)
        return [memory_from_row(r) for r in rows]

    def owner_summaries(self, *, agent_id: str | None = None) -> list[OwnerSummary]:
        """Every agent and owner with memory rows (optionally of one agent), with their counts: for
        operators. One pass over the rows, grouped."""
        where, params = where_sql(("", "agent_id", agent_id))
        rows = self._rows(
            "SELECT agent_id, owner_id, SUM(CASE WHEN archived_at IS NULL THEN 1 ELSE 0 END),"
            f" SUM(CASE WHEN archived_at IS NULL THEN 0 ELSE 1 END) FROM memories {where}"
            " GROUP BY agent_id, owner_id ORDER BY agent_id, owner_id", params)
        return [OwnerSummary(agent_id=a, owner_id=o, live=int(live), archived=int(gone)) for a, o, live, gone in rows]

    def memory_by_key(self, where: MemoryFilter, key: str) -> list[Memory]:
        sql, params = scope_sql(where)
        rows = self._rows(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {sql} AND key = ? AND archived_at IS NULL ORDER BY id",
            [*params, key],
        )
        return [memory_from_row(r) for r in rows]

    def value_by_key(self, agent_id: str, owner_id: str, scope_id: str, key: str) -> KeyedValue | None:
        rows = self._rows(_VALUE_BY_KEY_SQL, (agent_id, owner_id, scope_id, key))
        if not rows:
            return None
        memory_id, value, created_at, updated_at = rows[0]
        return KeyedValue(memory_id, value, datetime.fromisoformat(created_at), datetime.fromisoformat(updated_at))

    def memories_under(self, agent_id: str, owner_id: str | None, scope_type: str, starts: Sequence[str], *,
                       limit: int, offset: int = 0, unshown_category: str | None = None,
                       containing: Sequence[str] = (), numbers: Sequence[NumberBound] = ()) -> list[Memory]:
        """A page of the live rows of ``agent_id`` (``owner_id``'s, when given) of ``scope_type``
        whose scope id begins with one of ``starts``, newest first (id breaks ties). ``unshown_category``:
        only the rows of that category no prompt file shows, read newest first by ``memories_shown``;
        ``containing``, ``numbers``: only the rows whose value holds each of these texts, within
        each bound that the dialect's :attr:`number_sql` writes (``rows_under``)."""
        rows_sql, params = rows_under(agent_id, owner_id, scope_type, starts, unshown_category, containing,
                                      numbers, self.number_sql)
        rows = self._rows(f"SELECT {MEMORY_COLUMNS} {rows_sql} ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
                          [*params, clamp_limit(limit), max(0, offset)])
        return [memory_from_row(r) for r in rows]

    def scopes_under(self, agent_id: str, owner_id: str | None, scope_type: str, starts: Sequence[str], *,
                     unshown_category: str | None = None) -> list[str]:
        """The scope ids of :meth:`memories_under`'s rows, each once, sorted: no row's value read."""
        rows_sql, params = rows_under(agent_id, owner_id, scope_type, starts, unshown_category)
        return sorted(str(r[0]) for r in self._rows(f"SELECT DISTINCT scope_id {rows_sql}", params))

    def conversation_state(self, agent_id: str, conversation: ConversationKey) -> ConversationState:
        rows = self._rows(
            f"SELECT {', '.join(WINDOW_COLUMNS)} FROM conversation_state"
            " WHERE agent_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?",
            (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope),
        )
        return window_from_row(rows[0]) if rows else ConversationState()

    def window_tail(self, agent_id: str, conversation: ConversationKey,
                    limit: int) -> tuple[int | None, list[StoredRow]]:
        """The checkpoint of the conversation's state (``None``: none, or no message read) and the
        newest ``limit`` messages after its window's start, oldest first, in one statement."""
        key = (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope)
        rows = self._rows(self.window_tail_sql, (*key, *key, *key, max(0, limit)))
        if not rows:
            return None, []
        return rows[0][-1], [stored_row(r[:-1]) for r in reversed(rows)]

    def message(self, message_id: int) -> Message | None:
        rows = self._rows(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,))
        return message_from_row(rows[0]) if rows else None

    def messages(
        self, agent_id: str, conversation: ConversationKey, *, after_id: int = 0, limit: int | None = None
    ) -> list[Message]:
        return [conversation_message_from_row(r, agent_id, conversation)
                for r in self.stored_messages(agent_id, conversation, after_id=after_id, limit=limit)]

    def stored_messages(
        self, agent_id: str, conversation: ConversationKey, *, after_id: int = 0, limit: int | None = None
    ) -> list[StoredRow]:
        """The conversation's messages after ``after_id`` as stored rows (``application.stored_messages``),
        in window order (the newest ``limit`` of them when given)."""
        params: list[Any] = [
            agent_id,
            conversation.channel,
            conversation.chat_id,
            conversation.thread_scope,
            after_id,
        ]
        base = (
            f"SELECT {CONVERSATION_MESSAGE_COLUMNS} FROM messages WHERE agent_id = ? AND channel = ? AND chat_id = ?"
            " AND thread_scope = ? AND id > ?"
        )
        if limit is None:
            return list(map(stored_row, self._rows(base + " ORDER BY created_at, id", params)))
        rows = self._rows(base + " ORDER BY created_at DESC, id DESC LIMIT ?", [*params, max(0, limit)])
        rows.reverse()
        return list(map(stored_row, rows))

    def message_page(self, agent_id: str, conversation: ConversationKey, *, limit: int, before_id: int | None = None,
                     after_id: int | None = None, skip: int = 0, owner_id: str | None = None) -> list[Message]:
        """A page of the conversation's stored messages, oldest first, in window order: the first
        ``limit`` after message ``after_id``, else the last ``limit`` before message ``before_id``
        (or the end) past the ``skip`` newest. A cursor outside the conversation gives none."""
        key: list[Any] = [agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope]
        mine = "agent_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?"
        sql, params = f"SELECT {CONVERSATION_MESSAGE_COLUMNS} FROM messages WHERE {mine}", list(key)
        if owner_id is not None:
            sql, params = sql + " AND owner_id = ?", [*params, owner_id]
        cursor = after_id if after_id is not None else before_id
        if cursor is not None:  # by (created_at, id), the window's order, not by id alone
            sql += (f" AND (created_at, id) {'>' if after_id is not None else '<'}"
                    f" (SELECT created_at, id FROM messages WHERE id = ? AND {mine})")
            params += [cursor, *key]
        if after_id is not None:
            rows = self._rows(sql + " ORDER BY created_at, id LIMIT ?", [*params, limit])
        else:
            rows = self._rows(sql + " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?", [*params, limit, skip])
            rows.reverse()
        return [conversation_message_from_row(stored_row(r), agent_id, conversation) for r in rows]

    def iter_messages(self, *, agent_id: str | None = None, batch: int = 5_000) -> Iterator[Message]:
        """Every message in id order (for export), read in batches."""
        after = 0
        while True:
            params: list[Any] = [after]
            where = "id > ?"
            if agent_id is not None:
                where += " AND agent_id = ?"
                params.append(agent_id)
            rows = self._rows(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY id LIMIT ?", [*params, batch]
            )
            if not rows:
                return
            for row in rows:
                yield message_from_row(row)
            after = rows[-1][0]

    # --- resources ------------------------------------------------------------------------------

    def resources(self, *, agent_id: str | None = None, owner_id: str | None = None) -> list[ResourceRevision]:
        """The current revision of every versioned resource (optionally of one agent / owner)."""
        where, params = where_sql(("r.", "agent_id", agent_id), ("r.", "owner_id", owner_id))
        rows = self._rows(
            f"SELECT {_REVISION_COLUMNS} FROM resources r JOIN resource_revisions v ON v.agent_id = r.agent_id"
            " AND v.owner_id = r.owner_id AND v.name = r.name AND v.revision = r.current_revision"
            f" {where} ORDER BY r.agent_id, r.owner_id, r.name",
            params,
        )
        return [_revision(r) for r in rows]

    def resource_revision(self, agent_id: str, owner_id: str, name: str,
                          revision: int | None = None) -> ResourceRevision | None:
        """One revision (the current one when ``revision`` is None)."""
        if revision is None:
            rows = self._rows(
                f"SELECT {_REVISION_COLUMNS} FROM resources r JOIN resource_revisions v ON"
                " v.agent_id = r.agent_id AND v.owner_id = r.owner_id AND v.name = r.name"
                " AND v.revision = r.current_revision WHERE r.agent_id = ? AND r.owner_id = ? AND r.name = ?",
                (agent_id, owner_id, name),
            )
        else:
            rows = self._rows(
                f"SELECT {_REVISION_COLUMNS} FROM resource_revisions v WHERE v.agent_id = ? AND v.owner_id = ?"
                " AND v.name = ? AND v.revision = ?",
                (agent_id, owner_id, name, revision),
            )
        return _revision(rows[0]) if rows else None

    def resource_history(self, agent_id: str, owner_id: str, name: str, limit: int | None = None
                         ) -> list[ResourceRevision]:
        """Revisions, newest first."""
        rows = self._rows(
            f"SELECT {_REVISION_COLUMNS} FROM resource_revisions v WHERE v.agent_id = ? AND v.owner_id = ?"
            " AND v.name = ? ORDER BY v.revision DESC LIMIT ?",
            (agent_id, owner_id, name, clamp_limit(limit)),
        )
        return [_revision(r) for r in rows]

    def agent_rules(self, agent_id: str) -> list[Memory]:
        """The agent's standing rules: live agent-scoped directive rows of every owner."""
        return [memory_from_row(r) for r in self._rows(AGENT_RULES_SQL, (agent_id,))]

    def prompt_files(self, agent_id: str, owner_id: str) -> tuple[dict[str, ResourceRevision], list[Memory]]:
        """What a prompt shows of an owner's files, in one statement: the current revision of their
        ``user_md`` and ``memory_md`` (by name; a file with none is absent), and, when they have no
        ``memory_md`` revision, the agent's standing rules (:meth:`agent_rules`; else none)."""
        files: dict[str, ResourceRevision] = {}
        rules: list[Memory] = []
        for row in self._rows(prompt_files_sql(self.prompt_files_bound), {"a": agent_id, "o": owner_id}):
            if row[0] is not None:
                files[row[2]] = _revision(row[:_REVISION_WIDTH])
            else:
                rules.append(memory_from_row(row[_REVISION_WIDTH:]))
        rules.sort(key=lambda m: m.id)
        return files, rules

    def agent_owners(self, agent_id: str) -> list[str]:
        """Every owner with messages, memory rows or prompt files of ``agent_id``."""
        return [str(r[0]) for r in self._rows(AGENT_OWNERS_SQL, {"a": agent_id})]

    def agent_rules_changed_at(self) -> dict[str, datetime]:
        """Per agent, when a directive row of agent scope last changed (an archive changes it too)."""
        rows = self._rows(
            "SELECT agent_id, max(updated_at) FROM memories"
            " WHERE scope_type = 'agent' AND category = 'directive' GROUP BY agent_id"
        )
        return {str(r[0]): datetime.fromisoformat(r[1]) for r in rows}

    def memory_owners(self) -> list[tuple[str, str]]:
        """Every ``(agent_id, owner_id)`` that has memory rows or rendered resources."""
        rows = self._rows(
            "SELECT agent_id, owner_id FROM memories UNION SELECT agent_id, owner_id FROM resources ORDER BY 1, 2"
        )
        return [(r[0], r[1]) for r in rows]


    # --- review ---------------------------------------------------------------------------------

    def review_state(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> ReviewState:
        rows = self._rows(REVIEW_STATE_SQL, review_state_key(agent_id, owner_id, conversation))
        return review_state_from_row(rows[0]) if rows else ReviewState()

    def reviews_left_at_close(self) -> list[tuple[str, str, ConversationKey]]:
        """Every (agent, owner, conversation) whose due review a closing memory left unrun."""
        rows = self._rows("SELECT agent_id, owner_id, channel, chat_id, thread_scope FROM review_state"
                          " WHERE last_skip_reason = ? ORDER BY 1, 2, 3, 4, 5", (LEFT_AT_CLOSE,))
        return [(r[0], r[1], ConversationKey(r[2], r[3], r[4])) for r in rows]

    def user_messages_after(self, agent_id: str, owner_id: str, conversation: ConversationKey, after_id: int,
                            limit: int) -> list[Message]:
        """The owner's user-sent messages after ``after_id``, oldest first (at most ``limit``)."""
        rows = self._rows(
            f"SELECT {CONVERSATION_MESSAGE_COLUMNS} FROM messages WHERE agent_id = ? AND channel = ? AND chat_id = ?"
            " AND thread_scope = ? AND owner_id = ? AND role = 'user' AND id > ? ORDER BY id LIMIT ?",
            (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope, owner_id, after_id,
             max(0, limit)),
        )
        return [conversation_message_from_row(stored_row(r), agent_id, conversation) for r in rows]

    def conversations_with_unreviewed(self, *, agent_id: str | None = None, owner_id: str | None = None,
                                      conversation: ConversationKey | None = None
                                      ) -> list[tuple[str, str, ConversationKey]]:
        """Every (agent, owner, conversation) with user messages newer than its last review."""
        clauses, params = ["m.role = 'user'"], []
        if agent_id is not None:
            clauses.append("m.agent_id = ?")
            params.append(agent_id)
        if owner_id is not None:
            clauses.append("m.owner_id = ?")
            params.append(owner_id)
        if conversation is not None:
            clauses.append("m.channel = ? AND m.chat_id = ? AND m.thread_scope = ?")
            params.extend((conversation.channel, conversation.chat_id, conversation.thread_scope))
        rows = self._rows(
            "SELECT m.agent_id, m.owner_id, m.channel, m.chat_id, m.thread_scope FROM messages m"
            " LEFT JOIN review_state r ON r.agent_id = m.agent_id AND r.owner_id = m.owner_id"
            " AND r.channel = m.channel AND r.chat_id = m.chat_id AND r.thread_scope = m.thread_scope"
            f" WHERE {' AND '.join(clauses)}"
            " GROUP BY m.agent_id, m.owner_id, m.channel, m.chat_id, m.thread_scope"
            " HAVING max(m.id) > coalesce(max(r.reviewed_up_to_id), 0) ORDER BY 1, 2, 3, 4, 5",
            params,
        )
        return [(r[0], r[1], ConversationKey(r[2], r[3], r[4])) for r in rows]

_REVISION_COLUMNS = "v.agent_id, v.owner_id, v.name, v.revision, v.content, v.content_sha256, v.reason, v.created_at"
_REVISION_WIDTH = len(_REVISION_COLUMNS.split(", "))


@functools.cache
def prompt_files_sql(bound: str = "") -> str:
    """An owner's prompt files, and the agent's standing rules (``AGENT_RULES_SQL``'s terms) when
    the owner has no MEMORY.md revision: each row a revision's columns then a memory row's, the
    other half NULL (a revision's agent_id never is). The owner's key on the files is written
    ``{bound}:a``, ``{bound}:o``: SQLite prepares the statement again at every run for the bare
    parameters (~170 µs, ten times its run on a newcomer's empty files), once for ``+:a``
    (``sqlite.queries``); the plan is the same."""
    current_file = ("resources r JOIN resource_revisions v ON v.agent_id = r.agent_id AND v.owner_id = r.owner_id"
                    " AND v.name = r.name AND v.revision = r.current_revision"
                    f" WHERE r.agent_id = {bound}:a AND r.owner_id = {bound}:o")
    return (
        f"SELECT {_REVISION_COLUMNS}, {', '.join(['NULL'] * len(MEMORY_FIELDS))} FROM {current_file}"
        " AND r.name IN ('user_md', 'memory_md')"
        f" UNION ALL SELECT {', '.join(['NULL'] * _REVISION_WIDTH)}, {MEMORY_COLUMNS} FROM memories"
        " WHERE agent_id = :a AND scope_type = 'agent' AND category = 'directive' AND promote_target = 'memory_md'"
        f" AND archived_at IS NULL AND NOT EXISTS (SELECT 1 FROM {current_file} AND r.name = 'memory_md')"
    )


def _revision(row: tuple[Any, ...]) -> ResourceRevision:
    return ResourceRevision(agent_id=row[0], owner_id=row[1], name=row[2], revision=row[3], content=row[4],
                            content_sha256=row[5], reason=row[6], created_at=datetime.fromisoformat(row[7]))

