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
# Which of some messages are still there (a message's id is its event's position): a retracted
# message's row is gone while its event stays, and its key is free again (ADR-0102). Asked only
# of the messages found holding a key (rare: an append retried), so an append whose keys are new
# costs nothing more; the ids are padded to a power of two, so that few statements are prepared.
_LIVE_MESSAGES = "SELECT id FROM messages WHERE id IN ({})"


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
        held: list[tuple[str, int]] = []
        wanted = None if only is None else {only} if isinstance(only, str) else set(only)
        for statement, parameters in statements(stream, only):
            for kind, value, position in tx.cursor.execute(statement, parameters).fetchall():
                key = str(value) if kind == string_type else str(json.loads(str(value))["metadata"][IMPORT_KEY])
                if wanted is None or key in wanted:
                    held.append((key, int(str(position))))
        if not held:
            return {}
        live = live_messages(tx, sorted({at for _, at in held}), keys_per_statement)
        keys: dict[str, int] = {}
        for key, at in held:
            if at in live:
                keys[key] = min(at, keys.get(key, at))
        return keys

    return read


def live_messages(tx: SqlTransaction, ids: list[int], per_statement: int) -> set[int]:
    """Those of ``ids`` whose message rows are there (not retracted), at most ``per_statement``
    ids a statement."""
    live: set[int] = set()
    for start in range(0, len(ids), per_statement):
        some = ids[start:start + per_statement]
        size = min(per_statement, 1 << (len(some) - 1).bit_length())
        padded = some + some[-1:] * (size - len(some))
        rows = tx.cursor.execute(_LIVE_MESSAGES.format(", ".join("?" * size)), padded).fetchall()
        live.update(int(str(row[0])) for row in rows)
    return live
