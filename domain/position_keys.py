"""A key per log position that can be destroyed one position at a time (ADR-0081): a puncturable
key tree (the GGM construction). Pure.

A binary tree of depth :data:`DEPTH` spans the log's positions; each node holds a 32-byte seed,
its children's seeds are ``HMAC-SHA256(seed, 0x00)`` and ``HMAC-SHA256(seed, 0x01)``, and the
leaf of position ``p`` (the path that reads ``p``'s bits from the highest) is ``p``'s key. A
:class:`Cover` is the set of nodes whose subtrees are intact: at first the root alone. To
puncture positions, each node covering some of them is replaced by the siblings along the paths
down to them; the seeds of the punctured leaves and of every node above them are then gone, and
no seed kept derives them (HMAC cannot be run backwards). Puncturing ``k`` positions among ``n``
keeps about ``k * log2(n / k) + DEPTH`` nodes; neighbouring positions share their nodes.
"""

from __future__ import annotations

import hmac
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

import attrs

from fermix_memory.domain.errors import DomainError

DEPTH = 40  # positions 0 .. 2**40 - 1
SEED_BYTES = 32
NODE_BYTES = 1 + 5 + SEED_BYTES  # depth, prefix (40 bits), seed
LIMIT = 1 << DEPTH
_BITS = (b"\x00", b"\x01")


class BadCover(DomainError):
    """Bytes that are not a cover: a node out of the tree, nodes overlapping, a cut record."""


@attrs.frozen
class Node:
    """The node at ``depth`` whose path from the root reads ``prefix`` (its ``depth`` high bits)."""

    depth: int
    prefix: int
    seed: bytes = attrs.field(repr=False)

    @property
    def first(self) -> int:
        """The first position of its subtree."""
        return self.prefix << (DEPTH - self.depth)

    @property
    def end(self) -> int:
        """The position after the last of its subtree."""
        return (self.prefix + 1) << (DEPTH - self.depth)


@attrs.frozen
class Cover:
    """The intact nodes, in position order (their subtrees never overlap)."""

    nodes: tuple[Node, ...]

    @classmethod
    def whole(cls, seed: bytes) -> Cover:
        """The tree of ``seed`` with nothing punctured (the root alone)."""
        if len(seed) != SEED_BYTES:
            raise ValueError(f"a root seed is {SEED_BYTES} bytes")
        return cls((Node(0, 0, seed),))

    def covering(self, position: int) -> Node | None:
        """The node whose subtree holds ``position``; ``None`` once it is punctured."""
        return _covering(self.nodes, [n.first for n in self.nodes], position)


def _covering(nodes: tuple[Node, ...], firsts: list[int], position: int) -> Node | None:
    at = bisect_right(firsts, position) - 1
    if at < 0 or position >= nodes[at].end:
        return None
    return nodes[at]


def held(cover: Cover, positions: Iterable[int]) -> list[int]:
    """The positions among ``positions`` that still have a key (sorted, each once)."""
    firsts = [n.first for n in cover.nodes]
    return [p for p in sorted({_check(p) for p in positions}) if _covering(cover.nodes, firsts, p) is not None]


def child(seed: bytes, bit: int) -> bytes:
    """The seed of a node's child on the ``bit`` side (0: left, 1: right)."""
    return hmac.digest(seed, _BITS[bit], "sha256")


def _check(position: int) -> int:
    if type(position) is not int or not 0 <= position < LIMIT:
        raise ValueError(f"a position of the key tree is a whole number from 0 to 2**{DEPTH} - 1, not {position!r}")
    return position


def _bit(position: int, depth: int) -> int:
    """The bit of ``position`` that chooses the child of a node at ``depth``."""
    return (position >> (DEPTH - 1 - depth)) & 1


def _down(node: Node, position: int) -> bytes:
    seed = node.seed
    for depth in range(node.depth, DEPTH):
        seed = child(seed, _bit(position, depth))
    return seed


def key_of(cover: Cover, position: int) -> bytes | None:
    """The key of ``position``; ``None`` when it is punctured."""
    node = cover.covering(_check(position))
    return None if node is None else _down(node, position)


class LeafKeys:
    """The keys of positions under one cover, for reading many of them in order: the seeds of the
    last path are kept, so the next position derives only below where its path parts from it (two
    steps on average for consecutive positions, instead of :data:`DEPTH`)."""

    def __init__(self, cover: Cover) -> None:
        self.cover = cover
        self._firsts = [n.first for n in cover.nodes]
        self._node: Node | None = None
        self._last = 0
        self._path: list[bytes] = []  # the seeds from the node (index 0) down to the last leaf

    def key_of(self, position: int) -> bytes | None:
        """As :func:`key_of`."""
        _check(position)
        node = self._node
        if node is None or not node.first <= position < node.end:
            node = _covering(self.cover.nodes, self._firsts, position)
            if node is None:
                return None
            self._node, self._path = node, [node.seed]
        else:
            shared = DEPTH - (self._last ^ position).bit_length()  # the deepest node both paths pass
            del self._path[shared - node.depth + 1:]
        for depth in range(node.depth + len(self._path) - 1, DEPTH):
            self._path.append(child(self._path[-1], _bit(position, depth)))
        self._last = position
        return self._path[-1]


def _split(node: Node, positions: list[int]) -> list[Node]:
    """The nodes left of ``node``'s subtree once ``positions`` (sorted, inside it, at least one)
    are punctured: for each child, itself when it holds none of them, else what is left of it."""
    if node.depth == DEPTH:
        return []
    middle = (2 * node.prefix + 1) << (DEPTH - node.depth - 1)
    cut = bisect_left(positions, middle)
    left = Node(node.depth + 1, 2 * node.prefix, child(node.seed, 0))
    right = Node(node.depth + 1, 2 * node.prefix + 1, child(node.seed, 1))
    return [*(_split(left, positions[:cut]) if cut else [left]),
            *(_split(right, positions[cut:]) if cut < len(positions) else [right])]


def puncture(cover: Cover, positions: Iterable[int]) -> Cover:
    """``cover`` without the keys of ``positions`` (those punctured already stay so)."""
    wanted = sorted({_check(p) for p in positions})
    kept: list[Node] = []
    for node in cover.nodes:
        inside = wanted[bisect_left(wanted, node.first):bisect_left(wanted, node.end)]
        kept += _split(node, inside) if inside else [node]
    return Cover(tuple(kept))


def cover_bytes(cover: Cover) -> bytes:
    """The cover as bytes: per node its depth (1 byte), prefix (5 bytes, big-endian) and seed."""
    return b"".join(bytes((n.depth,)) + n.prefix.to_bytes(5, "big") + n.seed for n in cover.nodes)


def parse_cover(data: bytes) -> Cover:
    """What :func:`cover_bytes` wrote; :class:`BadCover` when it is not a cover."""
    if len(data) % NODE_BYTES:
        raise BadCover(f"a cover is records of {NODE_BYTES} bytes, not {len(data)} bytes")
    nodes: list[Node] = []
    for at in range(0, len(data), NODE_BYTES):
        depth, prefix = data[at], int.from_bytes(data[at + 1:at + 6], "big")
        if depth > DEPTH or prefix >> depth:
            raise BadCover(f"node {at // NODE_BYTES} is not in a tree of depth {DEPTH}")
        node = Node(depth, prefix, data[at + 6:at + NODE_BYTES])
        if nodes and node.first < nodes[-1].end:
            raise BadCover(f"node {at // NODE_BYTES} overlaps the one before or is out of order")
        nodes.append(node)
    return Cover(tuple(nodes))
