"""PostgreSQL's reading of the import keys a conversation holds (see ``adapters.sql.import_keys``)."""

from __future__ import annotations

import functools

from fermix_memory.adapters.sql.import_keys import stored_import_keys

# From the index ``events_import_keys`` (ADR-0041); the payload is read only for a key that is
# not a string (a retracted message's key: ``sql.import_keys.live_messages``, ADR-0102). ``json``,
# not ``jsonb``, in the columns: it keeps any text a payload holds (jsonb refuses ``\u0000``).
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

_ONE_KEY = "import_key = ?"
if POSTGRES_IMPORT_KEY.count(_ONE_KEY) != 1:  # pragma: no cover - caught at import
    raise RuntimeError("the statement of one key must compare the key once")
# Keys read by one statement: each count is a statement prepared on a connection (ADR-0099), so
# few counts; a batch of appends holds a few keys, an import reads its lines' keys 16 at a time.
KEYS_AT_ONCE = 16


@functools.lru_cache(maxsize=KEYS_AT_ONCE)
def postgres_import_keys_among(count: int) -> str:
    """The statement of :data:`POSTGRES_IMPORT_KEY` for ``count`` keys at once, in one round trip
    rather than one each: the same seeks of the index, by each key. Parameters: the stream, the
    ``count`` keys, the stream."""
    return POSTGRES_IMPORT_KEY.replace(_ONE_KEY, f"import_key IN ({', '.join('?' * count)})")


read_import_keys = stored_import_keys(POSTGRES_IMPORT_KEYS, POSTGRES_IMPORT_KEY, "string",
                                      postgres_import_keys_among, KEYS_AT_ONCE)
