"""The import keys a conversation already holds, read from the stored payloads (ADR-0037).

``history import`` skips a line whose import key its conversation already holds. Reading the
keys by decoding every earlier event of the stream into its domain class costs more than the
import itself once a conversation is long; the same keys come from the ``message.appended``
payloads with one ``json.loads`` each. PostgreSQL's transaction is a SQLite transaction over a
placeholder-converting cursor, so the one statement serves both stores.
"""

from __future__ import annotations

import json

from fermix_memory.adapters.sqlite.transaction import SqliteTransaction
from fermix_memory.application.history import IMPORT_KEY, recorded_import_keys
from fermix_memory.application.ports import WriteTransaction
from fermix_memory.domain.conversation_events import MessageAppended

# Redacted payloads are NULL: their messages are gone, and so are their keys.
STREAM_MESSAGE_PAYLOADS = (
    f"SELECT payload FROM events WHERE stream = ? AND kind = '{MessageAppended.kind}' AND payload IS NOT NULL"
)


def stored_import_keys(tx: WriteTransaction, stream: str) -> set[str]:
    """What :func:`recorded_import_keys` gives, without structuring each event."""
    if not isinstance(tx, SqliteTransaction):
        return recorded_import_keys(tx, stream)
    tx.enter(stream)
    keys = set()
    for (payload,) in tx.cursor.execute(STREAM_MESSAGE_PAYLOADS, (stream,)).fetchall():
        metadata = json.loads(str(payload)).get("metadata")
        if isinstance(metadata, dict) and IMPORT_KEY in metadata:
            keys.add(str(metadata[IMPORT_KEY]))
    return keys
