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
    "SELECT t, CASE WHEN t = 'text' THEN k ELSE (SELECT payload FROM events AS e WHERE e.position = p) END FROM"
    f" (SELECT json_type(payload, '$.metadata.{IMPORT_KEY}') AS t, json_extract(payload, '$.metadata.{IMPORT_KEY}')"
    f" AS k, position AS p FROM events WHERE stream = ? AND {IMPORT_KEYED})"
)


def stored_import_keys(sql: str, string_type: str) -> ImportKeyReader:
    """A reader giving what :func:`recorded_import_keys` gives, by ``sql`` (see above), whose
    first column says ``string_type`` for a string key."""

    def read(tx: WriteTransaction, stream: str) -> set[str]:
        if not isinstance(tx, SqliteTransaction):
            return recorded_import_keys(tx, stream)
        tx.enter(stream)
        keys = set()
        for kind, value in tx.cursor.execute(sql, (stream,)).fetchall():
            if kind == string_type:
                keys.add(str(value))
            else:
                keys.add(str(json.loads(str(value))["metadata"][IMPORT_KEY]))
        return keys

    return read


sqlite_import_keys = stored_import_keys(SQLITE_IMPORT_KEYS, "text")
