"""What a recall by meaning runs after the query's vector arrives, in fewer steps, pinned equal to
the general path: a memory row built through its slots (``memory_from_row``) equals one built by
``Memory(...)``; a small scope sorted whole ranks as the pick-then-sort path does; a query's vector
pooled in fewer numpy calls has the same bytes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fermix_memory.adapters.embedding.minilm_onnx import _pooled, pooled_query
from fermix_memory.adapters.sql import vectors
from fermix_memory.adapters.sql.rows import MEMORY_FIELDS, memory_from_row, memory_of_values
from fermix_memory.adapters.sql.vectors import _best
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType

_TIMES = (None, "2026-01-02T03:04:05+00:00", "2025-12-31T23:59:59.123456+00:00")


def _row(**values: object) -> tuple[object, ...]:
    base: dict[str, object] = {
        "id": 7, "agent_id": "a", "owner_id": "o", "scope_type": "owner", "scope_id": "", "category": "goal",
        "key": "home_city", "value": "Lyon", "confidence": 0.75, "promote_target": None, "source_id": "s",
        "source_type": "t", "source_name": "n", "source_description": "d", "session_id": "", "run_id": "r",
        "source_message_id": None, "archived_at": None, "archived_by": None, "archive_reason": None,
        "created_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:01+00:00", "expires_at": None}
    base.update(values)
    return tuple(base[name] for name in MEMORY_FIELDS)


def test_a_memory_row_built_through_its_slots_equals_one_built_by_memory() -> None:
    built = 0
    for scope, category, target, archived, expires in itertools.product(
            ScopeType, Category, (None, *PromoteTarget), _TIMES, _TIMES):
        row = _row(scope_type=str(scope), category=str(category),
                   promote_target=None if target is None else str(target),
                   archived_at=archived, expires_at=expires, archived_by=archived and "x", source_message_id=3)
        fast, general = memory_from_row(row), memory_of_values(row)
        assert fast == general and hash(fast) == hash(general) and repr(fast) == repr(general)
        assert [type(getattr(fast, f)) for f in MEMORY_FIELDS] == [type(getattr(general, f)) for f in MEMORY_FIELDS]
        built += 1
    assert built == len(ScopeType) * len(Category) * (len(PromoteTarget) + 1) * len(_TIMES) ** 2


@pytest.mark.parametrize("bad", [{"scope_type": "team"}, {"category": "fact"}, {"promote_target": "soul_md"},
                                 {"created_at": "yesterday"}, {"archived_at": "soon"}, {"expires_at": ""}])
def test_a_bad_column_fails_both_builders_alike(bad: dict[str, object]) -> None:
    for build in (memory_from_row, memory_of_values):
        with pytest.raises(ValueError):
            build(_row(**bad))
    with pytest.raises(ValueError):
        memory_from_row(_row()[:-1])


def test_a_scope_sorted_whole_ranks_as_picking_the_closest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        count = int(rng.integers(1, 300))
        distinct = rng.standard_normal((max(1, count // int(rng.integers(1, 6))), 16)).astype("<f4")
        matrix = distinct[rng.integers(0, len(distinct), count)]
        ids = rng.permutation(np.arange(1, 10 * count + 1))[:count].astype(np.int64)
        query = rng.standard_normal(16).astype("<f4").tobytes()
        for n in (1, 3, 10, 40, count, count + 5):
            monkeypatch.setattr(vectors, "_SORT_ALL_UP_TO", 10**9)
            whole = _best(query, ids, n, matrix=matrix)
            monkeypatch.setattr(vectors, "_SORT_ALL_UP_TO", 0)
            assert _best(query, ids, n, matrix=matrix) == whole


def test_a_query_pooled_in_fewer_steps_has_the_same_bytes() -> None:
    rng = np.random.default_rng(5)
    for tokens in (1, 2, 7, 12, 33, 128, 256):
        for scale in (1e-6, 1.0, 50.0):
            hidden = (rng.standard_normal((1, tokens, 384)) * scale).astype(np.float32)
            mask = np.ones((1, tokens), dtype=np.int64)
            assert pooled_query(hidden, mask).tobytes() == _pooled(hidden, mask).tobytes()
    hidden = np.zeros((1, 3, 384), dtype=np.float32)  # no norm at all: both keep the zeros
    assert pooled_query(hidden, np.ones((1, 3), dtype=np.int64)).tobytes() == _pooled(
        hidden, np.ones((1, 3), dtype=np.int64)).tobytes()
    padded = rng.standard_normal((2, 5, 384)).astype(np.float32)  # a batch, padding: the general path
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=np.int64)
    assert pooled_query(padded, mask).tobytes() == _pooled(padded, mask).tobytes()
