"""Schema 11, as SQLite's 16 (ADR-0086): the count a reader that keeps a scope's memory-row
vectors checks. ``vector_changes.memory_changes`` moves whenever a memory row's vector comes, goes
or changes, and whenever a row moves in or out of what a search by meaning reads (archived or
brought back, or its agent, owner or scope changed). Rows are few beside messages, so any change
empties what is kept.
"""

from __future__ import annotations

MEMORY_VECTOR_CHANGES = """
ALTER TABLE vector_changes ADD COLUMN IF NOT EXISTS memory_changes BIGINT NOT NULL DEFAULT 0;
CREATE OR REPLACE FUNCTION memory_vectors_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE vector_changes SET memory_changes = memory_changes + 1 WHERE id = 1;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_vectors_changes ON memory_vectors;
DROP TRIGGER IF EXISTS memories_searched_otherwise ON memories;
CREATE TRIGGER memory_vectors_changes AFTER INSERT OR UPDATE OR DELETE ON memory_vectors
    FOR EACH ROW EXECUTE FUNCTION memory_vectors_changes();
CREATE TRIGGER memories_searched_otherwise AFTER UPDATE OF archived_at, agent_id, owner_id, scope_type, scope_id
    ON memories FOR EACH ROW WHEN (OLD.archived_at IS DISTINCT FROM NEW.archived_at
        OR OLD.agent_id IS DISTINCT FROM NEW.agent_id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
        OR OLD.scope_type IS DISTINCT FROM NEW.scope_type OR OLD.scope_id IS DISTINCT FROM NEW.scope_id)
    EXECUTE FUNCTION memory_vectors_changes();
"""
