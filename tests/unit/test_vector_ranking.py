"""A search by meaning's ranking (``adapters/sql/vectors.py``): every vector, most similar first,
ties to the greater id (the newer row); the ``n`` best are the first ``n`` of that whole ranking,
a limit cutting inside a tie as the whole ranking cuts it. Vectors repeat, so ties abound."""

from __future__ import annotations

import numpy as np

from fermix_memory.adapters.sql.vectors import _best
from fermix_memory.application.embedder import similarity


def test_the_best_are_the_head_of_the_whole_ranking_most_similar_then_newest_first() -> None:
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(300):
        count = int(rng.integers(1, 700))
        dimension = int(rng.choice([4, 16, 384]))
        distinct = rng.standard_normal((max(1, count // int(rng.integers(1, 6))), dimension)).astype("<f4")
        matrix = distinct[rng.integers(0, len(distinct), count)]
        ids = rng.permutation(np.arange(1, 10 * count + 1))[:count].astype(np.int64)
        query = rng.standard_normal(dimension).astype("<f4").tobytes()
        whole = _best(query, ids, count, matrix=matrix)
        assert sorted(i for i, _ in whole) == sorted(ids.tolist())
        assert whole == sorted(whole, key=lambda hit: (-hit[1], -hit[0]))
        assert all(type(i) is int and type(score) is float for i, score in whole)
        by_id = dict(zip(ids.tolist(), matrix, strict=True))
        assert all(abs(score - similarity(query, by_id[i].tobytes())) < 1e-4 for i, score in whole)
        for n in (1, 3, 10, 40, count + 5):
            assert _best(query, ids, n, matrix=matrix) == whole[:n]
            checked += 1
    assert checked == 1500
