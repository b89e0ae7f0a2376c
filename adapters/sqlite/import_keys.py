"""The import keys a conversation already holds, read from the stored payloads (ADR-0037).

``history import`` skips a line whose import key its conversation already holds. Reading the
keys by decoding every earlier event of the stream into its domain class costs more than the
import itself once a conversation is long; the database's own JSON functions give the same keys.
Each store says how (:data:`SQLITE_IMPORT_KEYS`, PostgreSQL's in ``adapters.postgres``): one
statement giving, for each readable ``message.appended`` payload of the stream whose metadata
holds the key, the key's JSON type and, when it is a string, the string, else the whole payload
(an unusual key, given in an appended message's metadata, is read as the generic reading reads
it). PostgreSQL's transaction is a SQLite transaction over a placeholder-converting cursor.
"""

from __future__ import annotations

import json

from fermix_memory.adapters.sqlite.migrations import IMPORT_KEYED
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction
from fermix_memory.application.history import IMPORT_KEY, ImportKeyReader, recorded_import_keys
from fermix_memory.application.ports import WriteTransaction

# The keys come from the index ``events_import_keys`` alone (its condition repeated, so that the
# query uses it; ADR-0041); the payload is read only for a key that is not a string. Redacted
# payloads are NULL: their messages are gone, and so are their keys.
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


def stored_import_keys(sql: str, sql_one: str, string_type: str) -> ImportKeyReader:
    """A reader giving what :func:`recorded_import_keys` gives, by ``sql`` (see above; ``sql_one``
    for one key, with the stream, the key and the stream as parameters), whose first column says
    ``string_type`` for a string key."""

    def read(tx: WriteTransaction, stream: str, only: str | None = None) -> dict[str, int]:
        if not isinstance(tx, SqliteTransaction):
            return recorded_import_keys(tx, stream, only)
        tx.enter(stream)
        keys: dict[str, int] = {}
        rows = (tx.cursor.execute(sql, (stream,)) if only is None
                else tx.cursor.execute(sql_one, (stream, only, stream)))
        for kind, value, position in rows.fetchall():
            key = str(value) if kind == string_type else str(json.loads(str(value))["metadata"][IMPORT_KEY])
            at = int(str(position))
            if only is None or key == only:
                keys[key] = min(at, keys.get(key, at))
        return keys

    return read


sqlite_import_keys = stored_import_keys(SQLITE_IMPORT_KEYS, SQLITE_IMPORT_KEY, "text")
