"""The import keys a conversation holds (ADR-0050), read the way each store reads them: the same
keys and positions on every store, a redacted or retracted message's key left out (ADR-0102)."""

from __future__ import annotations

import attrs
import pytest

from fermix_memory.application.history import ImportKeyReader, recorded_import_keys
from fermix_memory.application.streams import conversation_stream
from fermix_memory.domain import events as ev
from tests.contract.conftest import AT, CHAT, Ports, message, provenance

STREAM = conversation_stream("ada", CHAT)


def reader_of(ports: Ports) -> ImportKeyReader:
    """The reader the store's home wires (``entrypoints/storage.py``): its own SQL, or the walk."""
    kind = type(ports.store).__name__
    if kind == "SqliteEventStore":
        from fermix_memory.adapters.sqlite.import_keys import read_import_keys
        return read_import_keys
    if kind == "PostgresEventStore":
        from fermix_memory.adapters.postgres.import_keys import read_import_keys as read_postgres
        return read_postgres
    return recorded_import_keys


def keyed(key: object, content: str) -> ev.MessageAppended:
    return attrs.evolve(message(content), metadata={"fermix_import_key": key})


def test_keys_of_live_messages_only_the_first_holder_of_each(ports: Ports) -> None:
    read = reader_of(ports)
    [a, b, c, d] = ports.append(STREAM, keyed("k-1", "one"), keyed("k-2", "two"), message("no key"),
                                keyed("k-1", "one again"))
    assert ports.write(lambda tx: read(tx, STREAM)) == {"k-1": a, "k-2": b}
    ports.append(STREAM, ev.MessageRetracted(at=AT, agent_id="ada", owner_id="alice", conversation=CHAT,
                                             message_id=a, provenance=provenance()))
    assert ports.write(lambda tx: read(tx, STREAM)) == {"k-1": d, "k-2": b}, "the retracted holder leaves its key"
    assert ports.write(lambda tx: read(tx, STREAM, "k-1")) == {"k-1": d}
    assert ports.write(lambda tx: read(tx, STREAM, ("k-2", "k-3"))) == {"k-2": b}
    assert c not in ports.write(lambda tx: read(tx, STREAM)).values()


@pytest.mark.parametrize("key", [7, True, None, {"id": 1}])
def test_a_key_that_is_not_text_reads_as_text_until_its_message_is_retracted(ports: Ports, key: object) -> None:
    read = reader_of(ports)
    [held] = ports.append(STREAM, keyed(key, "odd key"))
    assert ports.write(lambda tx: read(tx, STREAM)) == {str(key): held}
    ports.append(STREAM, ev.MessageRetracted(at=AT, agent_id="ada", owner_id="alice", conversation=CHAT,
                                             message_id=held, provenance=provenance()))
    assert ports.write(lambda tx: read(tx, STREAM)) == {}


def test_many_keys_found_at_once_are_each_checked(ports: Ports) -> None:
    """More found keys than one statement asks about (PostgreSQL's 16, in chunks padded to a
    power of two): each key's holder is checked, the retracted ones left out."""
    read = reader_of(ports)
    positions = ports.append(STREAM, *(keyed(f"k-{n}", f"message {n}") for n in range(37)))
    newest = positions[-1]
    ports.append(STREAM, ev.MessageRetracted(at=AT, agent_id="ada", owner_id="alice", conversation=CHAT,
                                             message_id=newest, provenance=provenance()))
    expected = {f"k-{n}": at for n, at in enumerate(positions[:-1])}
    assert ports.write(lambda tx: read(tx, STREAM)) == expected
    asked = tuple(f"k-{n}" for n in range(40))
    assert ports.write(lambda tx: read(tx, STREAM, asked)) == expected
