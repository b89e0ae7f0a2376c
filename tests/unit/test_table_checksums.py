"""A projection table's checksum is the SHA-256 of its rows, each the JSON text of its values
(bytes as ``{"hex": ...}``, floats as their ``repr``), one per line: the same on every store and
in every version, since a replay compares checksums taken by two processes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.adapters.sql.audit import rows_checksum


def by_definition(rows: list[tuple[Any, ...]]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        values = [{"hex": v.hex()} if isinstance(v, bytes) else repr(v) if isinstance(v, float) else v for v in row]
        digest.update(json.dumps(values, ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()


VALUES = st.one_of(st.none(), st.integers(), st.text(), st.binary(max_size=8), st.floats(allow_nan=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(VALUES, VALUES, VALUES) | st.tuples(st.text(), st.integers(), st.none())))
def test_the_checksum_of_any_rows_is_the_defined_one(rows: list[tuple[Any, ...]]) -> None:
    assert rows_checksum(rows) == by_definition(rows)


def test_a_known_table_keeps_its_checksum() -> None:
    rows = [(1, "ada", "Zoë \u2028", None), (2, "b", b"\x00\xff", 0.5)]
    assert rows_checksum(rows) == by_definition(rows)
    assert rows_checksum([]) == hashlib.sha256().hexdigest()
