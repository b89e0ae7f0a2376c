"""Packed vectors of the embedder port (ADR-0042): float32, little-endian, cosine by dot product."""

from __future__ import annotations

import struct

import pytest

from fermix_memory.application.embedder import similarity, unpack


def _pack(*numbers: float) -> bytes:
    return struct.pack(f"<{len(numbers)}f", *numbers)


def test_a_packed_vector_is_little_endian_float32() -> None:
    assert _pack(1.0, -0.5) == b"\x00\x00\x80\x3f\x00\x00\x00\xbf"
    assert unpack(_pack(0.25, 0.5, -1.0)) == (0.25, 0.5, -1.0)


def test_similarity_of_unit_vectors_is_their_dot_product() -> None:
    assert similarity(_pack(1.0, 0.0), _pack(1.0, 0.0)) == 1.0
    assert similarity(_pack(1.0, 0.0), _pack(0.0, 1.0)) == 0.0
    assert similarity(_pack(0.6, 0.8), _pack(0.8, 0.6)) == pytest.approx(0.96)


def test_vectors_of_different_dimensions_are_refused() -> None:
    with pytest.raises(ValueError, match="different dimensions"):
        similarity(_pack(1.0), _pack(1.0, 0.0))
