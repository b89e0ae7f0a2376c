"""The import keys a conversation already holds, read from the stored payloads (ADR-0037).

``history import`` skips a line whose import key its conversation already holds. Reading the
keys by decoding every earlier event of the stream into its domain class costs more than the
import itself once a conversation is long; the database's own JSON functions give the same keys.
Each dialect says how, in one statement giving, for each readable ``message.appended`` payload of
the stream whose metadata holds the key, the key's JSON type and, when it is a string, the
string, else the whole payload (an unusual key, given in an appended message's metadata, is read
as the generic reading reads it); :func:`stored_import_keys` reads it inside a write.
"""

from __future__ import annotations

import json

from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.application.history import ImportKeyReader, recorded_import_keys
from fermix_memory.application.message_input import IMPORT_KEY
from fermix_memory.application.store_ports import WriteTransaction


def stored_import_keys(sql: str, sql_one: str, string_type: str) -> ImportKeyReader:
    """A reader giving what :func:`recorded_import_keys` gives, by ``sql`` (see above; ``sql_one``
    for one key, with the stream, the key and the stream as parameters), whose first column says
    ``string_type`` for a string key."""

    def read(tx: WriteTransaction, stream: str, only: str | None = None) -> dict[str, int]:
        if not isinstance(tx, SqlTransaction):
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
