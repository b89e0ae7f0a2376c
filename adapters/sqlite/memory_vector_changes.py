"""Schema 16 (ADR-0086): the count a reader that keeps a scope's memory-row vectors checks.

``vector_changes.memory_changes`` moves whenever a memory row's vector comes, goes or changes, and
whenever a row moves in or out of what a search by meaning reads (archived or brought back, or
its agent, owner or scope changed): a kept matrix of a scope's row vectors is right only under
the count it was read at. Rows are few beside messages, so any change empties what is kept.
"""

from __future__ import annotations

from fermix_memory.adapters.sql.cursor import SqlCursor

_BUMP = "UPDATE vector_changes SET memory_changes = memory_changes + 1 WHERE id = 1;"

# SQLite has no ``ADD COLUMN IF NOT EXISTS``: the column and its triggers come from
# ``add_memory_changes`` (the migration's Python step), so a file whose version was set back keeps
# the column it has.
MEMORY_VECTOR_CHANGES = "-- vector_changes.memory_changes: added by AFTER_MIGRATION[16]"

_TRIGGERS = f"""
DROP TRIGGER IF EXISTS memory_vectors_added;
DROP TRIGGER IF EXISTS memory_vectors_changed;
DROP TRIGGER IF EXISTS memory_vectors_removed;
DROP TRIGGER IF EXISTS memories_searched_otherwise;
CREATE TRIGGER memory_vectors_added AFTER INSERT ON memory_vectors BEGIN {_BUMP} END;
CREATE TRIGGER memory_vectors_changed AFTER UPDATE ON memory_vectors BEGIN {_BUMP} END;
CREATE TRIGGER memory_vectors_removed AFTER DELETE ON memory_vectors BEGIN {_BUMP} END;
CREATE TRIGGER memories_searched_otherwise AFTER UPDATE OF archived_at, agent_id, owner_id, scope_type, scope_id
ON memories WHEN old.archived_at IS NOT new.archived_at OR old.agent_id IS NOT new.agent_id
    OR old.owner_id IS NOT new.owner_id OR old.scope_type IS NOT new.scope_type OR old.scope_id IS NOT new.scope_id
BEGIN {_BUMP} END;
"""


def add_memory_changes(cur: SqlCursor) -> None:
    """The count's column where it is missing, then its triggers (dropped first)."""
    columns = {str(row[1]) for row in cur.execute("PRAGMA table_info(vector_changes)")}
    if "memory_changes" not in columns:
        cur.execute("ALTER TABLE vector_changes ADD COLUMN memory_changes INTEGER NOT NULL DEFAULT 0")
    cur.execute(_TRIGGERS)
