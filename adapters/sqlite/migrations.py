"""The DDL of each schema version of ``memory.db``: migration N brings version N-1 to N
(``schema.migrate`` runs them)."""

from __future__ import annotations

from collections.abc import Callable

from fermix_memory.adapters.sql.cursor import SqlCursor
from fermix_memory.adapters.sql.ddl import CHAIN_HEADS, PLAIN_TABLES, SHOWN_ROWS_INDEXES, UNFINISHED_COPY
from fermix_memory.adapters.sqlite.full_text_catch_up import FULL_TEXT, migrate_to_catch_up, triggers
from fermix_memory.adapters.sqlite.memory_vector_changes import MEMORY_VECTOR_CHANGES, add_memory_changes

# The triggers that make ``events`` append-only (only ``payload`` may change, and only to NULL).
# Kept apart so that opening a database whose triggers were dropped can put them back.
APPEND_ONLY_TRIGGERS: dict[str, str] = {
    "events_append_only_delete": """CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;""",
    "events_append_only_update": """CREATE TRIGGER events_append_only_update
BEFORE UPDATE OF position, stream, version, kind, schema, recorded_at, payload_sha256, prev_hash, hash
ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;""",
    "events_redact_only": "CREATE TRIGGER events_redact_only BEFORE UPDATE OF payload ON events"
    """ WHEN NEW.payload IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'an event payload can only be redacted'); END;""",
}

_V1 = """
CREATE TABLE events(
    position       INTEGER PRIMARY KEY,
    stream         TEXT NOT NULL,
    version        INTEGER NOT NULL,
    kind           TEXT NOT NULL,
    schema         INTEGER NOT NULL,
    recorded_at    TEXT NOT NULL,
    payload        TEXT,                -- NULL once redacted; the digest stays
    payload_sha256 TEXT NOT NULL,
    prev_hash      TEXT NOT NULL,
    hash           TEXT NOT NULL,
    UNIQUE(stream, version)
);
""" + "\n".join(APPEND_ONLY_TRIGGERS.values()) + """

CREATE TABLE messages(
    id            INTEGER PRIMARY KEY,   -- the position of its message.appended event
    agent_id      TEXT NOT NULL,
    owner_id      TEXT NOT NULL,
    channel       TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    thread_scope  TEXT NOT NULL DEFAULT '',
    sender        TEXT NOT NULL,
    role          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    content       TEXT NOT NULL,
    metadata_json TEXT NOT NULL DEFAULT '{}',
    created_at    TEXT NOT NULL,
    trust         TEXT NOT NULL DEFAULT 'guest',
    scope_tokens  TEXT NOT NULL            -- indexed with the text so scoped search stays scoped
);
CREATE INDEX messages_by_conversation
    ON messages(agent_id, channel, chat_id, thread_scope, created_at, id);
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, scope_tokens, content='messages', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts(messages_fts, rank) VALUES('rank', 'bm25(1.0, 0.0)');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, scope_tokens) VALUES (new.id, new.content, new.scope_tokens);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, scope_tokens)
    VALUES ('delete', old.id, old.content, old.scope_tokens);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, scope_tokens)
    VALUES ('delete', old.id, old.content, old.scope_tokens);
    INSERT INTO messages_fts(rowid, content, scope_tokens) VALUES (new.id, new.content, new.scope_tokens);
END;

CREATE TABLE memories(
    id                 INTEGER PRIMARY KEY,  -- the position of its memory.added event
    agent_id           TEXT NOT NULL,
    owner_id           TEXT NOT NULL,
    scope_type         TEXT NOT NULL,
    scope_id           TEXT NOT NULL,
    category           TEXT NOT NULL,
    key                TEXT NOT NULL,
    value              TEXT NOT NULL,
    confidence         REAL NOT NULL DEFAULT 1.0,
    promote_target     TEXT,
    source_id          TEXT NOT NULL DEFAULT '',
    source_type        TEXT NOT NULL DEFAULT '',
    source_name        TEXT NOT NULL DEFAULT '',
    source_description TEXT NOT NULL DEFAULT '',
    session_id         TEXT NOT NULL DEFAULT '',
    run_id             TEXT NOT NULL DEFAULT '',
    source_message_id  INTEGER,
    archived_at        TEXT,
    archived_by        TEXT,
    archive_reason     TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    UNIQUE(agent_id, owner_id, scope_type, scope_id, key)
);
CREATE VIRTUAL TABLE memories_fts USING fts5(
    key, value, content='memories', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, key, value) VALUES (new.id, new.key, new.value);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, key, value) VALUES ('delete', old.id, old.key, old.value);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, key, value) VALUES ('delete', old.id, old.key, old.value);
    INSERT INTO memories_fts(rowid, key, value) VALUES (new.id, new.key, new.value);
END;
""" + PLAIN_TABLES

# Erasures whose bytes may still be in the files: written in the erasure's transaction, cleared
# once the scrub (VACUUM, WAL emptied) succeeded; a pending row makes the next open scrub.
_V2 = """
CREATE TABLE scrub_pending(
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    since_position INTEGER NOT NULL
);
"""

# History search sees who spoke: ``messages_fts`` gains a ``sender`` column (ADR-0019). FTS5
# cannot add a column, so the index and its sync triggers are made anew and rebuilt from
# ``messages``. Ranking is done by the read side with the searched scope's own statistics; the
# table's ``rank`` stays for ad-hoc use, the sender weighted below the text.
_V3 = """
DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, sender, scope_tokens, content='messages', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts(messages_fts, rank) VALUES('rank', 'bm25(1.0, 0.3, 0.0)');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, sender, scope_tokens)
    VALUES (new.id, new.content, new.sender, new.scope_tokens);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, sender, scope_tokens)
    VALUES ('delete', old.id, old.content, old.sender, old.scope_tokens);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, sender, scope_tokens)
    VALUES ('delete', old.id, old.content, old.sender, old.scope_tokens);
    INSERT INTO messages_fts(rowid, content, sender, scope_tokens)
    VALUES (new.id, new.content, new.sender, new.scope_tokens);
END;
INSERT INTO messages_fts(messages_fts) VALUES('rebuild');
"""

# A message's scope tokens as rows of ``json_each`` (the tokens are letters and digits, joined
# by single spaces; a message without tokens is skipped by the triggers' WHEN).
def _tokens_of(column: str) -> str:
    return f"""json_each('["' || replace({column}, ' ', '","') || '"]')"""


# What ``scope_sizes`` held in migration 4 (before it counted characters), counted from ``messages``.
_COUNTED_V4 = ("SELECT t.value AS token, count(*) AS messages"
               f" FROM messages m, {_tokens_of('m.scope_tokens')} t"
               " WHERE m.scope_tokens <> '' GROUP BY t.value")

# How many messages carry each scope token: the size of a history search's scope, read in one
# lookup (counting the token's rows in ``messages_fts`` is a pass over the whole scope, and the
# scope's size is what its word rarities are measured against; ADR-0019). Kept by triggers named
# like the full-text index's, so deferred indexing drops and rebuilds them together. And the
# index's merge command takes any level of two or more segments (the background upkeep, ADR-0020).
# What a message does to the sizes of its scopes as it joins or leaves them.
_JOINS = ("INSERT INTO scope_sizes(token, messages) SELECT value, 1 FROM {tokens} WHERE {when}"
          " ON CONFLICT(token) DO UPDATE SET messages = messages + 1;")
_LEAVES = ("UPDATE scope_sizes SET messages = messages - 1 WHERE token IN (SELECT value FROM {tokens});"
           " DELETE FROM scope_sizes WHERE token IN (SELECT value FROM {tokens}) AND messages <= 0;")
_NEW, _OLD = _tokens_of("new.scope_tokens"), _tokens_of("old.scope_tokens")


def _size_triggers(joins: str, leaves: str, updated: str) -> str:
    """The triggers that keep ``scope_sizes`` as messages join and leave scopes (``updated``: the
    columns whose update moves a message)."""
    return f"""
CREATE TRIGGER messages_fts_sizes_insert AFTER INSERT ON messages WHEN new.scope_tokens <> '' BEGIN
    {joins.format(tokens=_NEW, when="true")}
END;
CREATE TRIGGER messages_fts_sizes_delete AFTER DELETE ON messages WHEN old.scope_tokens <> '' BEGIN
    {leaves.format(tokens=_OLD)}
END;
CREATE TRIGGER messages_fts_sizes_update AFTER UPDATE OF {updated} ON messages BEGIN
    {leaves.format(tokens=_OLD)}
    {joins.format(tokens=_NEW, when="new.scope_tokens <> ''")}
END;"""

_V4 = f"""
CREATE TABLE scope_sizes(
    token    TEXT PRIMARY KEY,
    messages INTEGER NOT NULL
) WITHOUT ROWID;
{_size_triggers(_JOINS, _LEAVES, "scope_tokens")}
DELETE FROM scope_sizes; INSERT INTO scope_sizes(token, messages) {_COUNTED_V4};
INSERT INTO messages_fts(messages_fts, rank) VALUES ('usermerge', 2);
"""

# What ``scope_sizes`` must hold, counted from ``messages``: each scope's messages and the
# characters of their text (history ranking normalises a turn's length by its scope's average,
# ADR-0019).
SCOPE_SIZES_COUNTED = ("SELECT t.value AS token, count(*) AS messages, sum(length(m.content)) AS chars"
                       f" FROM messages m, {_tokens_of('m.scope_tokens')} t"
                       " WHERE m.scope_tokens <> '' GROUP BY t.value")
# The whole of ``scope_sizes`` anew (after deferred indexing, and migration 6).
SCOPE_SIZES_REBUILD = ("DELETE FROM scope_sizes;"
                       f" INSERT INTO scope_sizes(token, messages, chars) {SCOPE_SIZES_COUNTED};")
_JOINS_CHARS = ("INSERT INTO scope_sizes(token, messages, chars) SELECT value, 1, length(new.content)"
                " FROM {tokens} WHERE {when}"
                " ON CONFLICT(token) DO UPDATE SET messages = messages + 1, chars = chars + excluded.chars;")
_LEAVES_CHARS = ("UPDATE scope_sizes SET messages = messages - 1, chars = chars - length(old.content)"
                 " WHERE token IN (SELECT value FROM {tokens});"
                 " DELETE FROM scope_sizes WHERE token IN (SELECT value FROM {tokens}) AND messages <= 0;")
# Migration 6: the scope sizes count characters too (the triggers change with them).
_V6 = f"""
ALTER TABLE scope_sizes ADD COLUMN chars INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER messages_fts_sizes_insert;
DROP TRIGGER messages_fts_sizes_delete;
DROP TRIGGER messages_fts_sizes_update;
{_size_triggers(_JOINS_CHARS, _LEAVES_CHARS, "scope_tokens, content")}
{SCOPE_SIZES_REBUILD}
"""

# The import keys (ADR-0012) each conversation holds, read from this index alone (ADR-0041): the
# messages whose payload's metadata has the key at its top level. ``instr`` first, so that a
# message without it costs no JSON parsing; a redacted payload (NULL) leaves the index. Ordered by
# stream then position, so that an append adds at the end of its stream's entries (the key, in
# the order of a hash, would put each one anywhere).
IMPORT_KEYED = (
    "kind = 'message.appended' AND instr(payload, '\"fermix_import_key\":') > 0"
    " AND json_type(payload, '$.metadata.fermix_import_key') IS NOT NULL"
)
IMPORT_KEYS_INDEX = f"""
CREATE INDEX IF NOT EXISTS events_import_keys ON events(stream, position,
    json_type(payload, '$.metadata.fermix_import_key'), json_extract(payload, '$.metadata.fermix_import_key'))
    WHERE {IMPORT_KEYED};
"""

# Migration 8: vectors of messages and memory rows, derived data (ADR-0043). A vector is labelled
# with its embedder (``model@version``); ``vector_queue`` lists what still needs one. A memory
# row is queued by the triggers below in the write that changes it; a message is not: its append
# stays as it was without an embedder, and the upkeep, when there is one, queues the messages
# above ``vector_marks``' mark for 'message' in a background write of its own (messages are
# numbered in commit order here, and never change). A text that changes or goes takes its vector
# with it in the same transaction.
_V8 = """
CREATE TABLE message_vectors(
    message_id INTEGER PRIMARY KEY,
    label      TEXT NOT NULL,
    vector     BLOB NOT NULL
);
CREATE TABLE memory_vectors(
    memory_id INTEGER PRIMARY KEY,
    label     TEXT NOT NULL,
    vector    BLOB NOT NULL
);
CREATE TABLE vector_queue(
    kind TEXT NOT NULL,     -- 'message' | 'memory'
    id   INTEGER NOT NULL,
    PRIMARY KEY(kind, id)
) WITHOUT ROWID;
CREATE TABLE vector_marks(
    kind    TEXT PRIMARY KEY,   -- 'message': every message up to last_id was queued
    last_id INTEGER NOT NULL
);
CREATE TRIGGER memories_vectors_insert AFTER INSERT ON memories BEGIN
    INSERT INTO vector_queue(kind, id) SELECT 'memory', new.id
    WHERE NOT EXISTS (SELECT 1 FROM vector_queue WHERE kind = 'memory' AND id = new.id);
END;
INSERT INTO vector_queue(kind, id) SELECT 'memory', id FROM memories;
""" + "".join(f"""
CREATE TRIGGER {table}_vectors_update AFTER UPDATE OF {columns} ON {table} BEGIN
    DELETE FROM {kind}_vectors WHERE {kind}_id = old.id;
    INSERT INTO vector_queue(kind, id) SELECT '{kind}', new.id
    WHERE NOT EXISTS (SELECT 1 FROM vector_queue WHERE kind = '{kind}' AND id = new.id);
END;
CREATE TRIGGER {table}_vectors_delete AFTER DELETE ON {table} BEGIN
    DELETE FROM {kind}_vectors WHERE {kind}_id = old.id;
    DELETE FROM vector_queue WHERE kind = '{kind}' AND id = old.id;
END;
""" for table, kind, columns in (("messages", "message", "sender, content"), ("memories", "memory", "key, value")))

# Schema 9 (ADR-0043, "a search by meaning keeps its scope's vectors"): a count that moves whenever
# a message's vector goes, changes, or comes in behind a later one, so a reader that keeps a
# scope's vectors in memory knows when it may only add the vectors of messages above the last
# it saw. Vectors appended in order, the upkeep's common case, leave it alone.
_V9 = """
CREATE TABLE vector_changes(
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    changes INTEGER NOT NULL
);
INSERT INTO vector_changes(id, changes) VALUES (1, 0);
CREATE TRIGGER message_vectors_changed AFTER UPDATE ON message_vectors BEGIN
    UPDATE vector_changes SET changes = changes + 1 WHERE id = 1;
END;
CREATE TRIGGER message_vectors_removed AFTER DELETE ON message_vectors BEGIN
    UPDATE vector_changes SET changes = changes + 1 WHERE id = 1;
END;
CREATE TRIGGER message_vectors_behind AFTER INSERT ON message_vectors
WHEN new.message_id < (SELECT max(message_id) FROM message_vectors) BEGIN
    UPDATE vector_changes SET changes = changes + 1 WHERE id = 1;
END;
"""

# Also schema 10 (ADR-0050): the import keys' index ordered by key within a stream, so that an
# append with an idempotency key finds its key by one seek, not by a walk over every keyed message
# of its conversation; the whole stream's keys still come from the same index, and the position
# is the rowid every index entry holds.
IMPORT_KEYS_BY_KEY = f"""
DROP INDEX IF EXISTS events_import_keys;
CREATE INDEX events_import_keys ON events(stream,
    json_type(payload, '$.metadata.fermix_import_key'), json_extract(payload, '$.metadata.fermix_import_key'))
    WHERE {IMPORT_KEYED};
"""

# Schema 12: the days each message speaks of and the names it mentions (``sql.marks``), one row a
# mark, keyed by message (what goes with it) and read by mark. A trigger takes a message's marks
# with it (its name is outside the full-text triggers' family, so a bulk fill keeps it). The
# messages stored already are marked after this DDL, by ``AFTER_MIGRATION``. ``IF NOT EXISTS`` and
# the ``DELETE``: a file whose version was set back is marked anew.
MESSAGE_MARKS = """
CREATE TABLE IF NOT EXISTS message_marks(
    message_id INTEGER NOT NULL,
    mark       TEXT NOT NULL,     -- 'd:2024-02-26' (a day it speaks of), 'e:mei' (a name it mentions)
    PRIMARY KEY(message_id, mark)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS message_marks_by_mark ON message_marks(mark, message_id);
CREATE TRIGGER IF NOT EXISTS message_marks_delete AFTER DELETE ON messages BEGIN
    DELETE FROM message_marks WHERE message_id = old.id;
END;
DELETE FROM message_marks;
"""


# Schema 13 (ADR-0082): a fact may carry its own expiry, the time (ISO 8601, UTC, as ``created_at``)
# at which the retention run erases it; NULL when it has none. The index holds only the rows that
# have one, so the run finds those due by one range read. SQLite has no ``ADD COLUMN IF NOT
# EXISTS``: the column is added by ``AFTER_MIGRATION`` when absent (a file whose version was set
# back keeps it).
EXPIRES_AT = "-- memories.expires_at: added by AFTER_MIGRATION[13]"
EXPIRES_AT_INDEX = "CREATE INDEX IF NOT EXISTS memories_expiring ON memories(expires_at) WHERE expires_at IS NOT NULL"


# Schema 14 (ADR-0084): memory rows wait for their vectors above a mark, as messages do (schema 8):
# no trigger queues a row in the write that adds it (that insert was a tenth of a memory write);
# the upkeep queues the rows above ``vector_marks``' mark for 'memory' in a background write of
# its own. Row ids are the positions of their ``memory.added`` events: new rows are numbered in
# commit order. A changed text is still queued by its update trigger, in the write that changes it.
MEMORY_VECTOR_MARK = """
DROP TRIGGER IF EXISTS memories_vectors_insert;
INSERT INTO vector_marks(kind, last_id) SELECT 'memory', max(id) FROM memories WHERE true
    HAVING max(id) IS NOT NULL ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id);
"""


# Schema 15 (ADR-0085): an append leaves its messages' marks to a catch-up (the search index's
# upkeep, and any read of the marks first): the messages above ``vector_marks``' mark for
# 'message_marks' wait for theirs. Those stored already are marked (schema 12).
MESSAGE_MARKS_MARK = """
INSERT INTO vector_marks(kind, last_id) SELECT 'message_marks', max(id) FROM messages WHERE true
    HAVING max(id) IS NOT NULL ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id);
"""


# Schema 17 (ADR-0091): new rows wait above a mark for their full-text entries (``full_text_catch_up``);
# the marks are set by ``AFTER_MIGRATION`` (a file whose version was set back is caught up first).
FULL_TEXT_MARKS = "".join(triggers(index) for index in FULL_TEXT)


def _add_expires_at(cur: SqlCursor) -> None:
    columns = {str(row[1]) for row in cur.execute("PRAGMA table_info(memories)")}
    if "expires_at" not in columns:
        cur.execute("ALTER TABLE memories ADD COLUMN expires_at TEXT")
    cur.execute(EXPIRES_AT_INDEX)


def _fill_marks(cur: SqlCursor) -> int:
    # Imported here: a reader that opens the store read-only never migrates, nor loads the parsers.
    from fermix_memory.adapters.sql.mark_writes import fill_marks

    return fill_marks(cur)


# Python steps a migration takes after its DDL, by its number.
AFTER_MIGRATION: dict[int, Callable[[SqlCursor], object]] = {12: _fill_marks, 13: _add_expires_at,
                                                               16: add_memory_changes, 17: migrate_to_catch_up}

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, CHAIN_HEADS, _V6, IMPORT_KEYS_INDEX, _V8, _V9,
                               UNFINISHED_COPY + IMPORT_KEYS_BY_KEY, SHOWN_ROWS_INDEXES, MESSAGE_MARKS,
                               EXPIRES_AT, MEMORY_VECTOR_MARK, MESSAGE_MARKS_MARK, MEMORY_VECTOR_CHANGES,
                               FULL_TEXT_MARKS)
