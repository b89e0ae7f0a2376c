"""The DDL of each schema version of the PostgreSQL store: migration N brings version N-1 to N
(``schema.migrate`` runs them and records each in ``fermix_migrations``).

The tables and columns are those of ``memory.db`` (the projections are the same functions);
what differs is PostgreSQL's own: the append-only rules as PL/pgSQL triggers, and full-text
search as ``tsvector`` columns with GIN indexes in place of FTS5 tables."""

from __future__ import annotations

from collections.abc import Callable

from fermix_memory.adapters.postgres.memory_vector_changes import MEMORY_VECTOR_CHANGES
from fermix_memory.adapters.sql.cursor import SqlCursor
from fermix_memory.adapters.sql.ddl import CHAIN_HEADS, PLAIN_TABLES, SHOWN_ROWS_INDEXES, UNFINISHED_COPY

# The functions and triggers that make ``events`` append-only: no DELETE, no TRUNCATE, and an
# UPDATE only of ``payload``, only to NULL (the redaction of a payload, whose digest stays).
APPEND_ONLY = """
CREATE FUNCTION fermix_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only' USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE FUNCTION fermix_events_redact_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.payload IS NOT NULL
       OR (NEW.position, NEW.stream, NEW.version, NEW.kind, NEW.schema, NEW.recorded_at, NEW.payload_sha256,
           NEW.prev_hash, NEW.hash)
          IS DISTINCT FROM
          (OLD.position, OLD.stream, OLD.version, OLD.kind, OLD.schema, OLD.recorded_at, OLD.payload_sha256,
           OLD.prev_hash, OLD.hash) THEN
        RAISE EXCEPTION 'an event payload can only be redacted' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION fermix_events_append_only();
CREATE TRIGGER events_append_only_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION fermix_events_append_only();
CREATE TRIGGER events_redact_only BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION fermix_events_redact_only();
"""

# Names of the append-only triggers (verify and open check they are all there).
APPEND_ONLY_TRIGGERS = ("events_append_only_delete", "events_append_only_truncate", "events_redact_only")

_V1 = """
CREATE TABLE events(
    position       BIGINT PRIMARY KEY,
    stream         TEXT COLLATE "C" NOT NULL,
    version        BIGINT NOT NULL,
    kind           TEXT NOT NULL,
    schema         INTEGER NOT NULL,
    recorded_at    TEXT NOT NULL,
    payload        TEXT,                -- canonical JSON, byte for byte what was digested; NULL once redacted
    payload_sha256 TEXT NOT NULL,
    prev_hash      TEXT NOT NULL,
    hash           TEXT NOT NULL,
    UNIQUE(stream, version)
);
""" + APPEND_ONLY + """
CREATE TABLE messages(
    id            BIGINT PRIMARY KEY,    -- the position of its message.appended event
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
    scope_tokens  TEXT NOT NULL,         -- in the index with the text, so a scoped search stays scoped
    search        tsvector GENERATED ALWAYS AS (
        to_tsvector('simple'::regconfig, scope_tokens)
        || setweight(to_tsvector('english'::regconfig, content), 'A')
        || setweight(to_tsvector('simple'::regconfig, sender), 'D')) STORED
);
CREATE INDEX messages_by_conversation ON messages(agent_id, channel, chat_id, thread_scope, created_at, id);
CREATE INDEX messages_search ON messages USING gin(search);

CREATE TABLE memories(
    id                 BIGINT PRIMARY KEY,  -- the position of its memory.added event
    agent_id           TEXT NOT NULL,
    owner_id           TEXT NOT NULL,
    scope_type         TEXT NOT NULL,
    scope_id           TEXT NOT NULL,
    category           TEXT NOT NULL,
    key                TEXT NOT NULL,
    value              TEXT NOT NULL,
    confidence         DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    promote_target     TEXT,
    source_id          TEXT NOT NULL DEFAULT '',
    source_type        TEXT NOT NULL DEFAULT '',
    source_name        TEXT NOT NULL DEFAULT '',
    source_description TEXT NOT NULL DEFAULT '',
    session_id         TEXT NOT NULL DEFAULT '',
    run_id             TEXT NOT NULL DEFAULT '',
    source_message_id  BIGINT,
    archived_at        TEXT,
    archived_by        TEXT,
    archive_reason     TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    search             tsvector GENERATED ALWAYS AS (
        to_tsvector('english'::regconfig, key || ' ' || value)) STORED,
    UNIQUE(agent_id, owner_id, scope_type, scope_id, key)
);
CREATE INDEX memories_search ON memories USING gin(search);

""" + PLAIN_TABLES.replace("INTEGER", "BIGINT") + """
-- Erasures whose bytes may still be in the server's files until a scrub (VACUUM FULL) ran.
CREATE TABLE scrub_pending(
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    since_position BIGINT NOT NULL
);
"""

# Several chains (ADR-0031): each chain's head, whose row lock a write holds while it extends the
# chain; positions of a log of several chains come from a sequence (increasing, gaps allowed).
_V2 = CHAIN_HEADS.replace("INTEGER NOT NULL", "BIGINT NOT NULL") + """
CREATE SEQUENCE events_position;
"""

# The import keys (ADR-0012) each conversation holds (ADR-0041): kept beside each message whose
# payload's metadata has the key at its top level (its JSON type, and the key when it is a
# string), computed by the server as the row is written and gone with a redacted payload, and
# read through an index of those rows alone, without parsing any payload.
_IMPORT_KEY_OF = ("CASE WHEN kind = 'message.appended' AND strpos(payload, '\"fermix_import_key\":') > 0"
                  " THEN payload::json -> 'metadata' -> 'fermix_import_key' END")
_V3 = f"""
ALTER TABLE events
    ADD COLUMN import_key_type TEXT GENERATED ALWAYS AS (json_typeof({_IMPORT_KEY_OF})) STORED,
    ADD COLUMN import_key TEXT GENERATED ALWAYS AS (({_IMPORT_KEY_OF}) #>> '{{}}') STORED;
CREATE INDEX events_import_keys ON events(stream, position) INCLUDE (import_key_type, import_key)
    WHERE import_key_type IS NOT NULL;
"""

# Vectors of messages and rows, derived data (ADR-0043): the tables and triggers of SQLite's
# migration 8, in PostgreSQL's words.
_V4 = """
CREATE TABLE message_vectors(
    message_id BIGINT PRIMARY KEY,
    label      TEXT NOT NULL,
    vector     BYTEA NOT NULL
);
CREATE TABLE memory_vectors(
    memory_id BIGINT PRIMARY KEY,
    label     TEXT NOT NULL,
    vector    BYTEA NOT NULL
);
CREATE TABLE vector_queue(
    kind TEXT NOT NULL,
    id   BIGINT NOT NULL,
    PRIMARY KEY(kind, id)
);
""" + "".join(f"""
CREATE FUNCTION {table}_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM {kind}_vectors WHERE {kind}_id = OLD.id;
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM vector_queue WHERE kind = '{kind}' AND id = OLD.id;
    ELSE
        INSERT INTO vector_queue(kind, id) VALUES ('{kind}', NEW.id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER {table}_vectors AFTER INSERT OR DELETE OR UPDATE OF {columns} ON {table}
    FOR EACH ROW EXECUTE FUNCTION {table}_vectors();
INSERT INTO vector_queue(kind, id) SELECT '{kind}', id FROM {table};
""" for table, kind, columns in (("messages", "message", "sender, content"), ("memories", "memory", "key, value")))

# Schema 5, as SQLite's 9 (ADR-0043): the count a reader that keeps a scope's vectors checks. Every
# write of a message's vector first locks the count's row, so writers of vectors (of several
# processes) take turns; only then is "behind a later one" read, from what has committed.
_V5 = """
CREATE TABLE vector_changes(
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    changes BIGINT NOT NULL
);
INSERT INTO vector_changes(id, changes) VALUES (1, 0);
CREATE FUNCTION message_vectors_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM vector_changes WHERE id = 1 FOR UPDATE;
    IF TG_OP <> 'INSERT'
       OR NEW.message_id < (SELECT max(message_id) FROM message_vectors WHERE message_id <> NEW.message_id) THEN
        UPDATE vector_changes SET changes = changes + 1 WHERE id = 1;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER message_vectors_changes AFTER INSERT OR UPDATE OR DELETE ON message_vectors
    FOR EACH ROW EXECUTE FUNCTION message_vectors_changes();
"""

# Schema 6, as SQLite's 10 (ADR-0051): the mark of an unfinished copy into this database.
# Also schema 6 (ADR-0050): the import keys' index ordered by key within a stream, for an append
# with an idempotency key to find its key by one seek.
_IMPORT_KEYS_BY_KEY = """
DROP INDEX IF EXISTS events_import_keys;
CREATE INDEX events_import_keys ON events(stream, import_key_type, import_key) INCLUDE (position)
    WHERE import_key_type IS NOT NULL;
"""

# Schema 7, as SQLite's 11 (ADR-0060): the indexes of the rows a prompt file may show and of the
# agent's standing rules. ``updated_at`` is compared byte by byte, as SQLite compares it, so that
# "most recently updated" is the order of the times it holds (UTC, ISO) under any collation of the
# database (one that orders punctuation apart would put "12:00:00+00:00" after "12:00:00.5+00:00").
_SHOWN_ROWS = 'ALTER TABLE memories ALTER COLUMN updated_at TYPE TEXT COLLATE "C";' + SHOWN_ROWS_INDEXES

# Schema 8, as SQLite's 12: the days each message speaks of and the names it mentions (``sql.marks``),
# one row a mark, keyed by message and read by mark (compared byte by byte: a range of days is a
# range of marks under any collation). The cascade takes a message's marks with it. The messages
# stored already are marked after this DDL, by ``AFTER_MIGRATION`` (``IF NOT EXISTS`` and the
# ``DELETE``: a database whose version was set back is marked anew).
_MESSAGE_MARKS = """
CREATE TABLE IF NOT EXISTS message_marks(
    message_id BIGINT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    mark       TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY(message_id, mark)
);
CREATE INDEX IF NOT EXISTS message_marks_by_mark ON message_marks(mark, message_id);
DELETE FROM message_marks;
"""

# Schema 9 (ADR-0049): no statistics of the columns that hold a person's words or what is derived
# from them. ``ANALYZE`` (the scrub's, or autovacuum's) copies a sample of a column's values into the
# catalogue (most common values, histogram bounds, a ``tsvector``'s most common words); each new
# analysis leaves the last one's row dead in ``pg_statistic``'s file, which only a superuser may
# rewrite, so an erased value would outlive its erasure there. A column without statistics gets
# none taken; the planner estimates its conditions by default selectivities, and the columns the
# hot reads filter on first (ids, agent, owner, conversation, times) keep theirs.
UNANALYSED_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("payload", "import_key"),  # the payload's canonical JSON; a message's import key
    "messages": ("sender", "content", "metadata_json", "search"),  # the words, their sender, lexemes
    "memories": ("key", "value", "search", "archive_reason", "source_name", "source_description"),
    "memory_sources": ("name", "description"),  # copied into memories' source columns
    "scheduled_jobs": ("name", "prompt"),  # an owner's words to run on a schedule
    "job_runs": ("output", "error"),  # what a job said or failed with, about the prompt
    "resource_revisions": ("content", "reason"),  # the prompt files' text and why it changed
    "review_state": ("last_error", "last_skip_reason"),  # a review's words about what it read
    "message_vectors": ("vector",),  # vectors: derivatives of the text (ADR-0043)
    "memory_vectors": ("vector",),
    "message_marks": ("mark",),  # the days and names a message speaks of
}
_NO_STATISTICS = "".join(
    f"ALTER TABLE {table} {', '.join(f'ALTER COLUMN {column} SET STATISTICS 0' for column in columns)};\n"
    for table, columns in UNANALYSED_COLUMNS.items())

# Schema 10, as SQLite's 13 (ADR-0082): a fact's own expiry (ISO 8601 text, UTC, compared byte by
# byte as ``updated_at`` is), NULL when it has none; indexed only where it is set.
EXPIRES_AT = """
ALTER TABLE memories ADD COLUMN IF NOT EXISTS expires_at TEXT COLLATE "C";
CREATE INDEX IF NOT EXISTS memories_expiring ON memories(expires_at) WHERE expires_at IS NOT NULL;
"""


def _fill_marks(cur: SqlCursor) -> int:
    # Imported here: a reader that opens the store read-only never migrates, nor loads the parsers.
    from fermix_memory.adapters.sql.mark_writes import fill_marks

    return fill_marks(cur)


# Python steps a migration takes after its DDL, by its number.
AFTER_MIGRATION: dict[int, Callable[[SqlCursor], object]] = {8: _fill_marks}

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, UNFINISHED_COPY + _IMPORT_KEYS_BY_KEY, _SHOWN_ROWS,
                               _MESSAGE_MARKS, _NO_STATISTICS, EXPIRES_AT, MEMORY_VECTOR_CHANGES)
