"""SQLite's reading of the import keys a conversation holds (ADR-0037; see ``adapters.sql.import_keys``):
from the stored payloads by SQLite's JSON functions."""

from __future__ import annotations

import functools

from fermix_memory.adapters.sql.import_keys import stored_import_keys
from fermix_memory.adapters.sqlite.migrations import IMPORT_KEYED
from fermix_memory.application.message_input import IMPORT_KEY

# The keys come from the index ``events_import_keys`` alone (its condition repeated, so that the
# query uses it; ADR-0041); the payload is read only for a key that is not a string. Redacted
# payloads are NULL: their messages are gone, and so are their keys (a retracted message's key:
# ``sql.import_keys.live_messages``, ADR-0102).
SQLITE_IMPORT_KEYS = (
    "SELECT t, CASE WHEN t = 'text' THEN k ELSE (SELECT payload FROM events AS e WHERE e.position = p) END, p FROM"
    f" (SELECT json_type(payload, '$.metadata.{IMPORT_KEY}') AS t, json_extract(payload, '$.metadata.{IMPORT_KEY}')"
    f" AS k, position AS p FROM events WHERE stream = ? AND {IMPORT_KEYED})"
)
# One key (an idempotent append): the string keys equal to it, then any key that is not a string
# (both seeks of the index, which is ordered by type and key within a stream). Parameters: the
# stream, the key, the stream.
_KEY_TYPE = f"json_type(payload, '$.metadata.{IMPORT_KEY}')"
SQLITE_IMPORT_KEY = (
    f"SELECT 'text', json_extract(payload, '$.metadata.{IMPORT_KEY}'), position FROM events"
    f" WHERE stream = ? AND {IMPORT_KEYED} AND {_KEY_TYPE} = 'text'"
    f" AND json_extract(payload, '$.metadata.{IMPORT_KEY}') = ?"
    f" UNION ALL SELECT {_KEY_TYPE}, payload, position FROM events WHERE stream = ? AND {IMPORT_KEYED}"
    f" AND {_KEY_TYPE} IN ('integer', 'real', 'true', 'false', 'null', 'object', 'array')"
)

_ONE_KEY = f"json_extract(payload, '$.metadata.{IMPORT_KEY}') = ?"
if SQLITE_IMPORT_KEY.count(_ONE_KEY) != 1:  # pragma: no cover - caught at import
    raise RuntimeError("the statement of one key must compare the key once")


@functools.lru_cache(maxsize=64)
def sqlite_import_keys_among(count: int) -> str:
    """The statement of :data:`SQLITE_IMPORT_KEY` for ``count`` keys at once (the keys of one
    batch of appends, read in one statement): the same seeks of the index, by each key.
    Parameters: the stream, the ``count`` keys, the stream."""
    return SQLITE_IMPORT_KEY.replace(_ONE_KEY, _ONE_KEY[:-3] + f"IN ({', '.join('?' * count)})")


read_import_keys = stored_import_keys(SQLITE_IMPORT_KEYS, SQLITE_IMPORT_KEY, "text", sqlite_import_keys_among)
