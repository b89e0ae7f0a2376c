"""A small deterministic embedder for tests: each word (or the concept a few words share) is one
hashed dimension, so texts that share words or concepts are close. The real model has its own
tests (test_embedder.py)."""

from __future__ import annotations

import math
import re
import struct
import zlib
from collections.abc import Sequence

# Words that mean one thing: what lets the fake bridge words as a real model does.
CONCEPTS = {"live": "home", "lives": "home", "living": "home", "home": "home", "city": "home", "town": "home",
            "reside": "home", "drink": "drink", "drinks": "drink", "beverage": "drink", "tea": "drink"}
STOP = {"the", "a", "does", "do", "where", "what", "is", "of", "to", "user"}


class ConceptEmbedder:
    model = "fake-concepts"
    dimension = 64

    def __init__(self, version: str = "1") -> None:
        self.version = version
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        self.calls.append(list(texts))
        return [self.vector(text) for text in texts]

    def vector(self, text: str) -> bytes:
        numbers = [0.0] * self.dimension
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            if word not in STOP:
                numbers[zlib.crc32(CONCEPTS.get(word, word).encode()) % self.dimension] += 1.0
        norm = math.sqrt(sum(x * x for x in numbers)) or 1.0
        return struct.pack(f"<{self.dimension}f", *(x / norm for x in numbers))
