"""The DDL every SQL dialect shares, written in SQLite's types (a dialect widens them where its
own differ, e.g. PostgreSQL's ``BIGINT``), and the projection tables every store holds."""

from __future__ import annotations

# The projection tables: what a replay rebuilds and the audit checksums, on every store.
PROJECTION_TABLES: tuple[str, ...] = (
    "messages",
    "memories",
    "memory_sources",
    "scheduled_jobs",
    "job_runs",
    "resources",
    "resource_revisions",
    "conversation_state",
    "review_state",
    "message_marks",
)

# The projection tables written through the domain's evolve (the same on every store).
PLAIN_TABLES = """
CREATE TABLE memory_sources(
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    owner_id    TEXT NOT NULL,
    source_type TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE scheduled_jobs(
    id               TEXT PRIMARY KEY,
    agent_id         TEXT NOT NULL,
    owner_id         TEXT NOT NULL,
    name             TEXT NOT NULL,
    schedule         TEXT NOT NULL,
    prompt           TEXT NOT NULL,
    memory_source_id TEXT NOT NULL,
    enabled          INTEGER NOT NULL DEFAULT 1,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);

CREATE TABLE job_runs(
    id          TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL,
    status      TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    output      TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX job_runs_by_job ON job_runs(job_id, started_at);

CREATE TABLE resources(
    agent_id         TEXT NOT NULL,
    owner_id         TEXT NOT NULL DEFAULT '',
    name             TEXT NOT NULL,
    current_revision INTEGER NOT NULL,
    content_sha256   TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY(agent_id, owner_id, name)
);

CREATE TABLE resource_revisions(
    agent_id       TEXT NOT NULL,
    owner_id       TEXT NOT NULL DEFAULT '',
    name           TEXT NOT NULL,
    revision       INTEGER NOT NULL,
    content        TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    reason         TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    PRIMARY KEY(agent_id, owner_id, name, revision)
);

CREATE TABLE conversation_state(
    agent_id                TEXT NOT NULL,
    channel                 TEXT NOT NULL,
    chat_id                 TEXT NOT NULL,
    thread_scope            TEXT NOT NULL,
    window_start_id         INTEGER NOT NULL DEFAULT 0,  -- messages with id > this are in the window
    checkpoint_message_id   INTEGER,
    compacted_at            TEXT,
    compaction_retry_after  TEXT,
    PRIMARY KEY(agent_id, channel, chat_id, thread_scope)
);

CREATE TABLE review_state(
    agent_id          TEXT NOT NULL,
    owner_id          TEXT NOT NULL,
    channel           TEXT NOT NULL,
    chat_id           TEXT NOT NULL,
    thread_scope      TEXT NOT NULL,
    reviewed_up_to_id INTEGER NOT NULL DEFAULT 0,
    last_review_at    TEXT,
    retry_after       TEXT,
    last_error        TEXT,
    claim_id          TEXT,
    claim_holder      TEXT,
    claim_expires_at  TEXT,
    last_skip_reason  TEXT,
    PRIMARY KEY(agent_id, owner_id, channel, chat_id, thread_scope)
);
"""


# A log of several chains (ADR-0031) keeps each chain's head here, one row per chain, written in
# the transaction that extends it; a log of one chain (every home written here) has no rows: its
# head is its last event, as before.
CHAIN_HEADS = """
CREATE TABLE IF NOT EXISTS chain_heads(
    chain    INTEGER PRIMARY KEY,
    position INTEGER NOT NULL,
    hash     TEXT NOT NULL
);
"""


# Schema 10 (ADR-0051): the mark of a copy into this database that is not finished (``fermix
# storage migrate``), written with its first copied events and removed with its last. Kept
# ``IF NOT EXISTS``, as a file whose version was set back keeps the table.
UNFINISHED_COPY = """
CREATE TABLE IF NOT EXISTS unfinished_copy(
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    source TEXT NOT NULL
);
"""


# Schema 11 of SQLite, 7 of PostgreSQL (ADR-0060): the rows a prompt file may show, by section and
# recency (``rows.shown_rows_sql`` seeks it once per section), so rendering an owner's files reads a
# few rows however many the owner holds; and the agent's standing rules, which every owner's
# MEMORY.md shows (``queries.AGENT_RULES_SQL`` names its very terms), read without a walk over the
# agent's rows. ``IF NOT EXISTS``: a file whose version was set back keeps its indexes.
SHOWN_ROWS_INDEXES = """
CREATE INDEX IF NOT EXISTS memories_shown ON memories(agent_id, owner_id, promote_target, category, updated_at, id)
    WHERE archived_at IS NULL AND scope_type <> 'job';
CREATE INDEX IF NOT EXISTS memories_agent_rules ON memories(agent_id, id)
    WHERE scope_type = 'agent' AND category = 'directive' AND promote_target = 'memory_md' AND archived_at IS NULL;
"""
