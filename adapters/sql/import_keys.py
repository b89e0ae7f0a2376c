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
from collections.abc import Callable, Iterator

from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.application.history import ImportKeyReader, recorded_import_keys
from fermix_memory.application.message_input import IMPORT_KEY
from fermix_memory.application.store_ports import WriteTransaction

# The most keys one statement reads (well below any driver's limit on parameters).
KEYS_PER_STATEMENT = 500
# The condition that the message of an ``events`` row holding a key is still there: a retracted
# message's row is gone (its event stays), and its key is free again (ADR-0102). A message's id is
# its event's position.
LIVE_MESSAGE = "EXISTS (SELECT 1 FROM messages AS m WHERE m.id = events.position)"


def stored_import_keys(sql: str, sql_one: str, string_type: str,
                       sql_among: Callable[[int], str] | None = None,
                       keys_per_statement: int = KEYS_PER_STATEMENT) -> ImportKeyReader:
    """A reader giving what :func:`recorded_import_keys` gives, by ``sql`` (see above; ``sql_one``
    for one key, with the stream, the key and the stream as parameters), whose first column says
    ``string_type`` for a string key. ``sql_among(n)``: the statement of ``sql_one`` for ``n``
    keys at once (the stream, the keys, the stream; ``n`` at most ``keys_per_statement``), where
    the dialect has one; else several keys are read by ``sql_one`` each."""

    def statements(stream: str, only: str | tuple[str, ...] | None) -> Iterator[tuple[str, tuple[str, ...]]]:
        if only is None:
            yield sql, (stream,)
        elif isinstance(only, str):
            yield sql_one, (stream, only, stream)
        elif sql_among is None:
            yield from ((sql_one, (stream, key, stream)) for key in only)
        else:
            for start in range(0, len(only), keys_per_statement):
                some = only[start:start + keys_per_statement]
                yield sql_among(len(some)), (stream, *some, stream)

    def read(tx: WriteTransaction, stream: str, only: str | tuple[str, ...] | None = None) -> dict[str, int]:
        if not isinstance(tx, SqlTransaction):
            return recorded_import_keys(tx, stream, only)
        if only == ():
            return {}
        tx.enter(stream)
        keys: dict[str, int] = {}
        wanted = None if only is None else {only} if isinstance(only, str) else set(only)
        for statement, parameters in statements(stream, only):
            for kind, value, position in tx.cursor.execute(statement, parameters).fetchall():
                key = str(value) if kind == string_type else str(json.loads(str(value))["metadata"][IMPORT_KEY])
                at = int(str(position))
                if wanted is None or key in wanted:
                    keys[key] = min(at, keys.get(key, at))
        return keys

    return read
