"""The embedder port: turns texts into vectors whose closeness is closeness of meaning.

Recall by meaning (ADR-0042) is optional: the model and its runtime come with the
``[semantic]`` extra, and a core install has no embedder at all. A vector is ``dimension``
float32 numbers, little-endian, packed as ``bytes`` (what a store keeps in a BLOB), of unit
length, so the cosine of two vectors is their dot product. Vectors of two embedders are
comparable only when their :attr:`Embedder.label` is the same: the label names the model and the
exact version of its weights, and a store keeps it beside every vector so that a changed model
re-embeds instead of mixing two spaces.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Protocol

FLOAT32 = struct.Struct("<f")


class Embedder(Protocol):
    @property
    def model(self) -> str:
        """The model's name, e.g. ``all-MiniLM-L6-v2``."""
        ...

    @property
    def version(self) -> str:
        """Names the exact weights and their packaging (changes when the vectors would)."""
        ...

    @property
    def dimension(self) -> int:
        """How many float32 numbers one vector holds."""
        ...

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        """One unit-length vector per text, in order, each ``dimension`` little-endian float32
        numbers packed as bytes. An empty text gets a vector too."""
        ...


def label_of(embedder: Embedder) -> str:
    """What a store keeps beside a vector: ``<model>@<version>``."""
    return f"{embedder.model}@{embedder.version}"


def unpack(vector: bytes) -> tuple[float, ...]:
    """The numbers of a packed vector."""
    return struct.unpack(f"<{len(vector) // FLOAT32.size}f", vector)


def similarity(a: bytes, b: bytes) -> float:
    """The cosine similarity of two packed unit vectors of the same embedder (their dot product)."""
    if len(a) != len(b):
        raise ValueError(f"vectors of different dimensions: {len(a) // 4} and {len(b) // 4}")
    return math.fsum(x * y for x, y in zip(unpack(a), unpack(b), strict=True))
