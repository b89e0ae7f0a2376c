"""PostgreSQL's reading of the import keys a conversation holds (see ``adapters.sql.import_keys``)."""

from __future__ import annotations

from fermix_memory.adapters.sql.import_keys import stored_import_keys

# From the index ``events_import_keys`` (ADR-0041); the payload is read only for a key that is
# not a string. ``json``, not ``jsonb``, in the columns: it keeps any text a payload holds
# (jsonb refuses ``\u0000``).
POSTGRES_IMPORT_KEYS = (
    "SELECT import_key_type, CASE WHEN import_key_type = 'string' THEN import_key"
    " ELSE (SELECT payload FROM events AS e WHERE e.position = s.position) END, position"
    " FROM events AS s WHERE stream = ? AND import_key_type IS NOT NULL"
)
# One key (an idempotent append): the string keys equal to it, then any key that is not a string
# (seeks of the index ordered by type and key within a stream). Parameters: stream, key, stream.
POSTGRES_IMPORT_KEY = (
    "SELECT import_key_type, import_key, position FROM events"
    " WHERE stream = ? AND import_key_type = 'string' AND import_key = ?"
    " UNION ALL SELECT import_key_type, payload, position FROM events WHERE stream = ?"
    " AND import_key_type IN ('number', 'boolean', 'null', 'object', 'array')"
)

read_import_keys = stored_import_keys(POSTGRES_IMPORT_KEYS, POSTGRES_IMPORT_KEY, "string")
