"""PostgreSQL's reading of the import keys a conversation holds (see ``adapters.sqlite.import_keys``)."""

from __future__ import annotations

from fermix_memory.adapters.sqlite.import_keys import stored_import_keys
from fermix_memory.application.history import IMPORT_KEY
from fermix_memory.domain.conversation_events import MessageAppended

# ``json``, not ``jsonb``: it keeps any text a payload holds (jsonb refuses ``\u0000``).
POSTGRES_IMPORT_KEYS = (
    "SELECT json_typeof(k), CASE WHEN json_typeof(k) = 'string' THEN k #>> '{}' ELSE payload END"
    f" FROM (SELECT payload, payload::json -> 'metadata' -> '{IMPORT_KEY}' AS k FROM events"
    f" WHERE stream = ? AND kind = '{MessageAppended.kind}' AND payload IS NOT NULL) AS s WHERE k IS NOT NULL"
)

postgres_import_keys = stored_import_keys(POSTGRES_IMPORT_KEYS, "string")
