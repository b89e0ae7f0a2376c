"""The puncturable key tree of log positions (ADR-0081), pure: each position's key is the leaf a
reference derivation (HMAC down the position's 40 bits) gives; a punctured position has no key and
no node kept derives it, while every other position keeps its key; the cover stays small and reads
back from its bytes; a cached reader in any order gives what the plain one gives."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import random

import pytest

from fermix_memory.domain.position_keys import (
    DEPTH,
    LIMIT,
    NODE_BYTES,
    BadCover,
    Cover,
    LeafKeys,
    Node,
    child,
    cover_bytes,
    held,
    key_of,
    parse_cover,
    puncture,
)

ROOT = bytes(range(32))


def reference(seed: bytes, position: int, depth: int = 0) -> bytes:
    """The seed of the node at ``depth`` on ``position``'s path (the leaf at DEPTH), derived anew."""
    for bit in format(position, f"0{DEPTH}b")[:depth]:
        seed = hmac.new(seed, b"\x00" if bit == "0" else b"\x01", hashlib.sha256).digest()
    return seed


def test_children_are_the_hmac_of_their_parent() -> None:
    assert child(ROOT, 0) == hmac.new(ROOT, b"\x00", hashlib.sha256).digest()
    assert child(ROOT, 1) == hmac.new(ROOT, b"\x01", hashlib.sha256).digest()
    assert child(ROOT, 0) != child(ROOT, 1)


@pytest.mark.parametrize("position", [0, 1, 2, 3, 7, 1000, 2**39, LIMIT - 2, LIMIT - 1])
def test_a_position_key_is_its_leaf(position: int) -> None:
    whole = Cover.whole(ROOT)
    assert key_of(whole, position) == reference(ROOT, position, DEPTH)
    assert LeafKeys(whole).key_of(position) == reference(ROOT, position, DEPTH)
    assert len(key_of(whole, position) or b"") == 32


def test_keys_differ_by_position_and_by_root() -> None:
    whole = Cover.whole(ROOT)
    keys = {key_of(whole, p) for p in range(64)}
    assert len(keys) == 64
    assert key_of(Cover.whole(bytes(32)), 5) != key_of(whole, 5)


@pytest.mark.parametrize("bad", [-1, LIMIT, LIMIT + 5, True, 1.0, "3"])
def test_a_position_outside_the_tree_is_refused(bad: object) -> None:
    whole = Cover.whole(ROOT)
    with pytest.raises(ValueError, match="position of the key tree"):
        key_of(whole, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="position of the key tree"):
        LeafKeys(whole).key_of(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="position of the key tree"):
        puncture(whole, [3, bad])  # type: ignore[list-item]


@pytest.mark.parametrize("size", [0, 31, 33])
def test_a_root_seed_is_32_bytes(size: int) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        Cover.whole(bytes(size))


def test_a_node_spans_its_subtree() -> None:
    assert (Node(0, 0, ROOT).first, Node(0, 0, ROOT).end) == (0, LIMIT)
    assert (Node(DEPTH, 9, ROOT).first, Node(DEPTH, 9, ROOT).end) == (9, 10)
    assert (Node(38, 3, ROOT).first, Node(38, 3, ROOT).end) == (12, 16)
    assert "seed" not in repr(Node(1, 1, ROOT))


def check_punctured(cover: Cover, punctured: set[int], probes: list[int], some: int = 40) -> None:
    """Punctured positions (``some`` of them looked at) have no key, and no node kept is on their
    path; the rest keep theirs."""
    for p in sorted(punctured)[:some]:
        assert key_of(cover, p) is None and LeafKeys(cover).key_of(p) is None
        assert cover.covering(p) is None
        path = {reference(ROOT, p, depth) for depth in range(DEPTH + 1)}
        assert not [n for n in cover.nodes if n.first <= p < n.end or n.seed in path]
    for p in probes:
        if p not in punctured:
            assert key_of(cover, p) == reference(ROOT, p, DEPTH)
    nodes = cover.nodes
    assert all(a.end <= b.first for a, b in itertools.pairwise(nodes))


def test_held_names_the_positions_that_still_have_a_key() -> None:
    cover = puncture(Cover.whole(ROOT), [3, 4, 9])
    assert held(cover, [9, 2, 3, 5, 5, 0, LIMIT - 1, 8, 10]) == [0, 2, 5, 8, 10, LIMIT - 1]
    assert held(cover, []) == [] and held(Cover(()), [1, 2]) == []
    with pytest.raises(ValueError, match="position of the key tree"):
        held(cover, [LIMIT])


def test_one_punctured_position_leaves_a_sibling_per_level() -> None:
    cover = puncture(Cover.whole(ROOT), [1000])
    assert len(cover.nodes) == DEPTH
    assert all(n.seed == reference(ROOT, n.first, n.depth) for n in cover.nodes)
    check_punctured(cover, {1000}, [0, 999, 1001, 1023, 1024, LIMIT - 1])


def test_neighbours_share_their_nodes() -> None:
    assert len(puncture(Cover.whole(ROOT), [4, 5]).nodes) == DEPTH - 1  # siblings: their parent goes
    assert len(puncture(Cover.whole(ROOT), range(16, 32)).nodes) == DEPTH - 4  # an aligned block of 16
    assert len(puncture(Cover.whole(ROOT), [0]).nodes) == DEPTH
    assert len(puncture(Cover.whole(ROOT), [LIMIT - 1]).nodes) == DEPTH
    assert puncture(Cover.whole(ROOT), [0, 1, 2, 3]).nodes[0] == Node(DEPTH - 2, 1, reference(ROOT, 4, DEPTH - 2))


def test_the_whole_tree_punctured_leaves_nothing() -> None:
    cover = Cover((Node(DEPTH - 3, 5, reference(ROOT, 40, DEPTH - 3)),))
    assert puncture(cover, range(40, 48)).nodes == ()
    assert key_of(Cover(()), 3) is None and LeafKeys(Cover(())).key_of(3) is None


def test_puncturing_in_steps_is_puncturing_at_once_and_again_changes_nothing() -> None:
    rng = random.Random(7)
    positions = rng.sample(range(1, 5000), 300)
    at_once = puncture(Cover.whole(ROOT), positions)
    stepwise = Cover.whole(ROOT)
    for start in range(0, 300, 37):
        stepwise = puncture(stepwise, positions[start:start + 37])
    assert stepwise == at_once
    assert puncture(at_once, [*positions[:50], positions[0]]) == at_once
    assert puncture(at_once, []) == at_once
    check_punctured(at_once, set(positions), rng.sample(range(0, 6000), 400))


def test_positions_outside_a_node_of_the_cover_leave_it_as_it_is() -> None:
    cover = puncture(Cover.whole(ROOT), [8])
    again = puncture(cover, [8, 9])
    assert len(again.nodes) == len(cover.nodes) - 1 and [n for n in again.nodes if n.first == 9] == []
    assert [n for n in cover.nodes if n not in again.nodes] == [Node(DEPTH, 9, reference(ROOT, 9, DEPTH))]
    check_punctured(again, {8, 9}, list(range(0, 20)))
    assert puncture(cover, [9, 8]) == again


def test_a_thousand_positions_keep_the_cover_small() -> None:
    run = puncture(Cover.whole(ROOT), range(5000, 6000))
    assert len(run.nodes) <= 2 * DEPTH
    spread = puncture(Cover.whole(ROOT), range(10, 10_010, 10))
    assert len(spread.nodes) <= 1000 * 4 + DEPTH
    check_punctured(spread, set(range(10, 10_010, 10)), list(range(0, 200)) + list(range(9950, 10_100)), 5)


def test_the_cached_reader_gives_the_plain_keys_in_any_order() -> None:
    rng = random.Random(3)
    punctured = set(rng.sample(range(0, 3000), 200))
    cover = puncture(Cover.whole(ROOT), punctured)
    keys = LeafKeys(cover)
    order = [*range(0, 1500), *rng.sample(range(0, 3000), 800), 2999, 0, 0, 1024, 1023, 1025, LIMIT - 1, 4096]
    for p in order:
        assert keys.key_of(p) == key_of(cover, p), p
    whole = LeafKeys(Cover.whole(ROOT))
    for p in [5, 5, 4, 6, 2**39 - 1, 2**39, 3, LIMIT - 1]:
        assert whole.key_of(p) == reference(ROOT, p, DEPTH), p


def test_the_cached_reader_derives_only_below_where_paths_part(monkeypatch: pytest.MonkeyPatch) -> None:
    from fermix_memory.domain import position_keys
    calls = []
    real = position_keys.child
    monkeypatch.setattr(position_keys, "child", lambda seed, bit: calls.append(bit) or real(seed, bit))
    keys = LeafKeys(Cover.whole(ROOT))
    keys.key_of(8)
    assert len(calls) == DEPTH
    calls.clear()
    keys.key_of(9)  # a sibling: one step
    assert len(calls) == 1
    calls.clear()
    keys.key_of(10)  # parts two levels up
    assert len(calls) == 2
    calls.clear()
    keys.key_of(10)
    assert calls == []


def test_a_cover_reads_back_from_its_bytes() -> None:
    cover = puncture(Cover.whole(ROOT), [3, 4, 1000, LIMIT - 1])
    data = cover_bytes(cover)
    assert len(data) == NODE_BYTES * len(cover.nodes)
    assert parse_cover(data) == cover
    assert parse_cover(cover_bytes(Cover.whole(ROOT))) == Cover.whole(ROOT)
    assert cover_bytes(Cover.whole(ROOT)) == bytes(6) + ROOT
    assert cover_bytes(Cover((Node(DEPTH, LIMIT - 1, ROOT),))) == bytes((DEPTH,)) + b"\xff" * 5 + ROOT
    assert parse_cover(b"") == Cover(())


def node(depth: int, prefix: int) -> bytes:
    return bytes((depth,)) + prefix.to_bytes(5, "big") + ROOT


@pytest.mark.parametrize(("data", "problem"), [
    (node(0, 0)[:-1], "records of 38 bytes"),
    (node(0, 0) + b"\x00", "records of 38 bytes"),
    (node(DEPTH + 1, 0), "not in a tree"),
    (node(0, 1), "not in a tree"),
    (node(3, 8), "not in a tree"),
    (node(1, 0) + node(2, 1), "overlaps"),
    (node(2, 1) + node(2, 0), "overlaps"),
    (node(2, 1) + node(2, 1), "overlaps"),
    (node(2, 0) + node(2, 2) + node(3, 5), "overlaps"),
])
def test_bytes_that_are_not_a_cover_are_refused(data: bytes, problem: str) -> None:
    with pytest.raises(BadCover, match=problem):
        parse_cover(data)


def test_edge_nodes_read_back() -> None:
    assert parse_cover(node(3, 7)).nodes == (Node(3, 7, ROOT),)
    assert parse_cover(node(DEPTH, LIMIT - 1)).nodes == (Node(DEPTH, LIMIT - 1, ROOT),)
    assert parse_cover(node(2, 0) + node(2, 1) + node(1, 1)).nodes == (
        Node(2, 0, ROOT), Node(2, 1, ROOT), Node(1, 1, ROOT))
